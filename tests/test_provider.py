"""The provider model (harness/cloud.py): how a pool answers a request beyond its stock (`error`
at once, or `silent`: phantoms that boot forever), stock that varies over time, what loops may
read of it, and the billing of phantoms (harness/metrics.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from harness.cloud import NEVER, STOCK_CHUNK
from harness.errors import ConfigError, LoopbenchError
from harness.metrics import MILLI_HOUR
from harness.scheduler import Scheduler
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import ABSENT, BOOTING, READY
from harness.workload import compile_workload
from tests import scenarios as sc


def sim_of(pools: list[dict], shortage: str = "error", pods: list[dict] | None = None, seed: int = 0,
           horizon_s: float = 7200.0) -> Simulation:
    cl = sc.Cluster(node_types=[sc.node_type("h100")], pools=pools, name="provider", shortage=shortage)
    sim = Simulation(compile_workload(sc.trace(pods or [{}]), cl), cl, seed=seed, horizon_s=horizon_s)
    Scheduler(LeastAllocated()).attach(sim)  # orders the queue
    return sim


def gpu_pool(**kw) -> dict:
    return sc.pool("gpu", "h100", boot_s=300.0, **{"max_size": 8, "price_on_demand": 10.0, **kw})


def test_error_pool_grants_only_its_stock_at_once():
    sim = sim_of([gpu_pool(stock=2)])
    assert len(sim.provision(0, 5, atomic=False)) == 2
    assert (sim.state.status == BOOTING).sum() == 2


def test_silent_pool_accepts_every_node_but_only_stock_comes_up():
    """Silent: 5 accepted (free slots allow 8), stock 2: two ready at 300 s, three booting forever."""
    sim = sim_of([gpu_pool(stock=2)], shortage="silent")
    assert len(sim.provision(0, 5, atomic=False)) == 5
    sim.advance_to(7000.0)
    assert (sim.state.status == READY).sum() == 2 and (sim.state.status == BOOTING).sum() == 3


def test_silent_requests_stop_at_free_slots():
    sim = sim_of([gpu_pool(stock=2, max_size=4)], shortage="silent")
    assert len(sim.provision(0, 6, atomic=False)) == 4


def test_pool_shortage_overrides_the_cluster_default():
    sim = sim_of([gpu_pool(stock=1, shortage="error"), {**gpu_pool(stock=1), "name": "b", "shortage": "silent"}])
    assert [p.shortage for p in sim.cluster.pools] == ["error", "silent"]
    assert len(sim.provision(0, 3, atomic=False)) == 1 and len(sim.provision(1, 3, atomic=False)) == 3


def test_atomic_silent_request_beyond_stock_is_all_phantoms():
    """All or nothing where the pool honours it: silently, none of them comes up."""
    sim = sim_of([gpu_pool(stock=2, atomic=True)], shortage="silent")
    assert len(sim.provision(0, 3, atomic=True)) == 3
    sim.advance_to(7000.0)
    assert (sim.state.status == READY).sum() == 0 and sim._cloud.phantom.sum() == 3


def test_phantoms_are_neither_billed_nor_booting():
    """Stock 1, 3 accepted: billed = 8 GPUs booting 0-300 s, then 8 ready to 3600 s (no pod
    runs: 0 used); the two phantoms add nothing. Cost: one node at 10 USD/h for 1 h."""
    sim = sim_of([gpu_pool(stock=1)], shortage="silent", pods=[{"submit_s": 9000.0}])
    sim.provision(0, 3, atomic=False)
    sim.advance_to(300.0)  # the real node's ready event
    sim.advance_to(3600.0)
    tot = sim.acct.totals
    assert tot["billed"] / MILLI_HOUR == pytest.approx(8.0)
    assert tot["booting"] / MILLI_HOUR == pytest.approx(8 * 300 / 3600)
    assert tot["cost"] == pytest.approx(10.0)


def test_phantom_in_a_committed_slot_bills_the_slot_as_empty():
    """A committed slot is paid whether a node runs in it or not: a phantom there counts as
    the empty committed slot it is (8 GPUs committed idle), not as booting."""
    sim = sim_of([gpu_pool(stock=0, committed=1, price_committed=6.0)], shortage="silent",
                 pods=[{"submit_s": 9000.0}])
    sim.provision(0, 1, atomic=False)
    sim.advance_to(3600.0)
    tot = sim.acct.totals
    assert tot["booting"] == 0 and tot["committed"] / MILLI_HOUR == pytest.approx(8.0)
    assert tot["cost"] == pytest.approx(6.0)


def test_stock_steps_change_what_a_request_gets():
    """Stock 1 from 0 s, 3 from 1000 s, 0 from 2000 s: 1 node at 0, 2 more at 1000 (3 - 1), none
    at 2000, and the drop to 0 leaves the three nodes up."""
    sim = sim_of([gpu_pool(stock=[{"at_s": 0, "stock": 1}, {"at_s": 1000, "stock": 3},
                                  {"at_s": 2000, "stock": 0}])])
    assert len(sim.provision(0, 5, atomic=False)) == 1
    sim.advance_to(1000.0)
    assert len(sim.provision(0, 5, atomic=False)) == 2
    sim.advance_to(2000.0)
    assert len(sim.provision(0, 5, atomic=False)) == 0
    sim.advance_to(3000.0)
    assert (sim.state.status == READY).sum() == 3
    assert sim.cluster.pools[0].stock == 3  # the most it ever supplies


def test_drawn_stock_is_seeded_within_bounds_and_independent_of_requests():
    """Redrawn every 600 s between 1 and 4 from the pool's own stream: the same seed gives the
    same schedule whatever was asked, another seed another one."""
    pool = gpu_pool(stock={"low": 1, "high": 4, "period_s": 600.0})

    def schedule(seed: int, ask: bool) -> list[int | None]:
        sim = sim_of([pool], seed=seed)
        if ask:
            sim.provision(0, 3, atomic=False)
        return [sim._cloud.stock(0, t) for t in np.arange(0, 30) * 600.0]

    a = schedule(0, ask=False)
    assert a == schedule(0, ask=True) and all(1 <= s <= 4 for s in a) and len(set(a)) > 1  # type: ignore[operator]
    assert a != schedule(1, ask=False)


def test_drawn_stock_is_the_streams_draws_in_period_order_across_chunks():
    """Drawn in bulk, each period's stock is what one draw per period from the pool's stream
    gives (as before bulk draws: existing configs replay bit for bit), past a chunk's end too."""
    sim = sim_of([gpu_pool(stock={"low": 0, "high": 8, "period_s": 60.0})], seed=3)
    periods = [0, 1, 2, 999, STOCK_CHUNK - 1, STOCK_CHUNK, STOCK_CHUNK + 1, 3 * STOCK_CHUNK + 7]
    got = [sim._cloud.stock(0, 60.0 * k + 30.0) for k in periods]
    rng = np.random.default_rng([3, 7919, 0, 1])
    one_by_one = [int(rng.integers(0, 9)) for _ in range(periods[-1] + 1)]
    assert got == [one_by_one[k] for k in periods]


