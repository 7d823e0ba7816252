"""What an autoscaler simulates a node it has not seen with: per pool (a node group), the
devices of its node type's node-group template (`cluster.dra.templates`, harness/dra/layer.py)
or those its nodes were seen to publish.

Cluster Autoscaler (kubernetes-sigs/cluster-autoscaler, pkg/processors/nodeinfosprovider/
mixed_nodeinfos_processor.go) builds a node group's template from a node of the group that is
ready, has been for a minute (`stabilizationDelay`) and is schedulable, a sanitized copy of its
ResourceSlices included; with none, from the copy it cached of such a node earlier (kept 10
years by default: the run); with none ever, from the cloud provider's `TemplateNodeInfo`. Its
upcoming nodes (asked for, not yet up) are copies of that template, each loop anew: so once a
pool learned, its booting nodes are planned as its nodes publish (`plan_as_published`, which
sends back to the queue what the merged planner had bound there and they cannot hold). Karpenter
(kubernetes-sigs/karpenter, designs/dra-scheduling.md) takes its instance types'
ResourceSliceTemplates from the cloud provider for every node not yet initialized, and never
learns from the nodes (`from_nodes: false`). The merged planner follows Cluster Autoscaler's
rule, so that every Cluster-Autoscaler-like loop knows the same.

With no template that differs from its nodes, nothing here changes what a loop does.
"""

from __future__ import annotations

import numpy as np

from harness.quiet import Clock
from harness.status import ABSENT, BOOTING, READY
from harness.view import SimulationView
from harness.workload import Workload, pools_fit

#: upstream's stabilizationDelay: a node ready for less than this is not a template yet
STABLE_S = 60.0


class NodeTemplates:
    def __init__(self, sim: SimulationView, from_nodes: bool):
        self.sim, self.from_nodes = sim, from_nodes
        st, layer = sim.state, sim.state.dra
        #: some node type's template differs from what its nodes publish: else nothing to do
        self.active = layer is not None and layer.templated
        types = {t.name: i for i, t in enumerate(sim.cluster.node_types)}
        self.pool_type = np.array([types[p.node_type] for p in sim.cluster.pools], np.int64)
        self.template_type = self.pool_type if layer is None else layer.template_of[self.pool_type].astype(np.int64)
        self.slot_pool = st.slot_pool
        #: per pool, a node of it was seen ready for a minute: its own devices replace the template
        self.learned = np.zeros(len(self.pool_type), bool)
        #: per view: (the view, pools_fit on the nodes' own devices, on the templates, both mixed
        #: per state of knowledge)
        self._tables: dict[int, tuple[Workload, np.ndarray, np.ndarray, dict[bytes, np.ndarray]]] = {}

    def refresh(self, now: float) -> bool:
        """Learn from the nodes up now (Cluster Autoscaler's rule): a pool with a node ready
        since more than `STABLE_S` ago is simulated with its nodes' own devices from now on,
        its booting nodes too. Returns whether a pool learned (a loop then plans anew)."""
        if not self.active or not self.from_nodes or self.learned.all():
            return False
        sim, st = self.sim, self.sim.state
        seen = (st.status == READY) & (sim.node_ready_at + STABLE_S < now)
        new = (np.bincount(self.slot_pool[seen], minlength=len(self.learned)) > 0) & ~self.learned
        if not new.any():
            return False
        self.learned |= new
        booting = (st.status == BOOTING) & new[self.slot_pool] & (st.dra_type != st.slot_type)
        for n in np.flatnonzero(booting).tolist():  # the few bought on the template before
            sim.plan_as_published(n)
        return True

    def clocks(self) -> list[Clock]:
        """When a pool not learned yet will learn from a node ready now (harness/quiet.py): a
        scan from then on may plan otherwise."""
        if not self.active or not self.from_nodes:
            return []
        st = self.sim.state
        ready = (st.status == READY) & ~self.learned[self.slot_pool]
        if not ready.any():
            return []
        return [(float(self.sim.node_ready_at[ready].min()), STABLE_S)]

    def key(self) -> bytes:
        """What the loop knows of its pools' nodes now: a cache key of its plans."""
        return self.learned.tobytes()

    @property
    def pool_devices(self) -> np.ndarray:
        """Per pool, the device type a node of it not seen yet is simulated with."""
        return np.where(self.learned, self.pool_type, self.template_type)

    def template(self, p: int) -> bool:
        """Whether pool p's new nodes are planned on its template (`SimulationView.provision`)."""
        return not bool(self.learned[p])

    def slot_devices(self) -> np.ndarray | None:
        """Per slot, the device type a what-if opens a node of in it if it is absent (-1 where
        a node is). None: no template to apply (`Snapshot`, `ClusterState.retype`)."""
        if not self.active:
            return None
        return np.where(self.sim.state.status == ABSENT, self.pool_devices[self.slot_pool], -1)

    def fits(self, w: Workload) -> np.ndarray:
        """pools x pods: could a node of the pool, as the loop knows it now, hold the pod
        (`pools_fit` on each pool's devices)? The first call for a view tabulates every pod for
        both states of knowledge (call it on attach: a pod's rows are read then, not later)."""
        table = self._tables.get(id(w))
        if table is None:
            real = pools_fit(self.sim.cluster, w)
            said = pools_fit(self.sim.cluster, w, self.template_type) if self.active else real
            table = self._tables[id(w)] = (w, real, said, {})  # the view kept: ids stay unique
        _, real, said, known = table
        if not self.active:
            return real
        key = self.key()
        if key not in known:
            known[key] = np.where(self.learned[:, None], real, said)
        return known[key]
