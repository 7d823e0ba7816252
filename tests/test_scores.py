"""The FGD paper's six score plugins (harness/scores.py) on hand-built nodes, numbers by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.filters import feasible
from harness.fragmentation import TargetWorkload, node_fragmentation
from harness.scores import (
    FGD,
    BalancedAllocation,
    BestFit,
    DotProd,
    GpuClustering,
    GpuPacking,
    LeastAllocated,
    MostAllocated,
    RandomScore,
    ScorePlugin,
    WeightedSum,
)
from harness.state import ClusterState
from harness.trace import table_from_columns
from harness.workload import compile_workload

TYPES = {"g8": (128000, 8), "g2": (64000, 2)}


def make_state(nodes: list[tuple[str, int, list[int]]], types: dict = TYPES) -> ClusterState:
    """One slot per (type, cpu_free, per-GPU free milli), in order; usage made by real binds."""
    cluster = Cluster(
        node_types=[{"name": t, "cpu_milli": c, "memory_mib": 1 << 20, "gpus": g, "gpu_model": "A"}
                    for t, (c, g) in types.items()],
        pools=[{"name": f"p{i}", "node_type": t, "min_size": 1, "max_size": 1} for i, (t, _, _) in enumerate(nodes)],
        autoscaling=False)
    state = ClusterState(cluster)
    for n, (t, cpu_free, free) in enumerate(nodes):
        state.add_node(n, ready=True)
        if cpu_free < types[t][0]:
            state.bind(n, types[t][0] - cpu_free, 0, np.zeros(0, np.int64), 0)
        for g, f in enumerate(free):
            if f < 1000:
                state.bind(n, 0, 0, np.array([g]), 1000 - f)
    return state


def make_pods(state: ClusterState, pods: list[tuple[int, int, int]]):
    """Workload of (cpu milli, GPUs, milli per GPU) pods."""
    n = len(pods)
    table = table_from_columns({
        "pod_id": [f"p{i}" for i in range(n)], "job_id": [f"p{i}" for i in range(n)],
        "submit_s": [0.0] * n, "cpu_milli": [p[0] for p in pods], "memory_mib": [0] * n,
        "gpu_count": [p[1] for p in pods], "gpu_milli": [p[2] for p in pods]})
    return compile_workload(table, state.cluster)


def scores(plugin, state, w, pod, rng=None):
    nodes = np.arange(state.n_slots)
    return plugin.score(state, w, pod, nodes, rng or np.random.default_rng(0)).tolist()


def test_dotprod():
    # pod [32000/128000, 1000/8000] = [0.25, 0.125]
    # n0 left [0.5, 1.0]: dot 0.25 -> 100 x (1 - 0.125) = 87.5 -> 87
    # n1 left [1.0, 0.25]: dot 0.28125 -> 85.9 -> 85
    state = make_state([("g8", 64000, [1000] * 8), ("g8", 128000, [1000, 1000] + [0] * 6)])
    w = make_pods(state, [(32000, 1, 1000)])
    assert scores(DotProd(), state, w, 0) == [87, 85]


def test_best_fit_rescales_over_candidates():
    # raw = trunc(100 x (1 - [0.5 (cpu left - 32000)/128000 + 0.5 (gpu left - 1000)/8000])):
    # n0 43 (43.75), n1 56 (56.25), n2 100; rescaled (raw - 43) x 100 // 57: 0, 22, 100
    state = make_state([("g8", 64000, [1000] * 8), ("g8", 128000, [1000, 1000] + [0] * 6),
                        ("g8", 32000, [1000] + [0] * 7)])
    w = make_pods(state, [(32000, 1, 1000)])
    assert scores(BestFit(), state, w, 0) == [0, 22, 100]
    assert BestFit().score(state, w, 0, np.array([1]), None).tolist() == [0]  # one candidate: no spread


def test_gpu_packing_tiers():
    state = make_state([("g8", 128000, [1000] * 8),            # idle 8-GPU node: 33 - 8
                        ("g2", 64000, [1000, 1000]),            # idle 2-GPU node: 33 - 2
                        ("g8", 128000, [1000] * 7 + [400]),     # best-fitting GPU for 300: 400 left
                        ("g8", 128000, [1000] * 6 + [0, 700])])  # best-fitting GPU for 300: 700 left
    w = make_pods(state, [(1000, 1, 300), (1000, 1, 1000), (1000, 2, 1000), (1000, 0, 0), (1000, 1, 500)])
    assert scores(GpuPacking(), state, w, 0) == [25, 31, 96, 93]  # 100 - (400 x 100 // 1000) // 10 = 96
    assert scores(GpuPacking(), state, w, 1) == [25, 31, 49, 49]  # a fully free GPU on a used node: 50 - 1
    assert scores(GpuPacking(), state, w, 2) == [25, 31, 48, 48]
    assert scores(GpuPacking(), state, w, 3) == [0, 0, 0, 0]
    assert scores(GpuPacking(), state, w, 4) == [25, 31, 49, 93]  # 400 < 500: needs a fully free GPU


def test_gpu_packing_idle_nodes_of_many_gpus():
    # idle nodes score 33 - their GPUs, below every used node however many GPUs they have
    big = {"g8": (128000, 8), "g20": (128000, 20), "g64": (128000, 64)}
    state = make_state([("g8", 128000, [1000] * 8), ("g20", 128000, [1000] * 20),
                        ("g64", 128000, [1000] * 64), ("g20", 128000, [1000] * 19 + [0])], big)
    w = make_pods(state, [(1000, 1, 1000)])
    assert scores(GpuPacking(), state, w, 0) == [33 - 8, 33 - 20, 33 - 64, 50 - 1]


def test_gpu_clustering_tags():
    state = make_state([("g8", 128000, [1000] * 8)] * 4)
    w = make_pods(state, [(1000, 1, 500), (1000, 1, 1000), (1000, 1, 300), (1000, 0, 0)])
    plugin = GpuClustering()
    for pod, node in ((0, 1), (1, 2), (0, 3), (1, 3)):  # n1: share; n2: 1-gpu; n3: both
        gpu = plugin.pick_devices(state, w, pod, node)
        state.bind(node, int(w.cpu[pod]), 0, gpu, int(w.milli[pod]))
        plugin.on_bind(state, w, pod, node)
    # b = 25 x (8000 - left) // 8000: n0 0, n1 1 (7500 left), n2 3 (7000), n3 4 (6500)
    assert scores(plugin, state, w, 2) == [25 + 0, 75 + 1, 0 + 3, 50 + 4]
    assert scores(plugin, state, w, 1) == [25 + 0, 0 + 1, 75 + 3, 50 + 4]
    assert scores(plugin, state, w, 3) == [0, 0, 0, 0]


def test_gpu_clustering_forgets_tags_of_emptied_nodes():
    state = make_state([("g8", 128000, [1000] * 8)])
    w = make_pods(state, [(1000, 1, 500), (1000, 1, 1000), (1000, 0, 0)])
    plugin = GpuClustering()
    gpu = plugin.pick_devices(state, w, 0, 0)
    state.bind(0, 1000, 0, gpu, 500)
    plugin.on_bind(state, w, 0, 0)
    assert scores(plugin, state, w, 1) == [0 + 1]  # only another kind
    state.release(0, 1000, 0, gpu, 500)
    assert scores(plugin, state, w, 1) == [25]  # empty again: no tags
    state.bind(0, 1000, 0, np.zeros(0, np.int64), 0)  # a CPU-only pod on the emptied node
    plugin.on_bind(state, w, 2, 0)
    assert scores(plugin, state, w, 1) == [25]  # still no GPU pods: the share's tag is gone


def test_gpu_clustering_forgets_a_failed_atomic_trial():
    """An atomic gang's trial places a member, fails and is rolled back: the member's kind
    must not stay in the node's tags and steer the next pod elsewhere."""
    from harness.scheduler import Scheduler
    from harness.scheduler.gang import Atomic
    from harness.sim import Simulation
    from tests.scenarios import cluster, node_type, pool, trace

    cl = cluster([node_type("g8")], [pool(f"p{i}", "g8", min_size=1, max_size=1) for i in range(3)],
                 autoscaling=False)
    gang = {"gpu_count": 7, "job_id": "g", "min_member": 2}  # only n0 has 7 free GPUs: one member fits
    table = trace([{"gpu_count": 1}, {"gpu_count": 2}, {"gpu_count": 1}, {"gpu_count": 2}, gang, gang,
                   {"gpu_count": 1, "submit_s": 1.0}])
    w = compile_workload(table, cl)
    pod = {pid: i for i, pid in enumerate(w.pod_id.tolist())}
    sim = Simulation(w, cl, seed=0, horizon_s=10.0)
    plugin = GpuClustering()
    sched = Scheduler(plugin, gang=Atomic())
    sched.attach(sim)
    sim.advance_to(0.0)
    # n0: a 1-GPU pod; n1: a 2-GPU pod; n2: one of each
    for pid, node, gpus in (("p0", 0, [0]), ("p1", 1, [0, 1]), ("p2", 2, [0]), ("p3", 2, [1, 2])):
        sim.bind(pod[pid], node, np.array(gpus))
        plugin.on_bind(sim.state, w, pod[pid], node)
    sim.advance_to(1.0)
    sched.cycle(1.0)  # the gang's trial fails, then p6 is placed
    assert sim.pod_node[[pod["p4"], pod["p5"]]].tolist() == [-1, -1]
    # 1-GPU pod: n0 only its own kind 75 + 25 x 1000 // 8000 = 78; n1 only another kind 6;
    # n2 its kind among others 50 + 9 = 59. A leftover 7-GPU tag on n0 would make it 50 + 3 = 53.
    assert sim.pod_node[pod["p6"]] == 0


