"""Node-group templates that differ from what the nodes publish (`cluster.dra.templates`): the
autoscalers simulate a node they have not seen with its group's template, the scheduler binds
on what the node really publishes. Numbers by hand, with the conventions of
tests/test_dra_loops.py (scans on a 10 s grid, boots of 300 s, a node billed from request to
removal, removed once unneeded 600 s and 600 s after the last scale-up).

The cluster: two 2-GPU types, `pcie2` (each GPU its own NVLink clique, 6 $/h) and `nvl2` (both
GPUs in one clique, 10 $/h); the pod asks for an NVLink pair (a claim matching `cliqueId`, and
the same in its columns: `gpus_same_nvlink`). `pcie2`'s template claims an NVLink pair its
nodes do not have.
"""

from __future__ import annotations

import pytest

from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.loops.separate import SeparateLoops
from harness.scheduler.framework import Scheduler
from harness.scores import LeastAllocated
from harness.status import Event
from tests import scenarios as sc

H = 3600.0
approx = pytest.approx
CLIQUE = "gpu.nvidia.com/cliqueId"
PAIR = {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2}}],
                    "constraints": [{"matchAttribute": CLIQUE}]}}


def gpus(cliques: list[str], driver: str = "gpu.nvidia.com", pool: str = "node") -> list[dict]:
    """One slice of len(cliques) GPUs, GPU i in NVLink clique cliques[i]."""
    devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "index": {"int": i},
                                                   "productName": {"string": "H100"}, "cliqueId": {"string": c}}}
               for i, c in enumerate(cliques)]
    return [{"driver": driver, "nodeName": pool, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
             "devices": devices}]


def pair_cluster(max_size: int = 4, **dra) -> Cluster:
    types = [sc.node_type("pcie2", gpus=2, nvlink_domains=2, numa_domains=1),
             sc.node_type("nvl2", gpus=2, nvlink_domains=1, numa_domains=1)]
    pools = [sc.pool("pcie", "pcie2", price_on_demand=6.0, max_size=max_size),
             sc.pool("nvl", "nvl2", price_on_demand=10.0)]
    section = {"node_types": {"pcie2": gpus(["a", "b"]), "nvl2": gpus(["a", "a"])}, "claims": {"pair": PAIR}, **dra}
    return Cluster(node_types=types, pools=pools, name="dra-templates", dra=section)


PAIR_POD = [{"claim": "pair", "gpu_count": 2, "gpus_same_nvlink": True}]
WRONG = {"templates": {"pcie2": gpus(["a", "a"])}}  # the provider says pcie2 has an NVLink pair


def pools_of(sim) -> list[str]:
    """The pool of every node the run had, in the order they were asked for."""
    return [sim.cluster.pools[r.pool].name for r in sim.nodes]


def test_cluster_autoscaler_buys_what_the_template_promises_until_a_ready_node_replaces_it():
    row, sim = sc.run(sc.trace(PAIR_POD), pair_cluster(**WRONG), sc.separate(), horizon_s=2 * H)
    # t=0: by the template both pools hold the pair; the price expander takes pcie (6 < 10): A.
    # t=300: A is up with its own cliques a, b: the scheduler cannot allocate the pair. A has been
    # ready less than a minute, so pcie's template is still the provider's: CA buys pcie B, which
    # holds the pod in its view while it boots. t=370: A has been ready for more than 60 s
    # (300 + 60 < 370): pcie's template is now a copy of A, B (booting, empty) is simulated as
    # such a copy, the pod fits neither: CA buys nvl C (ready 670, the pod runs 670-4270).
    # A goes at 970 (unneeded since 300, but 600 s after the last scale-up at 370), B at 1200
    # (ready 600 + 600), C at 4270 + 600 = 4870.
    assert pools_of(sim) == ["pcie", "pcie", "nvl"]
    assert [r.requested_at for r in sim.nodes] == [0.0, 300.0, 370.0]
    assert [r.removed_at for r in sim.nodes] == [970.0, 1200.0, 4870.0]
    assert row["pods_done"] == 1 and row["nodes_provisioned"] == 3 and row["nodes_never_used"] == 2
    assert row["cost_usd"] == approx((6.0 * 970 + 6.0 * (1200 - 300) + 10.0 * (4870 - 370)) / H)
    # pending, by the pod's columns as every pending reason is: no node has an NVLink pair while
    # A boots (0-300), then A would hold it but for its NVLink claim (300-370), then C boots with
    # room for it (370-670)
    assert row["pending_s_shortage"] == approx(300.0)
    assert row["pending_s_topology"] == approx(70.0)
    assert row["pending_s_booting"] == approx(300.0)


def test_a_template_equal_to_what_the_nodes_publish_changes_nothing():
    same = {"templates": {"pcie2": gpus(["a", "b"], pool="another-name")}}  # pool names aside, the same
    cl = pair_cluster(**same)
    assert not cl.devices.templated
    table = sc.trace(PAIR_POD)
    for loop in (sc.separate, sc.merged):
        with_template, _ = sc.run(table, cl, loop(), horizon_s=2 * H)
        without, _ = sc.run(table, pair_cluster(), loop(), horizon_s=2 * H)
        assert with_template.keys() == without.keys()
        assert all(a == b or a != a and b != b  # nan is nan
                   for a, b in zip(with_template.values(), without.values(), strict=True))
    # without a wrong template the right type is bought at once: nvl at 0, up at 300, the pod
    # runs 300-3900, the node goes at 4500
    assert without["nodes_provisioned"] == 1 and without["cost_usd"] == approx(10.0 * 4500 / H)


