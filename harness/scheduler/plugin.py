"""What a scheduler plugin is: an object registered at every extension point whose hook it
defines, as a Go plugin of kube-scheduler is at every point whose interface it implements
(a profile's `multiPoint`). A profile names its plugins (conf/loop/scheduler/default.yaml);
the framework (framework.py) lists them per point, in the profile's order, once, when it is
built. A point no plugin implements costs a cycle nothing.

  PreEnqueue  pre_enqueue(j) -> bool   may job j enter the queue at all (False: not until more
              of its pods arrive; a job kept out is seen by no cycle and no autoscaler)
  PreFilter   pre_filter(j, usable, group) -> group | None   may job j's pods be tried (None:
              not in this cycle), and in which rack or block (-1: anywhere)
  Filter      filter(state, w, pod, usable, at=None) -> mask  the nodes that can take the pod
              (every Filter plugin must pass); reason(...) says why a pod fits nowhere (the
              first Filter plugin that defines it)
  PostFilter  post_filter(p, usable) -> node | -1    a pod that fits nowhere: a node made free
              for it (e.g. by preemption; `preempts` says it may evict); post_filter_gang(j)
              -> bool, after a job's attempt in which a member fit nowhere: whether it released
              the members waiting at Permit; rejects_all(j): a member that fits nowhere rejects
              the members reserved with it, so the job is placed on a trial, whole or not at all
  Score       score(state, w, pod, nodes, rng) -> scores, summed by `weight` over the plugins
  Reserve     on_bind(state, w, pod, node) records a placement, checkpoint() / restore(saved)
              forget a trial's (Unreserve); pick_devices(...) the pod's devices (the first
              Reserve plugin that defines it; a Score plugin of harness.scores is one)
  Permit      permit(j) after the members that fit were bound; evicted(j): they were
              preempted, their wait is over
  PodGroup    schedule_group(j) -> bool places a gang in one pod-group cycle, whole or not at
              all (kube-scheduler's GangScheduling: PreEnqueue, PlacementFeasible and the
              placements of a topology constraint); is_gang(j) says which jobs it takes,
              backing_off(jobs) which of them wait in the backoff queue (tried after the others)
  Bind        bind(p, n, devices, on_state) puts the pod on the node (the first plugin)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from harness.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from harness.view import SimulationView


class CycleState:
    """What one cycle learns, forgotten when it ends (upstream's CycleState): the failure keys
    it found (a key -> fewest pods of it that found no place; a plugin may add keys of its
    own), the pending reasons (and, traced, the FitError words) by reason key, and whether it preempted."""

    __slots__ = ("failed", "reasons", "whys", "preempted")

    def __init__(self) -> None:
        self.failed: dict[tuple, int] = {}
        self.reasons: dict[int, int] = {}
        self.whys: dict[int, str] = {}  # the FitError words by reason key (decision trace only)
        self.preempted = False


class Profile(Protocol):
    """What a plugin is given of the profile it is part of (harness/scheduler/framework.py's
    `Scheduler`, which is built of plugins and so is named here by what they use)."""

    @property
    def sim(self) -> SimulationView: ...
    #: what the current cycle learned (a new one per cycle)
    cycle_state: CycleState
    #: the profile's Filter plugins as one mask: filter(state, w, pod, usable, at=None)
    filter: Callable[..., np.ndarray]
    #: names the usable nodes (`usable`): moves when the ready nodes or taints change
    usable_key: tuple[int, int] | None
    #: per job: its pods are all of one shape (`job_shape`), and its first pod
    job_uniform: np.ndarray
    job_first_pod: np.ndarray

    def evict(self, pods: np.ndarray) -> None:
        """Preempt these pods (gangs whole), through the simulation."""
        ...
    def back_off(self, j: int) -> None:
        """Job j is not retried until capacity changes again (its gang was released)."""
        ...
    def ready_order(self) -> np.ndarray:
        """The ready nodes in the seeded node order (the order filters walk them in)."""
        ...
    def nodes_to_find(self) -> int:
        """How many feasible nodes a walk looks for now (a walk over fewer leaves nextStartNodeIndex)."""
        ...
    def points(self) -> dict[str, tuple]:
        """Each extension point's plugins, in the profile's order."""
        ...
    def job_shape(self, j: int) -> int:
        """The shape of all of job j's pods now, -1 if they differ."""
        ...
    def groups_of(self, j: int) -> np.ndarray | None:
        """The rack or block of each slot, for a job whose gang must keep to one (None: anywhere)."""
        ...
    def try_place(self, pods: np.ndarray, usable: np.ndarray, keep: bool = False,
                  need: int | None = None) -> list | None:
        """Place pods one by one as a trial on the real state; None if fewer than `need` (all)
        found a node."""
        ...
    def place_each(self, pods: np.ndarray, usable: np.ndarray, need: int, reserve: bool = True) -> list | None:
        """Place pods one by one on a trial the caller opened; None if fewer than `need` found a node."""
        ...
    def usable(self, j: int) -> np.ndarray:
        """Ready nodes job j may use (not tainted)."""
        ...
    def bind(self, p: int, n: int, gpu_idx: np.ndarray, on_state: bool = False) -> None:
        """The Bind point: pod p onto node n on these devices."""
        ...
    def reserve(self, state, w, p: int, n: int) -> None:
        """The Reserve point: the placement of pod p on node n is recorded."""
        ...
    #: a PostFilter may evict pods (DefaultPreemption): a gang then preempts as one unit
    preempts: bool
    #: the PreFilter point: pre_filter(j, usable, group) -> group | None of each plugin, in order
    pre_filters: tuple
    def choose(self, p: int, mask: np.ndarray) -> int:
        """Score: the best node for pod p among the feasible ones (`mask`), or -1."""
        ...
    def pick_devices(self, state, w, p: int, n: int) -> np.ndarray:
        """The devices pod p takes on node n (the Reserve point's device choice)."""
        ...
    def requeue(self, j: int) -> None:
        """Job j is tried again in the next cycle, whatever changed."""
        ...

#: each extension point after QueueSort and the hooks that register a plugin there
HOOKS = {"PreEnqueue": ("pre_enqueue",), "PreFilter": ("pre_filter",), "Filter": ("filter",),
         "PostFilter": ("post_filter", "post_filter_gang", "rejects_all"), "Score": ("score",),
         "Reserve": ("on_bind",), "Permit": ("permit",), "PodGroup": ("schedule_group",), "Bind": ("bind",)}
#: the hooks a profile cannot do without, and the point they belong to
NEEDED = {"filter": "Filter", "reason": "Filter", "score": "Score", "pick_devices": "Reserve", "bind": "Bind"}


class Plugin:
    """A plugin of the framework (not a Score plugin: those are the policies of harness.scores).
    `attach` gives it the scheduler and the simulation before the replay starts."""

    #: a Filter plugin: its verdict on a node is a function of that node's state and the pod
    #: alone; a Reserve plugin: it records nothing. Only then may the scheduler take a gang
    #: attempt that ends in a release as its net effect (`Scheduler.futile_gang`).
    stateless = False

    def attach(self, scheduler: Profile) -> None:
        self.scheduler = scheduler
        self.sim = scheduler.sim


def implements(plugin: object, hook: str) -> bool:
    """Whether the plugin defines this extension point's hook."""
    return callable(getattr(plugin, hook, None))


def by_point(plugins: Iterable) -> dict[str, tuple]:
    """Each extension point's plugins, in the given order; refused if a needed hook is missing."""
    plugins = tuple(plugins)
    at = {point: tuple(p for p in plugins if any(implements(p, h) for h in hooks)) for point, hooks in HOOKS.items()}
    for hook, point in NEEDED.items():
        if not any(implements(p, hook) for p in at[point]):
            raise ConfigError("loop.scheduler", f"no {point} plugin defines `{hook}` (harness/scheduler/plugin.py)")
    return at
