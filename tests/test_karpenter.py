"""Golden scenarios for the Karpenter-like autoscaler (harness/autoscalers/karpenter.py), computed by hand.

Conventions (docs/model.md plus the module docstring): a pending pod opens a batch window that
closes 1 s after the last new pending pod (10 s at most); pods still pending re-trigger it 10 s
after the last trigger. Consolidation polls at t = 0, 10, 20, ...; it deletes empty nodes (at most
ceil(10%) of the ready nodes per poll), else replaces or deletes under-used ones. Every pool
here boots in exactly 300 s. GPU-hours are GPU-seconds / 3600.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.autoscalers.karpenter_consolidation import Consolidation
from harness.autoscalers.karpenter_scheduling import WhatIf, queue_order
from harness.errors import ConfigError
from harness.loops.separate import SeparateLoops
from harness.scheduler import Scheduler
from harness.scores import LeastAllocated
from harness.status import ABSENT, BOOTING, READY
from harness.whatif import Snapshot
from tests import scenarios as sc

H = 3600.0
approx = pytest.approx


def karpenter(**kw) -> SeparateLoops:
    return SeparateLoops(Scheduler(LeastAllocated()), KarpenterAutoscaler(**kw), name="separate_karpenter")


def idle(row: dict) -> tuple[float, float, float, float, float]:
    return (row["idle_accel_hours"], row["idle_accel_hours_booting"], row["idle_accel_hours_unallocated"],
            row["idle_accel_hours_gang_wait"], row["idle_accel_hours_committed"])


def launched(sim) -> list[tuple[str, float, float]]:
    """(pool, requested, removed) of every node instance, in request order."""
    return [(sim.cluster.pools[r.pool].name, r.requested_at, r.removed_at) for r in sim.nodes]


# ---- packing: batch window, narrowing claim, cheapest compatible offering --------------------
def test_batch_packs_into_the_cheapest_compatible_type():
    cl = sc.cluster([sc.node_type("t2", gpus=2), sc.node_type("t4", gpus=4), sc.node_type("t8", gpus=8)],
                    [sc.pool("p2", "t2", price_on_demand=3.0), sc.pool("p4", "t4", price_on_demand=7.0),
                     sc.pool("p8a", "t8", price_on_demand=12.0), sc.pool("p8b", "t8", price_on_demand=10.0)])
    table = sc.trace([{"gpu_count": 2, "cpu_milli": 2000}, {"gpu_count": 1}, {"gpu_count": 1, "submit_s": 0.5},
                      {"gpu_count": 2, "cpu_milli": 2000, "submit_s": 5.0}])
    row, sim = sc.run(table, cl, karpenter(), horizon_s=2 * H)
    # Window: opened at 0, extended by C at 0.5, closes at 1.5. Sorted A(2 GPUs), B, C: A opens a
    # claim {t2, t4, t8}; B makes 3 GPUs -> {t4, t8}; C makes 4 -> {t4, t8}: the cheapest
    # offering is p4 ($7 < $10 < $12). D at 5 closes a window at 6: all pending pods are packed
    # again, largest first: A and D onto the in-flight t4 (4 GPUs), B opens {t2, t4, t8}, C
    # joins (2 GPUs): p2 at $3.
    assert [(p, t) for p, t, _ in launched(sim)] == [("p4", 1.5), ("p2", 6.0)]
    # t4 ready 301.5: A, B, C run to 3901.5; t2 ready 306: D runs to 3906. Both empty by the
    # poll at 3910; the budget (10% of 2 nodes, rounded up) takes one per command, the cheapest
    # to disrupt first (both cost 0: lowest slot), t2. The command is re-validated 15 s later
    # (validation rule): t2 deleted at 3925; the controller polls again at once: t4's command at
    # 3925, deleted at 3940.
    assert [r for _, _, r in launched(sim)] == [3940.0, 3925.0]
    booting = 4 * 300 + 2 * 300
    unallocated = 4 * (3940 - 3901.5) + 2 * (3925 - 3906)
    assert idle(row) == approx(((booting + unallocated) / H, booting / H, unallocated / H, 0.0, 0.0))
    assert row["used_accel_hours"] == approx((4 * 3600 + 2 * 3600) / H)
    assert row["cost_usd"] == approx((7.0 * (3940 - 1.5) + 3.0 * (3925 - 6)) / H)
    assert row["pods_done"] == 4


# ---- reservations: committed offerings first, while free slots remain ---------------------------
def test_committed_offerings_preferred_while_free():
    cl = sc.cluster([sc.node_type("gpu8")], [
        sc.pool("reserved", "gpu8", committed=2, price_on_demand=10.0, price_committed=6.0),
        sc.pool("ondemand", "gpu8", price_on_demand=8.0)])
    table = sc.trace([{"gpu_count": 8} for _ in range(3)])
    row, sim = sc.run(table, cl, karpenter(), horizon_s=2 * H)
    # Batch at 1: three claims {gpu8}. The two free committed slots cost 0, so two nodes go
    # there; the third is on-demand: $8 beats the reserved pool's $10 beyond its commitment.
    # Ready 301, pods run to 3901; empty nodes deleted one per command (budget 1 of 3, then of
    # 2, then of 1), each re-validated 15 s after the poll that computed it, the next poll at
    # once (validation rule): reserved slot 0 at 3925, slot 1 at 3940, the on-demand node at 3955.
    assert launched(sim) == [("reserved", 1.0, 3925.0), ("reserved", 1.0, 3940.0), ("ondemand", 1.0, 3955.0)]
    committed = 8 * ((1 + 7200 - 3925) + (1 + 7200 - 3940))  # committed slots without a node
    booting = 3 * 8 * 300
    unallocated = 8 * (24 + 39 + 54)
    assert idle(row) == approx(((committed + booting + unallocated) / H, booting / H, unallocated / H, 0.0,
                                committed / H))
    assert row["cost_usd"] == approx(2 * 6.0 * 2 + 8.0 * (3955 - 1) / H)



class SupplyChecked(KarpenterAutoscaler):
    """Checks at every scan that `Offerings.supply`'s free committed slots are the provider's
    answer, asked pool by pool (`free_committed`)."""

    def scan(self, now):
        cloud = self.sim.cloud
        asked = [cloud.free_committed(p) for p in range(len(self.sim.cluster.pools))]
        assert self.offerings.supply()[1].tolist() == asked
        self.scans = getattr(self, "scans", 0) + 1
        super().scan(now)


def test_free_committed_slots_counted_at_once_are_the_providers_pool_by_pool():
    """Two committed pools (one of them filled, then emptied by consolidation) and an on-demand
    one: at every scan the free committed slots per pool, counted in one step, are what the
    provider answers pool by pool."""
    cl = sc.cluster([sc.node_type("gpu8"), sc.node_type("gpu4", gpus=4)], [
        sc.pool("reserved", "gpu8", committed=2, price_on_demand=10.0, price_committed=6.0),
        sc.pool("ondemand", "gpu8", price_on_demand=8.0),
        sc.pool("small", "gpu4", committed=1, price_on_demand=3.0, price_committed=2.0)])
    table = sc.trace([{"gpu_count": 8} for _ in range(3)] + [{"gpu_count": 4}, {"gpu_count": 2}])
    ka = SupplyChecked()
    sc.run(table, cl, SeparateLoops(Scheduler(LeastAllocated()), ka, name="separate_karpenter"), horizon_s=2 * H)
    assert ka.scans > 10

# ---- consolidation: two under-used nodes replaced by one cheaper node ---------------------------
def consolidation_setup():
    cl = sc.cluster([sc.node_type("gpu8"), sc.node_type("gpu4", gpus=4)],
                    [sc.pool("big", "gpu8", price_on_demand=10.0), sc.pool("small", "gpu4", price_on_demand=3.0)])
    big = {"gpu_count": 6, "cpu_milli": 6000, "duration_s": 1000.0}
    table = sc.trace([big, big, {"gpu_count": 2, "cpu_milli": 2000}, {"gpu_count": 2, "cpu_milli": 2000}])
    return cl, table


def test_consolidation_replaces_two_underused_nodes_by_one_cheaper():
    cl, table = consolidation_setup()
    # A budget of every node lets multi-node consolidation take both (the default 10% of 2
    # nodes allows one at a time: next test).
    row, sim = sc.run(table, cl, karpenter(budget_nodes=1.0), horizon_s=2 * H)
    # Batch at 1, sorted X1, X2 (6 GPUs), Y1, Y2 (2): X1 opens {gpu8}, X2 cannot join (12 > 8)
    # and opens another, Y1 fills the first, Y2 the second: two gpu8 nodes, ready 301, each
    # running an X (6 GPUs, to 1301) and a Y (2 GPUs). At the poll at 1310 both hold one Y:
    # together they fit one new claim {gpu8, gpu4}; gpu4 at $3 < 2 x $10. The command is
    # re-validated at 1325 (validation rule; nothing changed): gpu4 launched and both gpu8 nodes
    # tainted. It is ready at 1625: both deleted, the Ys evicted; each Y's job has failed once,
    # so its Job controller creates it again 10 s later (pod-failure backoff): they restart on
    # the gpu4 at 1635 and run 1635-5235; polls run from 1325 every 10 s, so the one at 5235
    # finds the gpu4 empty and it is deleted at 5250.
    assert launched(sim) == [("big", 1.0, 1625.0), ("big", 1.0, 1625.0), ("small", 1325.0, 5250.0)]
    booting = 2 * 8 * 300 + 4 * 300
    unallocated = 2 * 6 * (1625 - 1301) + 4 * (1635 - 1625) + 4 * (5250 - 5235)
    assert idle(row) == approx(((booting + unallocated) / H, booting / H, unallocated / H, 0.0, 0.0))
    assert row["used_accel_hours"] == approx((2 * 6 * 1000 + 2 * 2 * 1324 + 4 * 3600) / H)
    assert row["cost_usd"] == approx((10.0 * 2 * 1624 + 3.0 * 3925) / H)
    assert sorted(sim.pod_end[2:]) == [5235.0, 5235.0]
    assert row["pending_s_job_backoff"] == 2 * 10.0


def test_consolidation_with_the_default_budget_goes_one_node_at_a_time():
    cl, table = consolidation_setup()
    row, sim = sc.run(table, cl, karpenter(), horizon_s=2 * H)
    # Same start. At 1310 the budget is ceil(10% x 2) = 1: single-node consolidation picks the
    # first candidate (both cost 1: lower slot; its Y fits the 6 free GPUs of the other),
    # re-validated and deleted at 1325 (validation rule); that Y (Y1) is created again after
    # its job's 10 s backoff and restarts on the other gpu8 at 1335. The poll at once (1325)
    # finds the last gpu8 holding Y2: one new gpu4 ($3 < $10) replaces it, validated at 1340
    # (now with both Ys, which still fit it) and launched, ready 1640, when the gpu8 is deleted:
    # Y2 fails for the first time (back at 1650), Y1 for the second (20 s: back at 1660); they
    # run 1650-5250 and 1660-5260 on the gpu4; the poll at 5260 finds it empty, deleted at 5275.
    assert launched(sim) == [("big", 1.0, 1325.0), ("big", 1.0, 1640.0), ("small", 1340.0, 5275.0)]
    assert sim.pod_start[2:].tolist() == [1660.0, 1650.0] and sim.pod_end[2:].tolist() == [5260.0, 5250.0]
    booting = 2 * 8 * 300 + 4 * 300
    gpu4 = 4 * (1650 - 1640) + 2 * (1660 - 1650) + 2 * (5260 - 5250) + 4 * (5275 - 5260)
    unallocated = 6 * 24 + (6 * (1335 - 1301) + 4 * (1640 - 1335)) + gpu4
    assert idle(row) == approx(((booting + unallocated) / H, booting / H, unallocated / H, 0.0, 0.0))
    assert row["cost_usd"] == approx((10.0 * (1324 + 1639) + 3.0 * 3935) / H)


def test_gang_members_are_not_evicted():
    cl, table = consolidation_setup()
    # Same workload, but the two Ys form one gang: consolidation may not evict them (as a
    # PodDisruptionBudget would forbid), so both gpu8 nodes stay until the Ys end at 3901; the
    # poll at 3910 deletes both (re-validated at 3925: validation rule).
    table = table.set_column(table.schema.get_field_index("job_id"), "job_id",
                             [["x1", "x2", "y", "y"]])
    table = table.set_column(table.schema.get_field_index("min_member"), "min_member", [[1, 1, 2, 2]])
    row, sim = sc.run(table, cl, karpenter(budget_nodes=1.0), horizon_s=2 * H)
    assert [p for p, _, _ in launched(sim)] == ["big", "big"]
    assert sorted(r for _, _, r in launched(sim)) == [3925.0, 3925.0]


# ---- topology: a blind Karpenter strands a cheaper PCIe node; awareness fixes it ----------------
def topology_setup():
    cl = sc.cluster(
        [sc.node_type("nvl8", nvlink_domains=1, nic_per_gpu=True), sc.node_type("pcie8", nvlink_domains=4)],
        [sc.pool("nvl", "nvl8", price_on_demand=10.0), sc.pool("pcie", "pcie8", price_on_demand=6.0)])
    return cl, sc.trace([{"gpu_count": 8, "gpus_same_nvlink": True}])


def test_topology_blind_karpenter_strands_a_node():
    cl, table = topology_setup()
    row, sim = sc.run(table, cl, karpenter(), horizon_s=2 * H)
    # Blind to the NVLink claim, the claim holds {nvl8, pcie8}: the PCIe node ($6) is launched
    # at 1, ready at 301; the scheduler refuses it. Every re-triggered batch (windows closing
    # at 11, 21, ...) packs the pod onto that node again, which nominates it for 20 s, so
    # consolidation never removes it: it idles until the horizon, the pod pending all along.
    assert launched(sim) == [("pcie", 1.0, 2 * H)]
    booting, unallocated = 8 * 300, 8 * (7200 - 301)
    assert idle(row) == approx(((booting + unallocated) / H, booting / H, unallocated / H, 0.0, 0.0))
    assert row["cost_usd"] == approx(6.0 * (7200 - 1) / H)
    assert row["pods_pending"] == 1 and row["nodes_never_used"] == 1
    assert row["pending_s_topology"] == approx(7200 - 301)


def test_topology_aware_karpenter_launches_the_nvlink_node():
    cl, table = topology_setup()
    row, sim = sc.run(table, cl, karpenter(topology_aware=True), horizon_s=2 * H)
    # The claim holds {nvl8} only: launched at 1, ready 301, pod runs 301-3901, the empty node
    # is found at the poll at 3910 and deleted when re-validated at 3925 (validation rule).
    assert launched(sim) == [("nvl", 1.0, 3925.0)]
    assert idle(row) == approx((8 * (300 + 24) / H, 8 * 300 / H, 8 * 24 / H, 0.0, 0.0))
    assert row["used_accel_hours"] == approx(8.0)
    assert row["cost_usd"] == approx(10.0 * 3924 / H)


# ---- configuration ------------------------------------------------------------------------------
def test_when_empty_policy_keeps_underused_nodes():
    cl, table = consolidation_setup()
    row, sim = sc.run(table, cl, karpenter(consolidate_underutilized=False), horizon_s=2 * H)
    # No replacement: the gpu8 nodes keep their Ys until 3901 and are deleted when empty,
    # one per command, each 15 s after the poll that found it (validation rule): 3925, 3940.
    assert launched(sim) == [("big", 1.0, 3925.0), ("big", 1.0, 3940.0)]


@pytest.mark.parametrize("kw", [{"consolidate_underutilized": "yes"}, {"budget_nodes": 1.5}, {"max_candidates": -1},
                                {"validation_s": -1}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ConfigError):
        KarpenterAutoscaler(**kw)


def test_loop_config_composes():
    from hydra.utils import instantiate

    from harness.config import compose

    cfg = compose("config", ["loop=separate_karpenter"])
    loop = instantiate(cfg.loop, _convert_="all")
    assert loop.name == "separate_karpenter" and isinstance(loop.autoscaler, KarpenterAutoscaler)
    assert (loop.autoscaler.batch_idle_s, loop.autoscaler.batch_max_s, loop.autoscaler.budget_nodes) == (1.0, 10.0, 0.1)
    assert loop.autoscaler.validation_s == 15.0


# ---- consolidation candidates: the vector shortlist equals the node-by-node walk (property) -----
def candidates_walk(ka: Consolidation, now: float) -> list[int]:
    """The shortlist as Karpenter's rules read, one node at a time: ready, untainted, not
    nominated, quiet nodes, cheapest to disrupt first (the sum over its pods of Karpenter's
    EvictionCost, 1 + priority / 2^25 clamped to [-10, 10], pod by pod; then slot); a node holding a
    gang member is skipped; a pool gives up at most present - min_size nodes; the walk stops at
    the first busy node beyond max_candidates."""
    sim, st, w = ka.sim, ka.sim.state, ka.sim.w
    nodes = [n for n in range(st.n_slots) if st.status[n] == READY and ka.scheduler.booked_for[n] == -1
             and ka.nominated_until[n] <= now and now - ka.last_change[n] >= ka.consolidate_after_s]
    cost = {n: sum(min(10.0, max(-10.0, 1.0 + float(w.job_priority[w.job[q]]) / 2**25)) for q in sim.node_pods[n])
            for n in nodes}
    nodes.sort(key=lambda n: (cost[n], n))
    min_size = ka.offerings.min_size
    room = [sum(1 for m in range(st.n_slots) if st.slot_pool[m] == p and st.status[m] != ABSENT) - min_size[p]
            for p in range(len(min_size))]
    out, busy = [], 0
    for n in nodes:
        p = st.slot_pool[n]
        if room[p] <= 0:
            continue
        if st.pods_on[n]:
            if any(w.job_min_member[w.job[q]] > 1 for q in sim.node_pods[n]):
                continue
            if busy == ka.max_candidates:
                break
            busy += 1
        room[p] -= 1
        out.append(n)
    return out


def may_move_walk(ka: Consolidation, cands) -> list[bool]:
    """`_may_move` pod by pod, in exact integers (GPU milli when sharing-aware, else whole GPUs
    with a share counted as one device)."""
    sim, st, w = ka.sim, ka.sim.state, ka.view
    unit = 1000 if ka.sharing_aware else 1
    keep = [n for n in range(st.n_slots) if st.status[n] != ABSENT and ka.scheduler.booked_for[n] == -1]

    def free(n):
        g = int(st.gpu_cap[n]) * 1000 - int(st.gpu_used[n]) if ka.sharing_aware else int(st.free_whole[n])
        return int(st.cpu_free[n]), int(st.mem_free[n]), g

    total = [sum(free(n)[i] for n in keep) for i in range(3)]
    remaining, committed = ka.offerings.supply()
    out = []
    for n in cands:
        pods = sim.node_pods[n]
        need = (sum(int(w.cpu[q]) for q in pods), sum(int(w.mem[q]) for q in pods),
                sum(int(w.gpus[q]) * (int(w.milli[q]) if ka.sharing_aware else 1) for q in pods))
        elsewhere = [total[i] - free(n)[i] for i in range(3)]
        ok = all(a <= b for a, b in zip(need, elsewhere, strict=True))
        offerings = ka.offerings
        for p, t in enumerate(offerings.pool_type):
            price = 0.0 if committed[p] > 0 else offerings.pool_price[p]
            if price < offerings.node_price[n] and remaining[p] > 0:
                cap = (int(st.type_cpu[t]), int(st.type_mem[t]), int(st.type_gpus[t]) * unit)
                ok |= all(a <= b + c for a, b, c in zip(need, elsewhere, cap, strict=True))
        out.append(bool(ok))
    return out


class CheckedKarpenter(KarpenterAutoscaler):
    """Checks its consolidation's vector shortlist and `_may_move` against the walks at every poll."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.checked = {"polls": 0, "busy": 0}

    def attach(self, sim, scheduler):
        super().attach(sim, scheduler)
        c = self.consolidation
        candidates = c._candidates

        def checked(now):
            got = candidates(now)
            assert got.dtype == np.int64 and got.tolist() == candidates_walk(c, now)
            busy = got[c.sim.state.pods_on[got] > 0]
            assert c._may_move(busy).tolist() == may_move_walk(c, busy)
            self.checked["polls"] += 1
            self.checked["busy"] += len(busy)
            return got

        c._candidates = checked