def test_the_merged_planner_binds_on_the_template_and_learns_as_cluster_autoscaler_does():
    events = []
    cl = pair_cluster(**WRONG)
    row, sim = _run_noting(sc.trace(PAIR_POD), cl, sc.merged(), 2 * H, events)
    # t=0: the plan on pcie's template costs 6, on nvl 10: pcie A, the pod bound on A's template
    # devices. t=300: A comes up publishing cliques a, b: the pod's claim is allocated anew and
    # does not fit, so it goes back to the queue; A has been ready less than a minute, so the
    # planner buys pcie B on the template and binds the pod there. t=370: the planner learns
    # pcie's devices from A, as Cluster Autoscaler would: B, still booting, is planned on them,
    # the pod goes back to the queue and only nvl holds it: C at 370, the pod runs 670-4270.
    # The same nodes and times as Cluster Autoscaler's (the same information): A goes at 970,
    # B at 1200, C at 4870.
    assert pools_of(sim) == ["pcie", "pcie", "nvl"]
    assert [r.requested_at for r in sim.nodes] == [0.0, 300.0, 370.0]
    assert [r.removed_at for r in sim.nodes] == [970.0, 1200.0, 4870.0]
    assert row["pods_done"] == 1 and row["nodes_never_used"] == 2
    assert row["cost_usd"] == approx((6.0 * 970 + 6.0 * (1200 - 300) + 10.0 * (4870 - 370)) / H)
    released = [(t, node) for t, kind, node in events if kind == Event.RELEASED]
    assert released == [(300.0, 0), (370.0, 1)]


def _run_noting(table, cl, loop, horizon_s, events):
    """`sc.run` with the decision trace heard: (time, kind, node) of each event."""
    from harness.metrics import jobs_frame, nodes_frame, summary_row
    from harness.sim import Simulation
    from harness.workload import compile_workload

    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=horizon_s)
    sim.hooks.event.append(lambda kind, pod, job, node, detail: events.append((sim.now, kind, node)))
    sim.run(loop)
    row = summary_row(sim, jobs_frame(sim), nodes_frame(sim), {"loop": loop.name})
    return row.to_dicts()[0], sim


def test_karpenter_never_learns_and_keeps_launching_what_the_template_promises():
    loop = SeparateLoops(Scheduler(LeastAllocated(), gang=sc.GANG["coscheduling"]()), KarpenterAutoscaler())
    row, sim = sc.run(sc.trace(PAIR_POD), pair_cluster(max_size=16, **WRONG), loop, horizon_s=H)
    # Karpenter takes pcie2's devices from the provider's template for every node not up yet,
    # never from the nodes: the batch that closes at 1 s launches the cheaper pcie; while it
    # boots it holds the pod in Karpenter's view; it comes up without the pair at 301, the pod
    # is pending again and the batch at once launches the next pcie: one at 1 + 300 k, 12 in the
    # hour, none ever used, the pod never runs.
    assert pools_of(sim) == ["pcie"] * 12
    assert [r.requested_at for r in sim.nodes] == [1.0 + 300 * k for k in range(12)]
    assert row["pods_done"] == 0 and row["nodes_never_used"] == 12


@pytest.mark.parametrize("templates, where", [
    ("x", "cluster.dra.templates"),
    ({"nope": []}, "cluster.dra.templates.nope"),
    ({"pcie2": "x"}, "cluster.dra.templates.pcie2"),
    ({"pcie2": [{"pool": {"name": "p"}, "devices": []}]}, "cluster.dra.templates.pcie2[0]"),  # no driver
])
def test_a_bad_template_is_refused_by_key(templates, where):
    with pytest.raises(ConfigError) as err:
        pair_cluster(templates=templates)
    assert err.value.where == where


def test_a_template_gpu_beyond_the_type_is_refused():
    with pytest.raises(ConfigError, match=r"cluster.dra.templates.pcie2: device 'gpu-2' has index 2, but node "
                                          r"type 'pcie2' has 2 GPUs"):
        pair_cluster(templates={"pcie2": gpus(["a", "a", "a"])})


def test_a_template_with_more_pools_of_a_driver_than_the_nodes_is_refused():
    more = gpus(["a", "a"]) + gpus([], driver="nic.loopbench.io")  # a NIC pool the nodes do not publish
    with pytest.raises(ConfigError, match=r"cluster.dra.templates.pcie2: publishes 1 pool\(s\) of driver "
                                          r"'nic.loopbench.io', the node type's nodes 0"):
        pair_cluster(templates={"pcie2": more})


def test_templates_are_not_modelled_with_device_taints():
    rules = [{"at_s": 0, "taint": {"key": "k", "effect": "NoSchedule"}}]
    with pytest.raises(ConfigError, match="cluster.dra.templates: not modelled together with taint_rules"):
        pair_cluster(taint_rules=rules, **WRONG)
