"""Cluster Autoscaler's node-group templates as upstream builds them, with their ResourceSlices:
which template a node group has (a ready node's copy, the cache of one, or the cloud provider's
TemplateNodeInfo), and which templates its DRA readiness check would wait on forever.

Each test translates upstream cases of kubernetes-sigs/cluster-autoscaler (moved there from
kubernetes/autoscaler's cluster-autoscaler/ in July 2026; the same files and cases), named in
its docstring: pkg/processors/nodeinfosprovider/mixed_nodeinfos_processor_test.go
TestMixedNodeInfosProvider, and pkg/processors/customresources/dra_processor_test.go
TestAreResourcePoolsReady. Upstream's template differs from its node in CPU and memory; ours in
the devices the node publishes, the subject here (a node group is one node type). Upstream's
`now - 2 minutes` is a node ready since 0 seen at 120 s. docs/conformance.md lists every case.
"""

from __future__ import annotations

import pytest

from harness.autoscalers.node_templates import NodeTemplates
from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc


def slices(*pools: tuple[str, str, int]) -> list[dict]:
    """One slice per (driver, pool, GPUs): GPU devices indexed from 0 in each."""
    return [{"driver": driver, "nodeName": "n", "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": f"{pool}-{i}", "attributes": {"type": {"string": "gpu"}, "index": {"int": i}}}
                         for i in range(k)]}
            for driver, pool, k in pools]


NODE = slices(("gpu.nvidia.com", "node", 2))
TEMPLATE = slices(("gpu.nvidia.com", "template", 1))  # the provider's guess: one GPU


def group(node: list[dict] = NODE, template: list[dict] = TEMPLATE) -> Cluster:
    types = [sc.node_type("t", gpus=2, nvlink_domains=1, numa_domains=1)]
    return Cluster(node_types=types, pools=[sc.pool("ng", "t")], name="node-templates",
                   dra={"node_types": {"t": node}, "templates": {"t": template}})


# (upstream case, what happens to the group's nodes: (time, "ready" | "booting" | "gone"), when
# CA looks, the template it uses: "node" (a ready node's copy or its cache) or "template")
CASES = [
    ("Nodegroup with template", [], 120.0, "template"),
    ("Nodegroup with ready node", [(0.0, "ready")], 120.0, "node"),
    ("Ready node is picked over unready node", [(0.0, "booting"), (0.0, "ready")], 120.0, "node"),
    ("Ready node is picked over template", [(0.0, "ready")], 120.0, "node"),
    ("Template is picked over unready node", [(0.0, "booting")], 120.0, "template"),
    ("Template is picked over just created node", [(120.0, "ready")], 120.0, "template"),
    ("Fresh cache used", [(0.0, "ready"), (120.0, "gone")], 150.0, "node"),
    ("Ready node picked over cache, updates cache", [(0.0, "ready"), (120.0, "gone"), (120.0, "ready")], 360.0,
     "node"),
    ("Cache picked over templates and unready nodes", [(0.0, "ready"), (120.0, "gone"), (120.0, "booting")], 150.0,
     "node"),
]


@pytest.mark.parametrize("case, history, now, expected", CASES, ids=[c[0] for c in CASES])
def test_mixed_node_infos_provider(case, history, now, expected):
    """TestMixedNodeInfosProvider: a ready node's copy once it has been ready a minute
    (stabilizationDelay), kept in the cache once it is gone; else the provider's template; a
    node not ready (booting) is never a template while the provider gives one."""
    cl = group()
    sim = Simulation(compile_workload(sc.trace([{"submit_s": 10 * 3600.0}]), cl), cl, seed=0, horizon_s=3600.0)
    templates = NodeTemplates(sim, from_nodes=True)
    slot = 0
    for t, what in history:
        sim.advance_to(t)
        templates.refresh(t)  # CA's loop runs at each of these instants too
        if what == "gone":
            sim.fleet.remove(slot - 1)
        else:
            sim.fleet.add(slot, ready=what == "ready")
            slot += 1
    sim.advance_to(now)
    templates.refresh(now)
    layer = cl.devices
    assert int(templates.pool_devices[0]) == (0 if expected == "node" else int(layer.template_of[0]))


def test_old_cache_is_kept_for_the_run():
    """TestMixedNodeInfosProvider / `Old cache not used and cleared` (different): upstream's test
    sets the cache's TTL to a minute; its default (--node-info-cache-expire-time) is 10 years,
    which no replay outlives, and the TTL is not a setting here: the copy of a node seen ready
    stays the group's template for the run."""
    cl = group()
    sim = Simulation(compile_workload(sc.trace([{"submit_s": 10 * 3600.0}]), cl), cl, seed=0, horizon_s=3600.0)
    templates = NodeTemplates(sim, from_nodes=True)
    sim.fleet.add(0, ready=True)
    templates.refresh(120.0)
    sim.advance_to(120.0)
    sim.fleet.remove(0)
    templates.refresh(3000.0)
    assert int(templates.pool_devices[0]) == 0


POOL = ("driver1", "pool_real", 1)
CASES_READY = [
    ("EmptyTemplatesAndRealSlices", [], [], True),
    ("EmptyTemplatesWithRealSlices", [POOL], [], True),
    ("TemplateRequiresOneRealHasOne", [POOL], [("driver1", "pool_template", 1)], True),
    ("TemplateRequiresOneRealHasNone", [], [("driver1", "pool_template", 1)], False),
    ("TemplateRequiresOneRealHasTwo", [POOL, ("driver1", "pool_real_2", 1)], [("driver1", "pool_template", 1)], True),
    ("TemplateRequiresMultipleDriversRealMatches", [("driver1", "real_1", 1), ("driver2", "real_2", 1)],
     [("driver1", "tpl_1", 1), ("driver2", "tpl_2", 1)], True),
    ("TemplateRequiresMultipleDriversRealMissingOne", [("driver1", "real_1", 1)],
     [("driver1", "tpl_1", 1), ("driver2", "tpl_2", 1)], False),
]


@pytest.mark.parametrize("case, real, template, ready", CASES_READY, ids=[c[0] for c in CASES_READY])
def test_are_resource_pools_ready(case, real, template, ready):
    """TestAreResourcePoolsReady (different where upstream says false): upstream's DRA readiness
    check holds a node unready until it publishes as many complete pools of each driver as its
    group's template; where it never would (the template promises a pool of a driver the nodes
    lack) the template is refused here, naming the rule, rather than nodes held unready forever.
    A template of fewer pools is accepted. (`RealHasIncompletePool` is not expressible: a node
    publishes whole pools.)"""
    if ready:
        group(slices(*real), slices(*template))
    else:
        with pytest.raises(ConfigError, match=r"cluster.dra.templates.t: publishes 1 pool\(s\) of driver 'driver[12]'"):
            group(slices(*real), slices(*template))
