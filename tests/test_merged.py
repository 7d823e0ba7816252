"""The merged planner learns the provider's capacity only by asking.

A request may come back short at once (an insufficient-capacity error) or be accepted with
nodes that never come up (they stay booting). The planner backs the pool off, re-plans the
job, and gives up a node still booting `max_node_provision_time_s` after it asked for it.
A silent pool is the provider's own (`shortage: silent`): nodes beyond its stock never come up.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.quiet import NO_TICKS
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc

H = 3600.0


def two_pools(**a):
    """Pool a (8 $/h) and pool b (10 $/h) of 8-GPU nodes, booting 300 s."""
    return sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", price_on_demand=8.0, **a),
                                               sc.pool("b", "gpu8", price_on_demand=10.0)])


def replay(cl, table, horizon_s: float, quiet: bool = True, **settings):
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=horizon_s)
    loop = sc.merged(**settings)
    if not quiet:
        loop.idle_ticks = lambda start, before: NO_TICKS
    sim.run(loop)
    return summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}).to_dicts()[0], sim, loop


def test_a_short_grant_backs_the_pool_off_and_the_job_is_planned_again_on_what_was_granted():
    """A gang of two 8-GPU pods: two nodes of pool a (16 $/h) beat two of b (20 $/h), but a
    has stock for one. Asked for 2 at t=0, it grants 1 (error at once): a is backed off
    (300 s, the CA-like loop's initial backoff) and the job planned again in the same scan
    over the granted node (in flight, cost 0) plus one new node of b (10 $/h). Both are ready
    at 300, when the gang starts. Old code read the stock and bought two b nodes."""
    cl = two_pools(stock=1)
    table = sc.trace([{"job_id": "g", "min_member": 2, "gpu_count": 8, "duration_s": 600.0} for _ in range(2)])
    row, sim, loop = replay(cl, table, 2 * H)
    assert [n.pool for n in sim.nodes] == [0, 1] and [n.requested_at for n in sim.nodes] == [0.0, 0.0]
    assert row["gang_latency_p50_s"] == pytest.approx(300.0) and row["gangs_never_started"] == 0
    assert loop.backoff.until[0] == 300.0 and loop.backoff.length[1] == 0.0


def test_requests_granted_nothing_or_part_are_planned_again_in_the_same_scan():
    """A job of one 8-GPU pod and a gang of two, pool a with stock 1 and all-or-nothing not
    honoured. The lone pod is planned first (queue order) on one node of a, granted; the
    gang's plan, two more nodes of a, comes back with none (stock spent), a is backed off and
    the gang planned on two b nodes. Nothing was granted short but unused, so nothing is
    dropped: 3 nodes. With stock 2 the gang's request grants 1 of 2: the re-plan is that
    node plus one b node (cheaper than two b nodes): still 3 nodes and nothing dropped."""
    table = sc.trace([{"job_id": "s", "gpu_count": 8, "duration_s": 600.0}]
                     + [{"job_id": "g", "min_member": 2, "gpu_count": 8, "duration_s": 600.0} for _ in range(2)])
    for stock, pools in ((1, [0, 1, 1]), (2, [0, 0, 1])):
        row, sim, _ = replay(two_pools(stock=stock), table, 2 * H)
        assert [n.pool for n in sim.nodes] == pools and all(n.used for n in sim.nodes), stock
        assert row["gangs_never_started"] == 0


def test_a_pool_backed_off_is_still_planned_on_within_what_it_held():
    """Pool a (stock 2) is asked for 3 nodes at 0 for a gang of three and grants 2: backed off
    (here for 3600 s) with a ceiling of 2 nodes; the gang runs on a, a and one b node, 300-360.
    Its nodes go at 960 (unneeded from 360, 600 s). At 1000 a lone pod arrives: a is still
    backed off, but holds 0 of its ceiling of 2, so the pod gets an a node (8 $/h), not b."""
    cl = two_pools(stock=2)
    table = sc.trace([{"job_id": "g", "min_member": 3, "gpu_count": 8, "duration_s": 60.0} for _ in range(3)]
                     + [{"gpu_count": 8, "submit_s": 1000.0, "duration_s": 60.0}])
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=2 * H)
    loop = sc.merged()
    loop.backoff_s = 3600.0
    sim.run(loop)
    assert [(n.pool, n.requested_at) for n in sim.nodes] == [(0, 0.0), (0, 0.0), (1, 0.0), (0, 1000.0)]
    assert loop.backoff.until[0] == 3600.0 and loop.ceiling[0] == 2


def test_a_rack_local_gang_drops_the_granted_nodes_of_the_wrong_rack():
    """A block-local gang of two: pool a (block a, stock 1) is cheaper; granted 1 of 2, the
    re-plan must keep the gang in one block, so it takes two nodes of pool b (block b) and
    the granted block-a node serves no plan: removed at once, at 0 (billed its minimum, 60 s)."""
    cl = sc.cluster([sc.node_type("gpu8")], [
        sc.pool("a", "gpu8", block="block-a", stock=1, price_on_demand=8.0),
        sc.pool("b", "gpu8", block="block-b", price_on_demand=10.0)])
    table = sc.trace([{"job_id": "g", "min_member": 2, "gpu_count": 8, "gang_locality": "block",
                       "duration_s": 600.0} for _ in range(2)])
    row, sim, _ = replay(cl, table, 2 * H)
    assert [(n.pool, n.removed_at) for n in sim.nodes][:1] == [(0, 0.0)]
    assert [n.pool for n in sim.nodes[1:]] == [1, 1] and row["gang_latency_p50_s"] == pytest.approx(300.0)


def test_a_node_that_never_comes_up_is_given_up_after_the_provision_time_and_its_pool_backed_off():
    """Upstream: kubernetes/autoscaler cluster-autoscaler/clusterstate/clusterstate.go
    (`MaxNodeProvisionTime`: a scale-up whose nodes are not up that long is a failed scale-up
    and the node group is backed off), clusterstate_test.go TestExpiredScaleUp (a scale-up
    older than MaxNodeProvisionTime expires and counts as failed). One 8-GPU pod: pool a (cheaper) accepts the request at 0 but the
    node never comes up; nothing else is pending, yet the planner wakes at 900 (0 + 900 s),
    gives the node up (the pod back to the queue, the node removed), backs a off and plans
    the pod on pool b: booting 900-1200, it runs 1200-1800."""
    cl = two_pools(stock=0, shortage="silent")
    table = sc.trace([{"gpu_count": 8, "duration_s": 600.0}])
    row, sim, loop = replay(cl, table, 2 * H)
    assert [(n.pool, n.requested_at, n.removed_at) for n in sim.nodes][:1] == [(0, 0.0, 900.0)]
    assert [(n.pool, n.requested_at, n.ready_at) for n in sim.nodes[1:]] == [(1, 900.0, 1200.0)]
    assert sim.pod_start[0] == 1200.0 and row["pods_done"] == 1
    assert loop.backoff.until[0] == 900.0 + 300.0


def test_a_gang_planned_partly_on_a_phantom_is_planned_again_whole():
    """A gang of two, planned on two nodes of pool a, one of which never comes up (pool a
    silent for its second node only): at 900 the phantom is given up and the gang's other
    member, bound on the ready node but not started, is returned too, so the gang is planned
    again as a unit: on the ready a node (room it has) and one new node of pool b (a is
    backed off), cheaper than two b nodes; b boots 900-1200 and the gang starts at 1200.
    (Pool a: stock 1, silent.)"""
    cl = two_pools(stock=1, shortage="silent")
    table = sc.trace([{"job_id": "g", "min_member": 2, "gpu_count": 8, "duration_s": 600.0} for _ in range(2)])
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=2 * H)
    sim.run(sc.merged())
    assert [(n.pool, n.removed_at) for n in sim.nodes[:2]][1] == (0, 900.0)
    assert len(sim.nodes) == 3 and sim.nodes[2].pool == 1 and sim.nodes[2].requested_at == 900.0
    assert sorted(sim.pod_node.tolist()) == [sim.nodes[0].slot, sim.nodes[2].slot]
    assert sim.job_started[0] == 1200.0


def test_a_gang_uses_the_room_it_has_on_ready_nodes_before_buying():
    """A gang of two 8-GPU pods; a 4-GPU pod holds one of two ready nodes (min_size 1 each,
    fixed pools n0 and n1), so the gang fits only one ready node, not both: the placer (whole
    jobs on ready nodes) cannot place it. The plan takes the free ready node and one new node
    of pool a (8 $/h) rather than two (16 $/h), at the scan at 10; the gang starts when a
    is ready, at 310 (305 s after its submission)."""
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("n0", "gpu8", min_size=1, max_size=1),
                                             sc.pool("n1", "gpu8", min_size=1, max_size=1),
                                             sc.pool("a", "gpu8", price_on_demand=8.0)])
    table = sc.trace([{"job_id": "x", "gpu_count": 4, "duration_s": 3600.0}]
                     + [{"job_id": "g", "min_member": 2, "gpu_count": 8, "submit_s": 5.0, "duration_s": 600.0}
                        for _ in range(2)])
    row, sim, _ = replay(cl, table, 2 * H)
    assert [n.pool for n in sim.nodes] == [0, 1, 2] and row["gang_latency_p50_s"] == pytest.approx(305.0)


def test_a_pod_the_placer_passed_over_goes_to_room_on_a_ready_node_not_to_a_new_node():
    """The placer's cycle may leave a pod pending that fits a ready node (here: a placer that
    never places, standing in for its queueing hints skipping a job it tried at this
    capacity). The planner plans it on the room it has, the ready fixed node, at the first
    scan (0), rather than buying a node of pool a: no node provisioned, the pod runs 0-600."""
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("n0", "gpu8", min_size=1, max_size=1),
                                             sc.pool("a", "gpu8", price_on_demand=8.0)])
    table = sc.trace([{"gpu_count": 8, "duration_s": 600.0}])
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=2 * H)
    loop = sc.merged()
    loop.placer.cycle = lambda now: None
    sim.run(loop)
    assert [n.pool for n in sim.nodes] == [0] and sim.pod_start[0] == 0.0 and sim.pod_end[0] == 600.0


@pytest.mark.parametrize("shortage", ["error", "silent"])
def test_the_provision_timeout_is_a_clock_quiet_ticks_respect(shortage):
    """Bulk quiet ticks and stepping every scan give the same replay, bit for bit, when the
    only thing left to happen is a phantom's timeout."""
    cl = two_pools(stock=1, shortage=shortage)
    table = sc.trace([{"job_id": "g", "min_member": 2, "gpu_count": 8, "duration_s": 600.0} for _ in range(2)]
                     + [{"gpu_count": 8, "submit_s": 4000.0, "duration_s": 60.0}])
    bulk, sim_b, _ = replay(cl, table, 3 * H, quiet=True)
    stepped, sim_s, _ = replay(cl, table, 3 * H, quiet=False)
    nodes = [(n.pool, n.requested_at, n.ready_at, n.removed_at) for n in sim_b.nodes]
    assert np.array_equal(np.array(nodes), np.array([(n.pool, n.requested_at, n.ready_at, n.removed_at)
                                                     for n in sim_s.nodes]), equal_nan=True)
    assert {k: v for k, v in bulk.items() if v == v} == {k: v for k, v in stepped.items() if v == v}