@st.composite
def churn(draw):
    """Pods of mixed sizes (shares, whole GPUs, CPU only, 2-member gangs) arriving and ending
    over an hour, so nodes empty out unevenly."""
    pods = []
    for j in range(draw(st.integers(2, 24))):
        kind = draw(st.sampled_from(["share", "whole", "cpu", "gang"]))
        base = {"job_id": f"j{j}", "submit_s": float(draw(st.integers(0, 60)) * 30),
                "duration_s": float(draw(st.integers(1, 60)) * 60), "cpu_milli": draw(st.sampled_from([1000, 8000]))}
        if kind == "share":
            pods.append({**base, "gpu_milli": draw(st.sampled_from([250, 500, 700]))})
        elif kind == "whole":
            pods.append({**base, "gpu_count": draw(st.sampled_from([1, 2, 4]))})
        elif kind == "cpu":
            pods.append({**base, "gpu_count": 0, "gpu_milli": 0})
        else:
            pods += [{**base, "gpu_count": 2, "min_member": 2} for _ in range(2)]
    return sc.trace(pods)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=churn(), max_candidates=st.sampled_from([0, 1, 2, 100]), sharing=st.booleans(),
       quiet=st.sampled_from([0.0, 30.0]), budget=st.sampled_from([0.1, 1.0]), underutilized=st.booleans())
