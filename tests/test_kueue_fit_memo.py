"""`Admission.fit_job` remembers `fit` verdicts per request class while the usage stays the
same: it must never answer from books that have changed, whoever changed them (preemption's
trials write `usage` directly, and put it back)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.kueue.admission import Admission
from tests.conformance.test_kueue import CQ, FLAVOR, K

# jobs as (ClusterQueue, cores): equal requests share a class, so their verdicts share a memo entry
JOBS = [("eng-alpha", 40), ("eng-beta", 40), ("eng-alpha", 40), ("eng-alpha", 70), ("lend-a", 3), ("lend-b", 3)]


def books() -> Admission:
    request = np.array([[0.0, cpu * 1000, 0] for _, cpu in JOBS])
    return Admission(K, request, np.ones((len(JOBS), len(K.flavor_names)), bool),
                     np.array([CQ[q] for q, _ in JOBS]), np.zeros(len(JOBS), np.int64))


def test_a_verdict_is_not_reused_once_the_usage_changed():
    """Jobs 0 and 2 (eng-alpha, 40 cores each) share a class. On empty books 40 cores fit
    eng-alpha's on-demand (nominal 50); once 20 cores are written straight into its usage,
    20 + 40 = 60 > 50 borrows 10 from eng-beta's 50 unused on-demand cores (fits, borrowing);
    at 90 cores used, 130 exceeds nominal + borrowing limit 100: no fit. Back to 0: fits again."""
    adm = books()
    c, f = CQ["eng-alpha"], FLAVOR["on-demand"]
    assert adm.fit_job(0, c, f) == (True, False)
    adm.usage[c, f, 1] = 20_000.0
    assert adm.fit_job(2, c, f) == (True, True)
    adm.usage[c, f, 1] = 90_000.0
    assert adm.fit_job(2, c, f) == (False, False)
    adm.usage[c, f, 1] = 0.0
    assert adm.fit_job(0, c, f) == (True, False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, len(JOBS) - 1), st.sampled_from(sorted(FLAVOR.values())),
                          st.sampled_from(sorted(CQ.values())), st.integers(0, 12)), max_size=40))
def test_the_memo_answers_as_fit_does(steps):
    """Any interleaving of checks and direct usage writes (a queue's cores on a flavor set to
    k * 10 cores): `fit_job` answers as `fit` on the books as they are."""
    adm = books()
    for check, j, f, c, tens in steps:
        if check:
            cj = int(adm.queue_of[j])
            assert adm.fit_job(j, cj, f) == adm.fit(cj, f, adm.request[j])
        else:
            adm.usage[c, f, 1] = tens * 10_000.0