@pytest.mark.parametrize("jobs, bought", [(1, ["small"]), (4, ["small", "small"]), (8, ["big"])])
def test_a_plan_pays_its_share_of_new_nodes_and_the_accelerators_no_queued_pod_would_use(jobs, bought):
    """`jobs` single-GPU jobs queued at 0; pool small (2-GPU nodes, 3 $/h) and big (8-GPU, 8 $/h).
    The first job's plan costs price x (its dominant share of the new node + the node's GPUs
    that neither it nor the other queued GPU pods would fill). 1 job: small 3 x (1/2 + 1/2) = 3,
    big 8 x (1/8 + 7/8) = 8: small. 4 jobs (3 others queued): small 3 x (1/2 + 0) = 1.5, big
    8 x (1/8 + 4/8) = 5: small; the second job goes on its free GPU (booting, cost 0), the third
    finds one other queued: small 1.5, big 8 x (1/8 + 6/8) = 7: a second small node. 8 jobs:
    small 1.5, big 8 x (1/8 + 0) = 1: one big node holds all eight (8 $/h, where pricing each
    job by the whole node's price bought four small ones, 12 $/h)."""
    cl = small_and_big()
    row, sim, _ = replay(cl, sc.trace([{} for _ in range(jobs)]), 2 * H)
    assert [cl.pools[n.pool].name for n in sim.nodes] == bought and row["pods_done"] == jobs