def test_a_one_second_stock_period_a_year_on_is_drawn_fast():
    """A period of 1 s (the least allowed) asked a year on: 31.5M draws in bulk, not a Python
    list of them (which hung a replay, its memory growing)."""
    sim = sim_of([gpu_pool(stock={"low": 1, "high": 4, "period_s": 1})], horizon_s=400 * 86400.0)
    start = time.perf_counter()
    assert 1 <= sim._cloud.stock(0, 365 * 86400.0) <= 4
    assert time.perf_counter() - start < 2.0


def test_boot_delays_unchanged_by_silent_phantoms():
    """A phantom draws no boot delay: the real nodes' delays are the stream's first draws."""
    pool = gpu_pool(stock=1, boot_delay={"min_s": 100, "max_s": 500})
    silent, error = sim_of([pool], shortage="silent"), sim_of([pool])
    _, d_silent = silent._cloud.request(0, 3, False, 0.0)
    _, d_error = error._cloud.request(0, 3, False, 0.0)
    assert d_silent[0] == d_error[0] and (d_silent[1:] == NEVER).all() and len(d_error) == 1


def test_loops_read_room_not_stock():
    """The facade a loop gets has free slots and room under max_size; nothing of stock."""
    sim = sim_of([gpu_pool(stock=2)], shortage="silent")
    assert sim.cloud.room(0) == 8
    sim.provision(0, 5, atomic=False)
    assert sim.cloud.room(0) == 3 and len(sim.cloud.free_slots(0)) == 3
    assert not hasattr(sim.cloud, "available") and not hasattr(sim.cloud, "stock")


