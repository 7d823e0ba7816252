"""Upstream's Job controller pod-failure backoff, translated: kubernetes/kubernetes
pkg/controller/job/backoff_utils_test.go, TestNewBackoffRecord and TestGetRemainingBackoffTime
(harness/job_backoff.py: `next_record`, `remaining_s`). Times are seconds from upstream's
defaultTestTime (2009-11-10 23:00 UTC = 0); its millisecond offsets are kept; its nil
lastFailureTime is nan."""

from __future__ import annotations

import math

import pytest

from harness.job_backoff import next_record, remaining_s

MS = 0.001
NAN = math.nan


@pytest.mark.parametrize(("case", "store", "succeeded", "failed", "want"), [
    ("Empty backoff store and one new failure", (0, NAN), (), (0.0,), (1, 0.0)),
    ("Empty backoff store and two new failures", (0, NAN), (), (0.0, -1 * MS), (2, 0.0)),
    ("Empty backoff store, two failures followed by success", (0, NAN), (0.0,), (-2 * MS, -1 * MS), (0, NAN)),
    ("Empty backoff store, two failures, one success and two more failures", (0, NAN), (-2 * MS,),
     (0.0, -4 * MS, -3 * MS, -1 * MS), (2, 0.0)),
    ("Backoff store having failure count 2 and one new failure", (2, NAN), (), (0.0,), (3, 0.0)),
    ("Empty backoff store with success and failure at same timestamp", (0, NAN), (0.0,), (0.0,), (0, NAN)),
    ("Empty backoff store with no success/failure", (0, NAN), (), (), (0, NAN)),
    ("Empty backoff store with one success", (0, NAN), (0.0,), (), (0, NAN)),
])
def test_new_backoff_record(case, store, succeeded, failed, want):
    failures, last = next_record(*store, succeeded, failed)
    assert failures == want[0], case
    assert (math.isnan(last) and math.isnan(want[1])) or last == want[1], case


@pytest.mark.parametrize(("case", "failures", "last", "now", "want"), [
    ("no failures", 0, NAN, 0.0, 0.0),
    ("one failure; current time and failure time are same", 1, 0.0, 0.0, 5.0),
    ("one failure; current time == 1 second + failure time", 1, 0.0, 1.0, 4.0),
    ("one failure; current time == expected backoff time", 1, 0.0, 5.0, 0.0),
    ("one failure; current time == expected backoff time + 1 Second", 1, 0.0, 6.0, 0.0),
    ("three failures; current time and failure time are same", 3, 0.0, 0.0, 20.0),
    ("eight failures; current time and failure time are same; backoff not exceeding maxBackoff", 8, 0.0, 0.0,
     640.0),
    ("nine failures; current time and failure time are same; backoff exceeding maxBackoff", 9, 0.0, 0.0, 700.0),
])
def test_get_remaining_backoff_time(case, failures, last, now, want):
    # the test's own defaultBackoff 5 s and maxBackoff 700 s
    assert remaining_s(failures, last, now, base_s=5.0, cap_s=700.0) == want, case