def test_random_picks_one_feasible_node_and_a_fitting_gpu():
    state = make_state([("g8", 128000, [1000, 200, 600, 0, 700, 1000, 100, 300])] * 3)
    w = make_pods(state, [(1000, 1, 500)])
    plugin, rng = RandomScore(), np.random.default_rng(7)
    chosen_nodes, chosen_gpus = set(), set()
    for _ in range(200):
        s = np.array(scores(plugin, state, w, 0, rng))
        assert sorted(s.tolist()) == [0, 0, 100]
        chosen_nodes.add(int(np.argmax(s)))
        chosen_gpus |= set(plugin.pick_devices(state, w, 0, 0).tolist())
    assert chosen_nodes == {0, 1, 2}
    assert chosen_gpus == {0, 2, 4, 5}  # exactly the GPUs with >= 500 free


# ---- FGD ----------------------------------------------------------------------------------
# target: a share of 500 (p 0.5) and one whole GPU (p 0.5), 1000 CPU each, any model
TARGET = TargetWorkload(cpu=np.array([1000, 1000]), gpus=np.array([1, 1], np.int32),
                        milli=np.array([500, 1000], np.int32), model_mask=np.array([0, 0]),
                        popularity=np.array([0.5, 0.5]))


def sig(x: float) -> int:
    return math.floor(100 / (1 + math.exp(-x / 1000)))