def test_candidates_match_the_node_by_node_walk(table, max_candidates, sharing, quiet, budget, underutilized):
    # min_size holds one g4 and one CPU node back; WhenEmpty leaves busy nodes on the shortlist
    cl = sc.cluster([sc.node_type("g8"), sc.node_type("g4", gpus=4), sc.node_type("cpu", gpus=0)],
                    [sc.pool("g8", "g8", price_on_demand=10.0, committed=1, price_committed=6.0),
                     sc.pool("g4", "g4", price_on_demand=4.0, min_size=1),
                     sc.pool("g4b", "g4", price_on_demand=5.0),
                     sc.pool("cpu", "cpu", price_on_demand=1.0, min_size=1)])
    ka = CheckedKarpenter(max_candidates=max_candidates, sharing_aware=sharing, consolidate_after_s=quiet,
                          budget_nodes=budget, consolidate_underutilized=underutilized)
    sc.run(table, cl, SeparateLoops(Scheduler(LeastAllocated()), ka), horizon_s=2 * H)
    assert ka.checked["polls"] > 0


def option_placing_every_pod(c: Consolidation, cands: np.ndarray, pending: np.ndarray) -> tuple[bool, int]:
    """`Consolidation._option` from its definition, on a fresh copy of the state: every pod
    placed (pending and moved, in the queue order), then the candidates' pods checked (each
    placed, none on a node still booting), then at most one new node cheaper than them."""
    sim, st, w = c.sim, c.sim.state, c.sim.w
    snap = Snapshot(st, devices=c.templates.slot_devices())
    moved = []
    for n in cands:
        for p in sim.node_pods[n]:
            snap.state.release(int(n), int(w.cpu[p]), int(w.mem[p]), sim.pod_gpus[p], int(w.milli[p]))
            moved.append(p)
    keep = c.scheduler.booked_for == -1
    keep[cands] = False
    what_if = WhatIf(snap, c.view, [keep & (st.status == READY), keep & (st.status == BOOTING)], c.offerings.spare())
    pods = np.r_[pending, np.array(moved, np.int64)]
    order = queue_order(c.view, pods)
    where = what_if.place_all(pods[order], c.view_class, max_claims=1)
    mine = order >= len(pending)
    if any(mine[i] and (where[i] == -1 or (where[i] >= 0 and st.status[where[i]] == BOOTING))
           for i in range(len(pods))):
        return False, -1
    if what_if.n_claims == 0:
        return True, -1
    remaining, committed = c.offerings.supply()
    pool = c.offerings.cheapest(what_if.claim_types(0), what_if.claim_pools[0], remaining, committed,
                                below=float(c.offerings.node_price[cands].sum()))
    return pool >= 0, pool


