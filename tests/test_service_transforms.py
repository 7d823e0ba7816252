"""Seeded transforms of a service trace (harness/services/transforms.py): time-shifted copies
and repetition with jitter, deterministic per seed, checked against hand-computed rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from harness.errors import ConfigError
from harness.services.trace import demand_from_columns, services_from_columns, validate_demand, validate_services
from harness.services.transforms import Copies, Repeat

SERVICES = services_from_columns({
    "service": ["a", "b"], "cpu_milli": [1000, 2000], "memory_mib": [1024, 2048], "gpu_count": [1, 2],
    "gpu_milli": [1000, 1000], "capacity_per_replica": [10.0, 20.0], "cold_start_s": [60.0, 90.0],
    "max_replicas": [4, 8]})
#: a: 1 on [0, 10), 2 on [10, 20), 3 on [20, 30), idle (0) from 30; b: 0 until 5, then 7
DEMAND = demand_from_columns({"service": ["a", "b", "a", "a", "a"], "start_s": [0.0, 5.0, 10.0, 20.0, 30.0],
                              "demand": [1.0, 7.0, 2.0, 3.0, 0.0]})


def rows(demand: pa.Table, service: str) -> list[tuple[float, float]]:
    keep = np.array(demand.column("service").to_pylist()) == service
    d = demand.filter(keep)
    return list(zip(d.column("start_s").to_pylist(), d.column("demand").to_pylist(), strict=True))


def value_at(demand: pa.Table, service: str, t: np.ndarray) -> np.ndarray:
    r = rows(demand, service)
    starts, values = np.array([s for s, _ in r]), np.array([v for _, v in r])
    i = np.searchsorted(starts, t, side="right") - 1
    return np.where(i >= 0, values[np.maximum(i, 0)], 0.0)


def test_repeat_without_jitter_plays_the_span_again_by_hand():
    """Span 30 s (the latest start). k=2: a's three windows again at 30, 40, 50, its idle row
    moved to 60; b (no row at the span) gets its implicit 0 from 0 and 30, 7 from 5 and 35."""
    services, demand = Repeat(2, jitter=0.0)(SERVICES, DEMAND)
    assert services.equals(SERVICES)
    assert rows(demand, "a") == [(0.0, 1.0), (10.0, 2.0), (20.0, 3.0), (30.0, 1.0), (40.0, 2.0), (50.0, 3.0),
                                 (60.0, 0.0)]
    assert rows(demand, "b") == [(0.0, 0.0), (5.0, 7.0), (30.0, 0.0), (35.0, 7.0)]


def test_repeat_jitter_is_seeded_positive_mean_one_and_spares_the_first_pass():
    long = demand_from_columns({"service": ["a"] * 2001, "start_s": np.arange(2001) * 10.0,
                                "demand": np.r_[np.full(2000, 100.0), 0.0]})
    _, once = Repeat(3, jitter=0.2, seed=4)(SERVICES, long)
    _, again = Repeat(3, jitter=0.2, seed=4)(SERVICES, long)
    _, other = Repeat(3, jitter=0.2, seed=5)(SERVICES, long)
    assert once.equals(again) and not once.equals(other)
    v = once.column("demand").to_numpy()
    assert (v[:2000] == 100.0).all() and v[-1] == 0.0
    noisy = v[2000:-1]
    assert (noisy > 0).all() and noisy.std() > 10
    assert noisy.mean() == pytest.approx(100.0, rel=0.02)  # 4,000 draws of mean 1: within 1.5 sigma x 2


def test_copies_are_named_copy_one_is_the_original_and_the_others_circular_shifts():
    services, demand = Copies(4, seed=7)(SERVICES, DEMAND)
    assert services.column("service").to_pylist() == ["a-1", "a-2", "a-3", "a-4", "b-1", "b-2", "b-3", "b-4"]
    assert services.column("max_replicas").to_pylist() == [4] * 4 + [8] * 4
    validate_demand(demand, "d", validate_services(services, "s"), "s")
    assert rows(demand, "a-1") == [(0.0, 1.0), (10.0, 2.0), (20.0, 3.0), (30.0, 0.0)]
    t = np.arange(0, 30, 0.5)
    for name in ("a", "b"):
        original = value_at(DEMAND, name, t)
        shifts = set()
        for i in (2, 3, 4):
            copy = value_at(demand, f"{name}-{i}", t)
            # some whole-second shift d in [0, 30) makes the copy f((t - d) mod 30)
            fits = [d for d in range(30) if (value_at(DEMAND, name, (t - d) % 30) == copy).all()]
            assert fits, f"{name}-{i} is not a circular shift of {name}"
            shifts.add(fits[0])
            if name == "a":  # the idle row at the span stays where it is
                assert rows(demand, f"{name}-{i}")[-1] == (30.0, 0.0)
        assert len(shifts) > 1, "the copies should not all share one offset"
        assert (original == value_at(demand, f"{name}-1", t)).all()


def test_copies_are_deterministic_per_seed_and_per_service():
    one = Copies(3, seed=1)(SERVICES, DEMAND)[1]
    assert one.equals(Copies(3, seed=1)(SERVICES, DEMAND)[1])
    assert not one.equals(Copies(3, seed=2)(SERVICES, DEMAND)[1])
    # dropping service b leaves a's copies as they were (each service draws its own stream)
    only_a = DEMAND.filter(np.array(DEMAND.column("service").to_pylist()) == "a")
    alone = Copies(3, seed=1)(SERVICES.slice(0, 1), only_a)[1]
    for i in (1, 2, 3):
        assert rows(alone, f"a-{i}") == rows(one, f"a-{i}")


def test_one_copy_and_one_repeat_leave_the_trace_as_it_is():
    assert Copies(1, seed=3)(SERVICES, DEMAND) == (SERVICES, DEMAND)
    assert Repeat(1, jitter=0.5, seed=3)(SERVICES, DEMAND) == (SERVICES, DEMAND)


@pytest.mark.parametrize("make, key", [
    (lambda: Copies(0), "--copies"), (lambda: Copies(2.5), "--copies"), (lambda: Repeat(0), "--repeat"),
    (lambda: Repeat(2, jitter=float("nan")), "--jitter"), (lambda: Repeat(2, jitter=3.0), "--jitter"),
])
def test_bad_parameters_are_refused(make, key):
    with pytest.raises(ConfigError, match=key):
        make()


@pytest.mark.parametrize("step, key", [(Copies(2_000_001), "--copies"), (Repeat(2_000_001), "--repeat")])
def test_a_factor_that_would_make_too_many_demand_rows_is_refused_before_any_is_made(step, key):
    """5 rows x 2,000,001 is more than MAX_DEMAND_ROWS (10 million): refused at once, not after
    allocating every copy."""
    with pytest.raises(ConfigError, match=f"^{key}: 2,000,001 would make about 10,000,005 demand rows"):
        step(SERVICES, DEMAND)


def test_each_service_draws_its_own_offsets():
    """Two services with the same demand get different shifts: the stream is keyed by name."""
    twin = demand_from_columns({"service": ["a", "a", "a", "z", "z", "z"], "start_s": [0.0, 10.0, 20.0] * 2,
                                "demand": [1.0, 2.0, 0.0] * 2})
    services = services_from_columns({**{c: SERVICES.column(c) for c in SERVICES.column_names},
                                      "service": ["a", "z"]})
    _, copies = Copies(6, seed=0)(services, twin)
    assert [rows(copies, f"a-{i}") for i in range(2, 7)] != [rows(copies, f"z-{i}") for i in range(2, 7)]
