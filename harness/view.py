"""What a loop is to the simulation (`Loop`: what the simulation calls) and what a loop may ask
of it (`SimulationView`: the narrow, typed surface of harness/sim.py that loops, autoscalers and
scheduler plugins read and act through).

Nothing here tells a provider's stock, a pod's run time, a future arrival or when a booting node
will be ready (tests/test_audit.py holds it so). It sits in the simulation's layer, so that
everything built on the simulation (the scheduler, the autoscalers, the loops) names it without
importing the layers above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from harness.cloud import Placement
    from harness.cluster import Cluster
    from harness.description import Description
    from harness.job_queue import JobQueue
    from harness.metrics import Accounting
    from harness.scores import ScorePlugin
    from harness.state import ClusterState
    from harness.workload import Workload


class Provider(Protocol):
    """What a loop may read of the cloud provider: its free slots and the room left under the
    limits the user configured (what a plan may count on), never its stock. Capacity is learned
    by asking (`SimulationView.provision`): an `error` pool grants fewer nodes at once, a
    `silent` one accepts them all and some never come up (harness/cloud.py). Where new nodes go
    is the provider's to decide: a loop asks for a placement, never for slots."""

    def free_slots(self, p: int) -> np.ndarray: ...
    def free_slots_in_emptiest_rack(self, p: int) -> np.ndarray: ...
    def free_committed(self, p: int) -> int: ...
    def room(self, p: int) -> int:
        """Nodes pool p may still add under its max_size (nodes present, phantoms too, count)."""
        ...


class Gate(Protocol):
    """What an admission layer in front of the scheduler lets through (harness/admission.py)."""

    def admit(self, j: int, nodes: np.ndarray | None = None) -> None:
        """A gated job's pending pods reach the scheduler's queue, kept to the node slots
        of the mask `nodes` from now on (None: any)."""
        ...
    def reserve(self, j: int) -> None:
        """Quota is reserved for a gated job whose admission checks must pass before `admit`
        (the wait between the two is reported per queue)."""
        ...


class Replicas(Protocol):
    """The services' replicas per service, created and deleted by a replica autoscaler."""

    @property
    def replicas(self) -> np.ndarray:
        """Each service's created replicas (its Deployment's spec.replicas)."""
        ...
    @property
    def recommended(self) -> np.ndarray:
        """Each service's count its replica autoscaler last recommended, before the rate
        limits of its scaling policies (the replica loop writes it at each sync): what the
        replicas reach within a few periods unless demand falls. A planner integrated with
        the replica autoscaler may read it; today's node autoscalers see only pods."""
        ...
    def demand_now(self) -> np.ndarray:
        """Each service's demand now (units per second), never a later one."""
        ...
    def create(self, s: int, k: int) -> None:
        """k more replicas of service s: pods that arrive now."""
        ...
    def delete(self, s: int, k: int) -> None:
        """k replicas of service s go, in the ReplicaSet's deletion order."""
        ...