def fgd_world():
    # n0 free [1000, 1000], F = 0; n1 free [1000, 600], F = 0.5 x 600 (whole GPU: 600 left over) = 300
    # n2 like n0 but only 1500 CPU free
    state = make_state([("g2", 64000, [1000, 1000]), ("g2", 64000, [1000, 600]), ("g2", 1500, [1000, 1000])])
    w = make_pods(state, [(1000, 1, 400), (1000, 1, 1000), (1000, 0, 0)])
    plugin = FGD()
    plugin.target = TARGET
    return state, w, plugin


def test_fgd_share_takes_best_gpu():
    state, w, plugin = fgd_world()
    # share 400: n0 either GPU -> [600, 1000]: F 300 -> sig(-300) = 42
    #   n1 GPU0 -> [600, 600]: whole lacks GPU -> 0.5 x 1200 = 600 -> sig(-300) = 42
    #   n1 GPU1 -> [1000, 200]: 0.5 x 200 + 0.5 x 200 = 200 -> sig(+100) = 52  (best)
    #   n2 -> [600, 1000] with 500 CPU left: every shape lacks CPU -> F = G = 1600 -> sig(-1600)
    assert scores(plugin, state, w, 0) == [sig(-300), sig(100), sig(-1600)] == [42, 52, 16]
    assert plugin.pick_devices(state, w, 0, 1).tolist() == [1]
    assert plugin.pick_devices(state, w, 0, 0).tolist() == [0]  # equal scores: first index


