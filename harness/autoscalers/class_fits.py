"""Where each pod class fits the nodes that exist, kept up to date by the nodes that changed.

Cluster Autoscaler's filter-out-schedulable step (upstream core/podlistprocessor/
filter_out_schedulable.go) packs the pending pods onto a what-if copy of the nodes, first fit.
A what-if only binds, and a bind only takes room, so a node one pod of a class does not fit
on the real state takes none of the class in the what-if either: the packing may skip it
without changing a placement. The nodes a class fits are found once, then filtered again
only where a node changed since (`ClusterState.changed_at`, which every change of a node's
rows moves, its coming and going too; the scheduler's futile round trips, which leave a
node as it was, aside: `Scheduler.really_changed_since`), so a scan's packing walks the few
nodes each class may use rather than every node (the compiled walk's cost is per node that
passes its cheap checks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.filters import feasible
from harness.state import ClusterState
from harness.status import ABSENT
from harness.workload import Workload


class ClassFits:
    def __init__(self, state: ClusterState, view: Workload, changed_since: Callable[[int], np.ndarray] | None = None):
        """`changed_since(mutations)`: the nodes whose rows may differ from what they were when
        `ClusterState.mutations` was that (a superset); by default those whose `changed_at` moved."""
        self.state, self.view = state, view
        self.changed_since = changed_since or (lambda since: np.flatnonzero(state.changed_at > since))
        #: per class: (`ClusterState.mutations` when last brought up to date, the nodes one of its
        #: pods fits, as a mask of slots)
        self.known: dict[int, tuple[int, np.ndarray]] = {}

    def nodes(self, cls: int, pod: int) -> np.ndarray:
        """The nodes that exist (ready or booting) on which one pod of class `cls` (`pod` one of
        them, in the autoscaler's view) fits now, as a mask of slots (the memo's own: read it,
        do not write it)."""
        st = self.state
        assert not st.in_trial, "a trial's changes are undone and its change counts reused: read between trials"
        known = self.known.get(cls)
        if known is None:
            fits = feasible(st, self.view, pod, st.status != ABSENT)
        else:
            since, fits = known
            if since != st.mutations:
                changed = self.changed_since(since)
                if len(changed):
                    fits[changed] = feasible(st, self.view, pod, st.status != ABSENT, at=changed)
        self.known[cls] = (st.mutations, fits)
        return fits