class SimulationView(Protocol):
    """What a loop may ask of the simulation (harness.sim.Simulation): the cluster, the
    workload (without run times), pod and job status, the queue, the provider's `Provider`
    face, and the few actions that change them. Loops read these and act only through the
    methods. Nothing here tells a provider's stock, a pod's run time, a future arrival or when
    a booting node will be ready (tests/test_audit.py holds it so: it replays every loop with
    the rows of `w` of pods not arrived sealed, `harness.sealed.Unarrived`)."""

    @property
    def w(self) -> Workload: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def state(self) -> ClusterState: ...
    @property
    def cloud(self) -> Provider: ...
    @property
    def acct(self) -> Accounting: ...
    @property
    def now(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def rng(self) -> np.random.Generator: ...
    @property
    def node_rank(self) -> np.ndarray: ...
    @property
    def queue(self) -> JobQueue:
        """The jobs waiting for the scheduler (harness/job_queue.py)."""
        ...
    @property
    def last_scale_up(self) -> float: ...
    # per pod
    @property
    def pod_status(self) -> np.ndarray: ...
    @property
    def pod_node(self) -> np.ndarray: ...
    @property
    def pod_gpus(self) -> list[np.ndarray | None]: ...
    @property
    def pod_start(self) -> np.ndarray:
        """When each pod started its current run (nan: not started), as its status says."""
        ...
    # per job
    @property
    def job_anchor(self) -> np.ndarray: ...
    @property
    def job_placed(self) -> np.ndarray: ...
    @property
    def job_ready_bound(self) -> np.ndarray: ...
    @property
    def job_started(self) -> np.ndarray: ...
    @property
    def job_arrived(self) -> np.ndarray:
        """Pods of each job that exist (arrived, whatever became of them since)."""
        ...
    @property
    def job_admissions(self) -> np.ndarray:
        """Times an admission layer let each job through (`admit`; 0 without one)."""
        ...
    @property
    def job_done(self) -> np.ndarray:
        """Pods of each job that ran to completion (a finished job: all of them)."""
        ...
    # per node slot
    @property
    def held(self) -> np.ndarray: ...
    @property
    def gang_pods_on(self) -> np.ndarray: ...
    @property
    def gpus_on(self) -> np.ndarray: ...
    @property
    def node_instance(self) -> np.ndarray: ...
    @property
    def node_pods(self) -> list[set[int]]: ...
    @property
    def node_requested_at(self) -> np.ndarray:
        """When the node in each slot was asked for (nan: no node): a loop's own timeouts."""
        ...
    @property
    def node_ready_at(self) -> np.ndarray:
        """When the node in each slot became ready (nan: not ready, or no node), as its Ready
        condition's lastTransitionTime says: Cluster Autoscaler takes a node group's template
        from a node ready for a minute."""
        ...

    def at(self, time: float, fn: Callable[..., Any], *args: Any) -> int:
        """Call fn(*args) at `time`; returns the call's id, for `cancel`."""
        ...
    def cancel(self, call: int) -> None:
        """Take back a call scheduled with `at` that has not run (a timer stopped): it never runs."""
        ...
    def unbound_pods(self, j: int) -> np.ndarray: ...
    def pods_on(self, n: int) -> list[int]: ...
    def bind(self, p: int, n: int, gpu_idx: np.ndarray, on_state: bool = False) -> None: ...
    def unbind(self, p: int, deleted: bool = False) -> None:
        """Back to pending; `deleted`: the pod was deleted (drained), its job backs off."""
        ...
    def unbind_many(self, pods: np.ndarray | list[int], deleted: bool = False) -> None: ...
    @property
    def binds_unheard(self) -> bool:
        """No handler listens to binds, releases or the decision trace."""
        ...
    def bind_then_release(self, plan: list[tuple[int, int, np.ndarray]], frags: list[float] | None = None
                          ) -> list[float]:
        """Pods of one job bound in turn (pod, node, devices) and released again at once: their
        net effect, every node and ledger transition in order (`Simulation.bind_then_release`);
        returns the fragmentation measured after each, which a call on the same contents may
        pass back (`frags`) to leave the nodes' rows alone."""
        ...
    def fragmentation(self, n: int) -> float:
        """Node n's fragmentation F_n as its contents are now, on a trial too."""
        ...
    def first_pending(self, jobs: np.ndarray, heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """How many pods of each job are pending, and the first heads[k] pending pods of jobs[k],
        job after job."""
        ...
    def round_trips(self, jobs: np.ndarray, trips: list[tuple[list[int], list[float]]], pods: np.ndarray
                    ) -> np.ndarray:
        """`bind_then_release` of each job in turn on the nodes and with the F_n of a trip measured
        before on the same contents (`pods`: the pods bound, job after job, as `first_pending`
        gives them); returns the capacity version after each job's releases."""
        ...
    def gate_arrivals(self, gate: Callable[[int], None], withdraw: Callable[[int], None]) -> Gate:
        """Arriving jobs go to `gate` (an admission layer), not the scheduler's queue; a
        replica deleted after it arrived goes to `withdraw`. The layer admits through the
        `Gate` returned."""
        ...
    def allow_preemption(self) -> None:
        """A loop that may preempt says so on attach: its runs report the preemption metrics."""
        ...
    def evict(self, pods: np.ndarray, *, suspended: bool = False) -> None:
        """Preempt bound or running pods (gangs whole): they restart from scratch; their jobs
        back off unless `suspended` (Kueue's eviction)."""
        ...
    @property
    def replicasets(self) -> Replicas | None:
        """The services' replicas (harness/services/engine.py; None: a trace without services)."""
        ...
    def provision(self, p: int, count: int, atomic: bool, placement: Placement | None = None,
                  pods: np.ndarray | None = None, template: bool = True) -> np.ndarray:
        """Ask the provider for `count` nodes of pool p (all or nothing if `atomic` and the pool
        honours it), anywhere or in one rack (`placement`): the provider picks the slots. Returns
        the slots it accepted (fewer when short), the only way a loop learns what it got. `pods`:
        what they are for (None: no pod in particular, e.g. a buffer's room): pods that exist, as
        a real controller's are (the audit holds it so, as it holds that every pod bound has arrived).
        `template`: the loop plans on the nodes by their type's node-group template until they
        come up (harness/dra/layer.py; False: by what it saw such nodes publish)."""
        ...
    @property
    def noting(self) -> bool:
        """The decision trace is on: a loop then says why it acts (`note`)."""
        ...
    def note(self, kind: int, detail: str = "", node: int = -1, pod: int = -1) -> None:
        """A loop's decision (a harness.status.Event) for the decision trace, of a node or a pod."""
        ...
    def plan_as_published(self, n: int) -> None:
        """Booting node n, bought on its node-group template, is planned from now on with the
        devices its type's nodes publish (the loop saw one: harness/autoscalers/node_templates.py):
        the pods planned on it that these cannot hold go back to the queue."""
        ...
    def remove_node(self, n: int) -> None:
        """Remove node n (empty, or booting: pods planned there go back to the queue)."""
        ...


class Loop(Protocol):
    """A control loop: places pending pods and, if it autoscales, adds and removes nodes."""

    #: the loop's name in run folders and tables (conf/loop/<name>.yaml sets it)
    name: str

    @property
    def policy(self) -> ScorePlugin:
        """The score plugin it places pods with (the runs' `policy` column)."""
        ...

    def describe(self) -> Description:
        """Its family and switches, for reports; needs no `attach`."""
        ...

    def attach(self, sim: SimulationView) -> None:
        """Called once before the replay starts: size per-pod and per-node arrays."""
        ...

    def next_wakeup(self, now: float) -> float:
        """When the loop next has something to do with nothing else happening (inf: never)."""
        ...

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """Its wake-ups from `start` on, before `before`, that provably change nothing: they pass
        in bulk (harness/quiet.py); empty when it cannot tell."""
        ...

    def step(self, sim: SimulationView, now: float) -> None:
        """Act at `now`, after the instant's events and arrivals."""
        ...


@runtime_checkable
class WithAutoscaler(Protocol):
    """A loop with an autoscaler of its own beside the scheduler (the separate loops): what a
    component served by that autoscaler (a CapacityBuffer, Kueue's ProvisioningRequest check)
    asks a loop for."""

    @property
    def autoscaler(self) -> object: ...