def small_and_big():
    """Pool small (2-GPU nodes, 3 $/h) and big (8-GPU nodes, 8 $/h), booting 300 s."""
    gpu2 = sc.node_type("gpu2", cpu_milli=16000, memory_mib=128000, gpus=2)
    return sc.cluster([gpu2, sc.node_type("gpu8")], [sc.pool("small", "gpu2", price_on_demand=3.0),
                                                     sc.pool("big", "gpu8", price_on_demand=8.0)])


@pytest.mark.parametrize("window, bought", [(600.0, ["big", "big"]), (0.0, ["big", "small"])])
def test_the_demand_a_plan_counts_on_includes_the_arrivals_of_the_last_window(window, bought):
    """Eight single-GPU jobs at 0 fill a big node (as above); a ninth (600 s) arrives at 400, the
    big node full. With `demand_window_s` 600 the eight arrivals of the last 600 s count as demand
    beside its own (9 GPUs): big 8 x (1/8 + 0) = 1 beats small 3 x (1/2 + 0) = 1.5. With 0, only
    the queue counts (its own GPU): small 3 x (1/2 + 1/2) = 3 beats big 8 x (1/8 + 7/8) = 8."""
    cl = small_and_big()
    table = sc.trace([{} for _ in range(8)] + [{"submit_s": 400.0, "duration_s": 600.0}])
    row, sim, _ = replay(cl, table, 2 * H, demand_window_s=window)
    assert [cl.pools[n.pool].name for n in sim.nodes] == bought and row["pods_done"] == 9


