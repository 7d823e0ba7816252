"""WaitsForCapacity: a PreFilter that lets a gang reserve nothing until it fits ready plus
booting nodes (the first proposed scheduler-autoscaler interface step: the scheduler *sees*
in-flight capacity), so that it waits for capacity rather than hold devices it cannot use.
As upstream Coscheduling's PreFilter checks a PodGroup's resources against the cluster's."""

from __future__ import annotations

import numpy as np

from harness.filters import groups_that_fit
from harness.scheduler.plugin import Plugin
from harness.status import BOOTING


class WaitsForCapacity(Plugin):
    """A PreFilter plugin (loop/scheduler/pre_filter=waits_for_capacity)."""

    #: the scheduler sees in-flight capacity (a switch of the loop's description)
    waits_for_capacity = True

    def pre_filter(self, j: int, usable: np.ndarray, group: int) -> int | None:
        """The group (rack or block, -1 = anywhere) job j's pods may use in this cycle, given
        the one its placed members restrict it to; None: it waits (unschedulable now)."""
        sim = self.sim
        if sim.w.job_min_member[j] <= 1 or sim.job_ready_bound[j] != 0:
            return group
        return self._fits_with_inflight(j, usable | (sim.state.status == BOOTING))

    def _fits_with_inflight(self, j: int, usable: np.ndarray) -> int | None:
        """The group of ready and booting nodes on which the whole gang would fit, or None."""
        s = self.scheduler
        pods = self.sim.unbound_pods(j)
        groups = s.groups_of(j)
        if groups is None:
            return -1 if s.try_place(pods, usable) is not None else None
        for g in groups_that_fit(self.sim.state, self.sim.w, pods, usable, groups):
            if s.try_place(pods, usable & (groups == g)) is not None:
                return int(g)
        return None