class OptionCheckedKarpenter(KarpenterAutoscaler):
    """Checks every consolidation what-if (`_option`: on the kept scratch copy, stopping at the
    first moved pod left without a place) against `option_placing_every_pod`."""

    def attach(self, sim, scheduler):
        super().attach(sim, scheduler)
        c = self.consolidation
        option = c._option
        self.answers = {True: 0, False: 0}

        def checked(cands, pending):
            got = option(cands, pending)
            assert got == option_placing_every_pod(c, cands, pending)
            self.answers[got[0]] += 1
            return got

        c._option = checked


@st.composite
def churn_with_waiting(draw):
    """`churn`, and pods that stay pending beside it: ones no node type holds (16 GPUs) and
    whole-GPU pods arriving in bursts, so the what-ifs pack pending pods that find no place."""
    table = draw(churn()).to_pylist()
    for j in range(draw(st.integers(0, 6))):
        gpus = draw(st.sampled_from([4, 8, 16]))
        table.append({**table[0], "pod_id": f"w{j}", "job_id": f"w{j}", "gpu_count": gpus, "gpu_milli": 1000,
                      "min_member": 1, "submit_s": float(draw(st.integers(0, 60)) * 30), "duration_s": 3000.0})
    return sc.trace(table)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=churn_with_waiting(), sharing=st.booleans(), budget=st.sampled_from([0.1, 1.0]))
