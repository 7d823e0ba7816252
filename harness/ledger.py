"""Running totals per node and in all, kept up to date by a few named transitions.

The simulation reports what happens to a pod and a node (`placed`, `released`, `started`,
`buffering`, `node_added`, `node_ready`, `node_removed`); the ledger keeps the sums metrics
integrate and loops read without a scan: GPU milli held by unstarted jobs, gang members and
GPUs per node, the placeholders' held room and the nodes' fragmentation. Fragmentation is a
running float sum (`frag_ready`), so the order of the transitions is part of the result.
Every transition also notes its node (`take_changed`): the nodes whose GPU accounts may have
moved since the metrics last looked, so they recount those nodes only (harness/metrics.py).
"""

from __future__ import annotations

from itertools import chain

import numpy as np
from numba import njit

from harness.fragmentation import TargetWorkload, node_fragmentation
from harness.state import ClusterState
from harness.status import READY


class Ledger:
    def __init__(self, state: ClusterState, in_gang: np.ndarray, gpus: np.ndarray, target: TargetWorkload):
        self.state, self.in_gang, self.gpus, self.target = state, in_gang, gpus, target
        n = state.n_slots
        self.held = np.zeros(n, np.int64)  # GPU milli held by unstarted jobs
        self.held_ready = 0  # ... on ready nodes
        self.gang_pods_on = np.zeros(n, np.int32)  # bound or running gang members
        self.gpus_on = np.zeros(n, np.int64)  # GPUs (a share counts 1) of bound or running pods
        #: GPU milli the running overprovisioning placeholders hold (pause pods, harness/services/
        #: buffers.py), per node and in all (running: on a ready node)
        self.buffer_on = np.zeros(n, np.int64)
        self.buffer_ready = 0
        self.frag = np.zeros(n)  # F_n of ready nodes (0 elsewhere)
        self.frag_ready = 0.0
        self._frag_memo: dict[tuple, float] = {}
        self.changed: list[int] = []  # nodes of the transitions since `take_changed` (repeats allowed)

    def take_changed(self) -> list[int]:
        """The nodes a transition touched since the last call (a node may repeat)."""
        changed, self.changed = self.changed, []
        return changed

    # ---- pods ----------------------------------------------------------------------------
    def placed(self, n: int, p: int, held: int) -> None:
        """Pod p was bound to node n; `held`: the GPU milli it holds for a job not started yet."""
        self.changed.append(n)
        self.gang_pods_on[n] += self.in_gang[p]
        self.gpus_on[n] += self.gpus[p]
        if held:
            self.hold(n, held)
        self.refrag(n)

    def released(self, n: int, p: int, held: int, buffer: int) -> None:
        """Pod p left node n (its resources already back on the node): `held` as in `placed`,
        `buffer` the milli it held as a running placeholder."""
        self.changed.append(n)
        if held:
            self.hold(n, -held)
        if buffer:
            self.buffering(n, -buffer)
        self.gang_pods_on[n] -= self.in_gang[p]
        self.gpus_on[n] -= self.gpus[p]
        self.refrag(n)

    def started(self, n: int, milli: int) -> None:
        """A pod's job started: the milli it held on node n is used from now on."""
        self.changed.append(n)
        self.hold(n, -milli)

    def hold(self, n: int, milli: int) -> None:
        self.held[n] += milli
        if self.state.status[n] == READY:
            self.held_ready += milli

    def buffering(self, n: int, milli: int) -> None:
        """A placeholder on ready node n starts (milli > 0) or stops (< 0) holding room."""
        self.changed.append(n)
        self.buffer_on[n] += milli
        self.buffer_ready += milli

    # ---- nodes ---------------------------------------------------------------------------
    def node_added(self, n: int) -> None:
        self.changed.append(n)
        self.held[n] = 0
        self.refrag(n)

    def node_ready(self, n: int) -> None:
        self.changed.append(n)
        self.held_ready += int(self.held[n])
        self.refrag(n)

    def node_removed(self, n: int) -> None:
        self.changed.append(n)
        self._set_frag(n, 0.0)
        self.held[n] = 0

    # ---- fragmentation -------------------------------------------------------------------
    def _set_frag(self, n: int, value: float) -> None:
        self.frag_ready += value - self.frag[n]
        self.frag[n] = value

    def refrag(self, n: int) -> None:
        """Measure node n's F_n again (0 unless ready)."""
        self._set_frag(n, self.measure(n))

    def round_trip(self, nodes: list[int], frags: list[float]) -> None:
        """What `placed` then `released` leave when pods of an unstarted job are bound on these
        ready nodes in turn and released again in turn at one instant (a futile gang attempt:
        `nodes` the binds' nodes, in order; the releases follow in the same order): the counts and
        held milli come back as they were, the nodes are noted, and the fragmentation goes through
        every transition's F_n (`frags`, measured on the same contents: `measure`), in order, as
        `frag_ready` is a running float sum."""
        self.changed += nodes
        self.changed += nodes
        frag = self.frag
        for n, f in zip(nodes + nodes, frags, strict=True):
            self.frag_ready += f - frag[n]
            frag[n] = f

    def round_trips(self, trips: list[tuple[list[int], list[float]]]) -> None:
        """`round_trip` of each (nodes, F_n) in turn, in one compiled pass (`set_in_turn`): the
        running sum goes through every transition in the same order, so it ends on the same bits."""
        nodes = list(chain.from_iterable(nodes + nodes for nodes, _ in trips))
        self.changed += nodes
        frags = np.fromiter(chain.from_iterable(frags for _, frags in trips), np.float64, len(nodes))
        # a numpy float, as the transitions' own arithmetic leaves it
        self.frag_ready = np.float64(set_in_turn(self.frag, float(self.frag_ready), np.array(nodes, np.int64), frags))

    def measure(self, n: int) -> float:
        """Node n's F_n as its contents are now (0 unless ready)."""
        st = self.state
        if st.status[n] != READY:
            return 0.0
        # F_n depends only on the node's type, free CPU and multiset of free GPU milli
        key = (int(st.slot_type[n]), int(st.cpu_free[n]), *sorted(st.gpu_free[n, :st.gpu_cap[n]].tolist()))
        f = self._frag_memo.get(key)
        if f is None:
            if len(self._frag_memo) >= 1 << 18:
                self._frag_memo.clear()  # bounded memory on long replays
            f = self._frag_memo[key] = node_fragmentation(
                st.gpu_free[n:n + 1], st.gpu_cap[n:n + 1], st.cpu_free[n:n + 1], st.model_bit[n:n + 1], self.target)[0]
        return f


@njit(cache=True)
def set_in_turn(frag: np.ndarray, total: float, nodes: np.ndarray, values: np.ndarray) -> float:
    """frag[nodes[i]] = values[i] for each i in turn, `total` (the running sum of `frag`) moved
    by each change as it comes: the sum's float rounding is the Python loop's, step by step."""
    for i in range(len(nodes)):
        total += values[i] - frag[nodes[i]]
        frag[nodes[i]] = values[i]
    return total