def test_node_requested_at_is_per_slot_until_removed():
    sim = sim_of([gpu_pool()], shortage="silent")
    sim.advance_to(50.0)
    (n,) = sim.provision(0, 1, atomic=False)
    assert sim.node_requested_at[n] == 50.0 and np.isnan(sim.node_requested_at[n + 1])
    sim.remove_node(int(n))
    assert np.isnan(sim.node_requested_at[n]) and sim.state.status[n] == ABSENT


def test_removing_a_booting_node_returns_its_planned_pods_to_the_queue():
    """A planner's pods bound onto a booting node go back to pending when it gives the node up."""
    sim = sim_of([gpu_pool(stock=0)], shortage="silent", pods=[{}, {"job_id": "j0"}])
    (n,) = sim.provision(0, 1, atomic=False)
    sim.advance_to(0.0)
    pods = sim.unbound_pods(0)
    for p in pods.tolist():
        sim.bind(p, int(n), sim.state.pick_devices(int(n), 1, 1000, False, False))
    assert not sim.queue.holds[0]
    sim.remove_node(int(n))
    assert sim.queue.holds[0] and len(sim.unbound_pods(0)) == 2 and sim.state.status[n] == ABSENT


def test_loops_cannot_read_durations():
    sim = sim_of([gpu_pool()])
    with pytest.raises(LoopbenchError, match="a loop may not read a pod's duration"):
        sim.w.duration[0]


@pytest.mark.parametrize(("stock", "where", "rule"), [
    ([{"at_s": 5, "stock": 1}], "stock[0].at_s", "steps start at 0 and increase, got 5"),
    ([{"at_s": 0, "stock": 1}, {"at_s": 0, "stock": 2}], "stock[1].at_s", "got 0 after 0"),
    ([{"at_s": 0, "stock": -1}], "stock[0].stock", "must be in [0, 1,000,000], got -1"),
    ([{"at_s": 0, "count": 1}], "stock[0]", "unknown key 'count'"),
    ([], "stock", "a non-empty list of {at_s, stock} steps"),
    ("lots", "stock", "got 'lots'"),
    ({"low": 3, "high": 1, "period_s": 60}, "stock", "need 0 <= low <= high, got 3 and 1"),
    ({"low": 1, "high": 3, "period_s": 0}, "stock.period_s", "must be at least 1 second, got 0"),
    ({"low": 1, "high": 3}, "stock", "missing 1 required positional argument: 'period_s'"),
])
def test_bad_stock_is_refused_by_key_value_and_rule(stock, where, rule):
    with pytest.raises(ConfigError) as err:
        sim_of([gpu_pool(stock=stock)])
    assert err.value.where == f"pool 'gpu' at cluster.pools[0].{where}".rstrip(".")
    assert rule in err.value.rule


def test_bad_shortage_is_refused():
    with pytest.raises(ConfigError, match=r"cluster.shortage: must be one of error, silent, got 'quiet'"):
        sim_of([gpu_pool()], shortage="quiet")
    with pytest.raises(ConfigError, match=r"pools\[0\].shortage: must be one of error, silent, got 'never'"):
        sim_of([gpu_pool(shortage="never")])