def test_consolidation_what_if_answers_as_placing_every_pod(table, sharing, budget):
    cl = sc.cluster([sc.node_type("g8"), sc.node_type("g4", gpus=4), sc.node_type("cpu", gpus=0)],
                    [sc.pool("g8", "g8", price_on_demand=10.0, committed=1, price_committed=6.0),
                     sc.pool("g4", "g4", price_on_demand=4.0),
                     sc.pool("cpu", "cpu", price_on_demand=1.0)])
    ka = OptionCheckedKarpenter(sharing_aware=sharing, budget_nodes=budget)
    sc.run(table, cl, SeparateLoops(Scheduler(LeastAllocated()), ka), horizon_s=2 * H)


def test_consolidation_what_if_on_a_dra_cluster_answers_as_placing_every_pod(monkeypatch):
    """On the pinned DRA trace (pods' claims, node-group templates, gangs), every consolidation
    what-if answers as `option_placing_every_pod`, which takes the candidates' pods off their
    nodes on a fresh copy first: `_option` leaves them there, as no tier holds those nodes."""
    from harness.config import compose
    from harness.replay import build
    from tests.test_pinned_outputs import TRACE

    option, answers = Consolidation._option, {True: 0, False: 0}

    def checked(self, cands, pending):
        got = option(self, cands, pending)
        assert got == option_placing_every_pod(self, cands, pending)
        answers[got[0]] += 1
        return got

    monkeypatch.setattr(Consolidation, "_option", checked)
    sim, lp = build(compose("config", ["loop=separate_karpenter", f"trace.path={TRACE}", "horizon_s=5400"]))
    assert sim.state.dra is not None
    sim.run(lp)
    assert answers[True] > 0 and answers[False] > 0


@settings(max_examples=200, deadline=None)
@given(pods=st.lists(st.tuples(st.integers(-1, 5), st.floats(-10.0, 10.0)), max_size=80),
       asked=st.lists(st.integers(0, 5), unique=True))
def test_disruption_costs_are_the_weighted_bincounts_floats(pods, asked):
    """The compiled per-node sum of eviction costs (`disruption_costs`) is, bit for bit, the
    weighted bincount it replaces: pods on nodes 0-5 or none (-1), any costs in [-10, 10] (so
    sums round, and the order they are added in shows)."""
    from harness.autoscalers.disruption_cost import disruption_costs

    pod_node = np.array([n for n, _ in pods], np.int32)
    cost = np.array([c for _, c in pods], np.float64)
    nodes = np.array(asked, np.int64)
    on = np.flatnonzero(pod_node >= 0)
    expected = np.bincount(pod_node[on], weights=cost[on], minlength=6)[nodes]
    assert disruption_costs(pod_node, cost, nodes, 6).tobytes() == expected.tobytes()