def test_fgd_whole_and_cpu_only_pods():
    state, w, plugin = fgd_world()
    # whole GPU: n0 -> [1000, 0]: F 0 -> 50; n1 -> [0, 600]: whole lacks GPU -> 0.5 x 600 = 300 -> 50
    assert scores(plugin, state, w, 1) == [50, 50, sig(-1000)]
    # CPU-only 1000: n2 keeps 500 CPU -> every shape lacks CPU -> F 2000 -> sig(-2000) = 11
    assert scores(plugin, state, w, 2) == [50, 50, sig(-2000)] == [50, 50, 11]


def test_fgd_follows_binds_and_scratch_copies():
    state, w, plugin = fgd_world()
    assert scores(plugin, state, w, 0)[1] == 52
    state.bind(1, 1000, 0, np.array([1]), 400)  # n1 now [1000, 200], F 200
    # share 400 on n1: GPU0 -> [600, 200]: no whole -> 0.5 x 800 + 0.5 x 200... computed afresh:
    fresh = FGD()
    fresh.target = TARGET
    assert scores(plugin, state, w, 0) == scores(fresh, state, w, 0)
    scratch = state.copy()
    scratch.bind(0, 1000, 0, np.array([0]), 1000)
    assert scores(plugin, scratch, w, 0) == scores(fresh, scratch, w, 0)
    assert scores(plugin, state, w, 0) == scores(fresh, state, w, 0)


@pytest.mark.parametrize("cache_scores", [FGD.CACHE_SCORES, 1])
def test_fgd_follows_a_mix_of_binds_releases_and_copies(monkeypatch, cache_scores):
    """The plugin keeps its node states across calls (mutation stamps on one state object,
    contents on another), and starts afresh past its cache bound (1: at 2 x 6 states):
    after any mix of changes it scores as a fresh plugin does."""
    monkeypatch.setattr(FGD, "CACHE_SCORES", cache_scores)
    rng = np.random.default_rng(3)
    state = make_state([("g2", 64000, [1000, 1000])] * 4 + [("g8", 128000, [1000] * 8)] * 2)
    w = make_pods(state, [(1000, 1, 400), (1000, 1, 1000), (2000, 2, 1000), (3000, 0, 0)])
    plugin = FGD()
    plugin.target = TARGET
    placed = []  # (node, pod, gpus) on `state`
    for step in range(120):
        st = state if step % 7 else state.copy()  # now and then a scratch copy, changed once
        live = placed if st is state else list(placed)
        if live and rng.random() < 0.4:
            n, pod, gpu = live.pop(int(rng.integers(len(live))))
            st.release(n, int(w.cpu[pod]), 0, gpu, int(w.milli[pod]))
        else:
            pod = int(rng.integers(w.n_pods))
            cand = np.flatnonzero(feasible(st, w, pod))
            if len(cand):
                n = int(cand[rng.integers(len(cand))])
                gpu = plugin.pick_devices(st, w, pod, n)
                st.bind(n, int(w.cpu[pod]), 0, gpu, int(w.milli[pod]))
                live.append((n, pod, gpu))
        fresh = FGD()
        fresh.target = TARGET
        for target_state in (st, state):
            for pod in range(w.n_pods):
                assert scores(plugin, target_state, w, pod) == scores(fresh, target_state, w, pod), step
        assert plugin._n_states <= plugin._max_states + state.n_slots  # at most one sync past the bound


def node_frag(state, n, row, cpu, target):
    """Fragmentation of node n alone, with GPU row `row` and `cpu` free."""
    return node_fragmentation(row[None], np.array([state.gpu_cap[n]]), np.array([cpu]),
                              np.array([state.model_bit[n]]), target)[0]