def test_the_provision_deadline_read_once_per_layout_is_the_one_read_afresh(monkeypatch):
    """`ProvisionTimeout` reads the booting slots once per layout of the state: at every scan
    of replays with phantoms given up (a single pod, a gang partly on a phantom) and of the
    pinned many-gang trace, its deadline is the one read from every slot, and the nodes it
    gives up are those late by the slots read afresh."""
    from harness.autoscalers.provision_timeout import ProvisionTimeout
    from harness.config import compose
    from harness.replay import build
    from harness.status import BOOTING
    from tests.test_pinned_outputs import TRACE

    deadline, give_up, seen = ProvisionTimeout.deadline, ProvisionTimeout.give_up, []

    def afresh(timeout):
        booting = timeout.sim.state.status == BOOTING
        return float(timeout.sim.node_requested_at[booting].min()) + timeout.limit_s if booting.any() else np.inf

    def checked_deadline(self):
        assert deadline(self) == afresh(self)
        return deadline(self)

    def checked_give_up(self, now, release):
        st = self.sim
        late = np.flatnonzero((st.state.status == BOOTING) & (st.node_requested_at + self.limit_s <= now))
        got = give_up(self, now, release)
        seen.append(len(got))
        assert got.tolist() == late.tolist()
        return got

    monkeypatch.setattr(ProvisionTimeout, "deadline", checked_deadline)
    monkeypatch.setattr(ProvisionTimeout, "give_up", checked_give_up)
    test_a_node_that_never_comes_up_is_given_up_after_the_provision_time_and_its_pool_backed_off()
    test_a_gang_planned_partly_on_a_phantom_is_planned_again_whole()
    sim, lp = build(compose("config", ["loop=merged", f"trace.path={TRACE}", "horizon_s=9000"]))
    sim.run(lp)
    assert sum(seen) >= 2 and len(seen) > 100  # nodes were given up; many scans compared