def brute_force_fgd(state, w, pod, target):
    """Reference: loop over nodes and GPUs, one fragmentation call per placement."""
    out = []
    for n in range(state.n_slots):
        row, cap = state.gpu_free[n].astype(np.int64), state.gpu_cap[n]
        before, cpu = node_frag(state, n, row, state.cpu_free[n], target), state.cpu_free[n] - w.cpu[pod]
        if w.gpus[pod] == 1 and w.milli[pod] < 1000:
            best = 0
            for g in range(cap):
                if row[g] >= w.milli[pod]:
                    after = row.copy()
                    after[g] -= w.milli[pod]
                    best = max(best, sig(before - node_frag(state, n, after, cpu, target)))
            out.append(best)
        else:
            after = row.copy()
            after[np.flatnonzero(row == 1000)[:w.gpus[pod]]] = 0
            out.append(sig(before - node_frag(state, n, after, cpu, target)))
    return out


free_milli = st.sampled_from([0, 100, 250, 400, 500, 600, 750, 1000])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([8000, 30000, 64000]), st.lists(free_milli, min_size=2, max_size=2)),
                min_size=1, max_size=6),
       st.sampled_from([(1000, 1, 250), (1000, 1, 500), (2000, 1, 1000), (1000, 2, 1000), (4000, 0, 0)]))
def test_fgd_matches_brute_force(nodes, pod):
    state = make_state([("g2", cpu, free) for cpu, free in nodes])
    w = make_pods(state, [pod])
    plugin = FGD()
    plugin.target = TARGET
    cand = np.flatnonzero(feasible(state, w, 0))
    got = plugin.score(state, w, 0, cand, None).tolist()
    assert got == [brute_force_fgd(state, w, 0, TARGET)[n] for n in cand]


def test_scores_are_integers_in_range():
    state = make_state([("g8", 128000, [1000] * 8), ("g8", 9000, [1000, 300, 0, 0, 1000, 0, 0, 0]),
                        ("g2", 64000, [500, 1000])])
    w = make_pods(state, [(8000, 1, 300), (8000, 1, 1000), (8000, 0, 0)])
    for plugin in (RandomScore(), DotProd(), GpuClustering(), GpuPacking(), BestFit(), FGD(), LeastAllocated(),
                   MostAllocated(), BalancedAllocation(resources={"cpu": 1, "memory": 1, "nvidia.com/gpu": 1})):
        for pod in range(3):
            s = np.array(scores(plugin, state, w, pod))
            assert ((s >= 0) & (s <= 100) & (s == np.floor(s))).all(), (type(plugin).__name__, pod, s)


@pytest.mark.parametrize("name", ["random", "dotprod", "gpu_clustering", "gpu_packing", "best_fit", "fgd",
                                  "fgd_most_allocated"])
def test_policy_configs_instantiate(name):
    from hydra.utils import instantiate

    from harness.config import compose

    plugin = instantiate(compose("config", [f"policy={name}"]).policy, _convert_="all")
    assert isinstance(plugin, ScorePlugin)
    if isinstance(plugin, WeightedSum):
        assert [type(p).__name__ for p in plugin.plugins] == ["FGD", "MostAllocated"]
        assert [p.weight for p in plugin.plugins] == [4.0, 0.03]


# ---- weighted sum -------------------------------------------------------------------------
def weighted_world():
    # pod: 64000 CPU (0.5 of 128000), a share of 500 (500 / 8000 = 0.0625)
    # GpuPacking: n0 best-fitting GPU 500 left -> 100 - (500 x 100 // 1000) // 10 = 95;
    #   n1 all GPUs free -> idle 33 - 8 = 25; n2 600 left -> 100 - 60 // 10 = 94
    # DotProd 100 x (1 - dot / 2), dot = 0.5 x CPU free / 128000 + 0.0625 x GPU left / 8000:
    #   n0 0.5 + 0.0625 x 0.9375 -> 72; n1 0.25 + 0.0625 -> 84; n2 0.375 + 0.0625 x 0.95 -> 78
    state = make_state([("g8", 128000, [500] + [1000] * 7), ("g8", 64000, [1000] * 8),
                        ("g8", 96000, [600] + [1000] * 7)])
    return state, make_pods(state, [(64000, 1, 500)])


def test_weighted_sum_picks_what_neither_plugin_alone_picks():
    state, w = weighted_world()
    assert scores(GpuPacking(), state, w, 0) == [95, 25, 94]  # alone: n0
    assert scores(DotProd(), state, w, 0) == [72, 84, 78]  # alone: n1
    both = WeightedSum([GpuPacking(), DotProd()])
    assert scores(both, state, w, 0) == [95 + 72, 25 + 84, 94 + 78]  # n2
    packing_first = WeightedSum([GpuPacking(weight=10), DotProd()])
    assert scores(packing_first, state, w, 0) == [950 + 72, 250 + 84, 940 + 78]  # n0
    # in results tables each weighting is its own policy
    assert (both.name, packing_first.name, DotProd().name) == ("1*GpuPacking+1*DotProd",
                                                               "10*GpuPacking+1*DotProd", "DotProd")


def test_weighted_sum_of_one_plugin_only_scales():
    state, w = weighted_world()
    for plugin in (DotProd, GpuPacking, BestFit, FGD):
        alone, inside = plugin(), WeightedSum([plugin(weight=3)])
        assert scores(inside, state, w, 0) == [3 * s for s in scores(alone, state, w, 0)]
        assert inside.pick_devices(state, w, 0, 2).tolist() == alone.pick_devices(state, w, 0, 2).tolist()


def test_weights_must_be_positive():
    with pytest.raises(ConfigError, match="policy.weight"):
        DotProd(weight=0)
    with pytest.raises(ConfigError, match="policy.plugins"):
        WeightedSum([])


def test_fgd_default_target_follows_the_workload():
    state = make_state([("g2", 64000, [1000, 600])])
    plugin = FGD()
    w1 = make_pods(state, [(1000, 1, 1000)] * 3 + [(1000, 1, 400)])
    plugin.score(state, w1, 3, np.array([0]), None)
    assert plugin._target.milli.tolist() == [1000, 400]
    w2 = make_pods(state, [(2000, 1, 300)])
    plugin.score(state, w2, 0, np.array([0]), None)
    assert plugin._target.milli.tolist() == [300] and plugin.target is None


def test_fgd_follows_a_reverted_trial():
    """A reverted trial (`ClusterState.revert`) restores the state's mutation stamps too: a
    plugin that synced while the trial ran must not keep the trial's node contents."""
    state = make_state([("g2", 64000, [1000, 1000])] * 2 + [("g8", 128000, [1000] * 8)])
    w = make_pods(state, [(1000, 1, 400), (2000, 2, 1000)])
    plugin = FGD()
    plugin.target = TARGET
    scores(plugin, state, w, 0)
    state.fork()
    saved = plugin.checkpoint()
    for n in (0, 2):  # a trial: two pods placed, the plugin scoring in between (a sync)
        state.bind(n, 2000, 0, plugin.pick_devices(state, w, 1, n), 1000)
        scores(plugin, state, w, 0)
    state.revert()
    plugin.restore(saved)
    state.bind(1, 1000, 0, np.array([0]), 400)  # a real change after it, on another node
    fresh = FGD()
    fresh.target = TARGET
    for pod in range(w.n_pods):
        assert scores(plugin, state, w, pod) == scores(fresh, state, w, pod)


def test_every_policy_config_has_a_name_of_its_own():
    """A results table tells policies apart by name: bin_packing (MostAllocated with GPUs weighted
    3) was `MostAllocated`, as most_allocated is, and a report pooled the two."""
    from hydra.utils import instantiate

    from harness.config import compose, conf_dir

    names = {p.stem: instantiate(compose("config", [f"policy={p.stem}"]).policy, _convert_="all").name
             for p in sorted((conf_dir() / "policy").glob("*.yaml"))}
    assert len(set(names.values())) == len(names), names
    assert names["bin_packing"] == "MostAllocated(cpu 1, memory 1, nvidia.com/gpu 3)"
    assert names["most_allocated"] == "MostAllocated"  # kube-scheduler's default resources: no weights shown
    assert names["kube_default"] == "1*LeastAllocated+1*BalancedAllocation"
