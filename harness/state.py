"""Cluster state as struct-of-arrays: one row per node slot, one column per GPU.

Filters read only per-node summary arrays (free whole GPUs, largest free share, whole GPUs
free in the best NVLink and NUMA domain, free CPU and memory), which `bind` and `release`
keep up to date for the one node they touch. The node x GPU matrix is read only for the node
being bound, so a scheduling decision costs O(nodes) vector work, not O(nodes x GPUs).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from itertools import chain

import numpy as np
from numba import njit

from harness.cluster import Cluster
from harness.dra.allocator import MAX_RESULTS, NO_MARKS, commit_at, first_fit_kernel, take_alike_kernel
from harness.dra.layer import ClaimedGpus
from harness.node_devices import NO_TABLE, OVER_ALLOCATED, pick, summarize, take
from harness.status import ABSENT, BOOTING, READY

WHOLE = 1000  # milli of one GPU


class ClusterState:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        n, g = cluster.n_slots, cluster.max_gpus
        types = cluster.node_types
        t_index = {t.name: i for i, t in enumerate(types)}
        self.slot_pool = np.zeros(n, np.int32)
        self.slot_type = np.zeros(n, np.int32)
        self.slot_rack = np.zeros(n, np.int32)
        self.slot_block = np.zeros(n, np.int32)
        self.slot_committed = np.zeros(n, bool)
        self.pool_offset = np.zeros(len(cluster.pools) + 1, np.int64)
        blocks = sorted({p.block for p in cluster.pools})
        rack_base = 0
        for p, pool in enumerate(cluster.pools):
            lo = int(self.pool_offset[p])
            hi = lo + pool.max_size
            self.pool_offset[p + 1] = hi
            slots = np.arange(pool.max_size)
            self.slot_pool[lo:hi] = p
            self.slot_type[lo:hi] = t_index[pool.node_type]
            self.slot_rack[lo:hi] = rack_base + slots // pool.nodes_per_rack
            self.slot_block[lo:hi] = blocks.index(pool.block)
            self.slot_committed[lo:hi] = slots < pool.committed
            rack_base += -(-pool.max_size // pool.nodes_per_rack)
        # static per-type shape
        self.type_cpu = np.array([t.cpu_milli for t in types], np.int64)
        self.type_mem = np.array([t.memory_mib for t in types], np.int64)
        self.type_gpus = np.array([t.gpus for t in types], np.int32)
        self.type_model_bit = np.array([cluster.model_bit(t.gpu_model) for t in types], np.int64)
        self.type_nic = np.array([t.nic_per_gpu for t in types], bool)
        self.type_profiles = np.array(
            [sum(1 << cluster.profiles.index(p) for p in t.partition_profiles) for t in types], np.int64)
        self.gpu_nvl = np.full((len(types), g), -1, np.int32)
        self.gpu_numa = np.full((len(types), g), -1, np.int32)
        for i, t in enumerate(types):
            self.gpu_nvl[i, :t.gpus] = t.gpu_domains(t.nvlink_domains)
            self.gpu_numa[i, :t.gpus] = t.gpu_domains(t.numa_domains)
        # a pod claiming both NVLink and NUMA locality needs GPUs in their intersection
        self.gpu_both = np.where(self.gpu_nvl >= 0, self.gpu_nvl * g + self.gpu_numa, -1)
        self.domain_tables = [_domain_tables(t.gpus, self.gpu_nvl[i], self.gpu_numa[i], self.gpu_both[i])
                              for i, t in enumerate(types)]
        # the same tables stacked, for many nodes at once: row type_table_start[t] + pattern
        sizes = [len(tables) if tables is not None else 0 for tables in self.domain_tables]
        self.type_table_start = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
        self.type_has_table = np.array([tables is not None for tables in self.domain_tables], bool)
        self.stacked_tables = np.array([row for tables in self.domain_tables if tables is not None for row in tables],
                                       np.int32).reshape(-1, 4)
        self.slot_table = np.where(self.type_has_table, self.type_table_start, -1)[self.slot_type]  # -1: no table
        # per-slot static capacity (broadcast of the type)
        self.cpu_cap = self.type_cpu[self.slot_type]
        self.mem_cap = self.type_mem[self.slot_type]
        self.gpu_cap = self.type_gpus[self.slot_type]
        self.gpu_milli_cap = self.gpu_cap * float(WHOLE)
        self.model_bit = self.type_model_bit[self.slot_type]
        self.nic_ok = self.type_nic[self.slot_type]
        self.profile_bits = self.type_profiles[self.slot_type]
        # dynamic state
        self.status = np.zeros(n, np.int8)
        self.cpu_free = np.zeros(n, np.int64)
        self.mem_free = np.zeros(n, np.int64)
        self.gpu_free = np.zeros((n, g), np.int32)
        self.pods_on = np.zeros(n, np.int32)
        # summaries kept incrementally
        self.free_whole = np.zeros(n, np.int32)
        self.max_share = np.zeros(n, np.int32)
        self.nvl_whole = np.zeros(n, np.int32)
        self.numa_whole = np.zeros(n, np.int32)
        self.both_whole = np.zeros(n, np.int32)
        self.gpu_used = np.zeros(n, np.int64)  # allocated GPU milli
        # running totals (GPU milli) that metrics read in O(1) instead of summing every slot
        self.ready_milli = 0
        self.booting_milli = 0
        self.alloc_ready_milli = 0  # allocated GPU milli on ready nodes
        self.committed_empty_milli = int((self.gpu_cap[self.slot_committed].astype(np.int64) * WHOLE).sum())
        self.paid_per_pool = np.zeros(len(cluster.pools), np.int64)  # nodes outside committed slots
        self.version = 0  # bumps whenever capacity grows (node ready, pod released)
        self.grown: list[int] = []  # nodes whose capacity grew since the scheduler last looked
        self.layout_version = 0  # bumps whenever a node is added, becomes ready or is removed
        self.mutations = 0  # bumps on every change of any node (cache key for what-if scans)
        self.changed_at = np.zeros(n, np.int64)  # value of `mutations` at each node's last change
        self._static_fit: dict[tuple, np.ndarray] = {}
        self._devices: dict[int, np.ndarray] = {}  # `pick_devices`: a mask of GPUs -> their numbers
        self._undo: list | None = None  # while a trial is open: (node(s), their rows before)
        #: the placements pods may be kept to (`placement`): row i holds placement i's slots
        #: and `pool_allowed` its pools (those with a slot in it); placement 0 is every slot
        self.allowed = np.ones((1, n), bool)
        self.pool_allowed = np.ones((1, len(cluster.pools)), bool)
        #: a DRA cluster's devices (harness/dra/layer.py) and every node's allocation state
        self.dra = cluster.devices
        #: per slot and device, the device taints in force (a bitmask over the cluster's taint
        #: catalogue, harness/dra/taints.py); None in a cluster without taints during the run
        self.device_taints: np.ndarray | None = None
        if self.dra is not None:
            self.dra_taken, self.dra_cap, self.dra_counters = self.dra.arrays(n)
            self.dra_stamp = np.zeros(n, np.int64)  # names each node's allocation state (`DeviceLayer.restamp`)
            #: per slot, the device type its allocation state follows (`DeviceLayer.devices`): what
            #: its node publishes, or, for a node a loop bought and has not seen up yet (and in a
            #: what-if, `retype`), its type's node-group template (`DeviceLayer.template_of`)
            self.dra_type = self.slot_type.copy()
            self.dra.restamp(self.dra_stamp, np.arange(n))
            self._DYNAMIC = ClusterState._DYNAMIC + self.DEVICE_ARRAYS
            if self.dra.taints:
                self.device_taints = np.zeros((n, self.dra.width), np.int64)
                self._DYNAMIC += ("device_taints",)

    @property
    def device_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A DRA cluster's per-slot allocation state: devices taken, capacity left, counters left."""
        return self.dra_taken, self.dra_cap, self.dra_counters

    # ---- what happened outside the state: the cache keys move only through these ---------
    def capacity_opened(self, nodes: Iterable[int]) -> None:
        """Capacity that existed became usable by more pods (e.g. a booking ran out): pending
        pods may fit now, as if it had grown."""
        self.version += 1
        self.grown.extend(int(n) for n in nodes)

    def take_grown(self) -> list[int]:
        """The nodes whose capacity grew since the last call (the scheduler's QueueingHints)."""
        grown, self.grown = self.grown, []
        return grown

    def taint_devices(self, n: int, marks: np.ndarray) -> None:
        """The device taints in force on slot n's devices are now `marks`: a pod that tolerates
        fewer finds less room (a change, as a bind is), and where a taint went, more (as a
        release)."""
        assert self.device_taints is not None and self.dra is not None and self._undo is None, \
            "taints change between trials"
        went = (self.device_taints[n] & ~marks).any()
        if (self.device_taints[n] != marks).any():  # a stamp names allocation and taints: a new one
            self.dra.restamp(self.dra_stamp, n)
        self.device_taints[n] = marks
        self.mutations += 1
        self.changed_at[n] = self.mutations
        if went:
            self.capacity_opened([n])

    # ---- trials: changes that undo themselves ------------------------------------------
    def fork(self) -> None:
        """Open a trial: every change from now on can be undone by `revert` (or kept by `keep`).
        The undo record holds the rows of the nodes a change touches (O(nodes touched))."""
        assert self._undo is None, "trials do not nest"
        self._undo = [self._totals()]

    def revert(self) -> None:
        """Close the trial, undone: every array, total and cache key is as at `fork`, so no
        cache keyed on the state sees a change."""
        assert self._undo is not None, "revert closes an open trial"
        self.rollback((1, self._undo[0]))
        self._undo = None

    def savepoint(self) -> tuple[int, tuple]:
        """Where `rollback` brings an open trial back to: a step of the trial that must be all
        or nothing (a drain check moves a node's pods all or none) undone, the trial still open."""
        assert self._undo is not None, "a savepoint is taken within a trial"
        return len(self._undo), self._totals()

    def rollback(self, point: tuple[int, tuple]) -> None:
        """Undo the open trial's changes since the `savepoint`: every array, total and cache key
        as then."""
        size, totals = point
        undo = self._undo
        assert undo is not None and len(undo) >= size, "a rollback within the trial of its savepoint"
        for n, rows in reversed(undo[size:]):
            for name, row in zip(self._DYNAMIC, rows, strict=True):
                getattr(self, name)[n] = row
        del undo[size:]
        (self.version, self.layout_version, self.mutations, grown, self.ready_milli, self.booting_milli,
         self.alloc_ready_milli, self.committed_empty_milli, paid) = totals
        self.paid_per_pool = paid.copy()
        del self.grown[grown:]

    def _totals(self) -> tuple:
        """The running totals and cache keys a trial puts back (with the rows it saved)."""
        return (self.version, self.layout_version, self.mutations, len(self.grown), self.ready_milli,
                self.booting_milli, self.alloc_ready_milli, self.committed_empty_milli, self.paid_per_pool.copy())

    def keep(self) -> None:
        """Close the trial, kept: its changes stand and count as changes."""
        self._undo = None

    @property
    def in_trial(self) -> bool:
        """A trial is open (`fork`): what is read now may be undone."""
        return self._undo is not None

    def _save(self, n) -> None:
        """Record node(s) n's rows before a change, while a trial is open. One node's entry of a
        1-D column is an immutable scalar: only arrays (a GPU row is a view) need a copy."""
        assert self._undo is not None
        rows = [getattr(self, name)[n] for name in self._DYNAMIC]
        self._undo.append((n, [row.copy() if isinstance(row, np.ndarray) else row for row in rows]))

    # ---- node lifecycle ----------------------------------------------------------------
    @property
    def n_slots(self) -> int:
        return len(self.status)

    def pool_slots(self, p: int) -> slice:
        return slice(int(self.pool_offset[p]), int(self.pool_offset[p + 1]))

    def add_node(self, n: int, ready: bool, devices: int | None = None) -> None:
        """A node is requested in slot n: booting, or ready at once (initial nodes). `devices`:
        the device type it is planned with until it comes up (`publish`; None: the slot's
        `dra_type`, its type's own unless a what-if `retype`d it)."""
        if self._undo is not None:
            self._save(n)
        assert self.status[n] == ABSENT
        self.status[n] = READY if ready else BOOTING
        self.cpu_free[n] = self.cpu_cap[n]
        self.mem_free[n] = self.mem_cap[n]
        self.gpu_free[n, :] = 0
        self.gpu_free[n, :self.gpu_cap[n]] = WHOLE
        self.gpu_used[n] = 0
        self.pods_on[n] = 0
        if self.dra is not None:
            if devices is not None:
                self.dra_type[n] = devices
            self.dra.reset(*self.device_arrays, self.dra_stamp, n, int(self.dra_type[n]), self.device_taints)
        self._refresh(n)
        self.layout_version += 1
        milli = int(self.gpu_cap[n]) * WHOLE
        if ready:
            self.version += 1
            self.grown.append(n)
            self.ready_milli += milli
        else:
            self.booting_milli += milli
        if self.slot_committed[n]:
            self.committed_empty_milli -= milli
        else:
            self.paid_per_pool[self.slot_pool[n]] += 1

    def make_ready(self, n: int) -> None:
        if self._undo is not None:
            self._save(n)
        assert self.status[n] == BOOTING
        self.status[n] = READY
        self.version += 1
        self.layout_version += 1
        self.grown.append(n)
        self.mutations += 1
        self.changed_at[n] = self.mutations
        milli = int(self.gpu_cap[n]) * WHOLE
        self.booting_milli -= milli
        self.ready_milli += milli
        self.alloc_ready_milli += int(self.gpu_used[n])  # pods planned while it booted

    def remove_node(self, n: int) -> None:
        if self._undo is not None:
            self._save(n)
        assert self.pods_on[n] == 0, "a node is removed only when empty"
        milli = int(self.gpu_cap[n]) * WHOLE
        if self.status[n] == READY:
            self.ready_milli -= milli
        else:
            self.booting_milli -= milli
        if self.slot_committed[n]:
            self.committed_empty_milli += milli
        else:
            self.paid_per_pool[self.slot_pool[n]] -= 1
        self.status[n] = ABSENT
        self.cpu_free[n] = self.mem_free[n] = 0
        self.gpu_free[n, :] = 0
        if self.dra is not None:
            self.dra_type[n] = self.slot_type[n]
            self.dra.reset(*self.device_arrays, self.dra_stamp, n, -1)
        self._refresh(n)
        self.layout_version += 1

    def publish(self, n: int) -> None:
        """Node n, planned on its node-group template (`dra_type`), has its type's own devices,
        fresh, from now on: it came up publishing them, or its loop learned them while it boots.
        The simulation first takes the claims planned on it off, then allocates them anew."""
        assert self.dra is not None and self._undo is None, "a DRA cluster, outside a trial"
        assert not self.dra_taken[n].any(), "no device of the template is held"
        if self.dra_type[n] == self.slot_type[n]:
            return
        self.dra_type[n] = self.slot_type[n]
        self.dra.reset(*self.device_arrays, self.dra_stamp, n, int(self.slot_type[n]), self.device_taints)
        self.mutations += 1
        self.changed_at[n] = self.mutations

    def retype(self, devices: np.ndarray) -> None:
        """A what-if's view of the nodes its loop has not seen: each absent slot with devices[i]
        >= 0 opens a node of device type devices[i] (its pool's node-group template, or what
        the loop saw such nodes publish). Only on a scratch copy."""
        assert self.dra is not None, "a DRA cluster's what-if"
        absent = (self.status == ABSENT) & (devices >= 0)
        self.dra_type[absent] = devices[absent]

    # ---- pods --------------------------------------------------------------------------
    def bind(self, n: int, cpu: int, mem: int, gpu_idx: np.ndarray, milli: int) -> None:
        self._take(n, 1, cpu, mem, gpu_idx, milli)

    def _take(self, n: int, sign: int, cpu: int, mem: int, gpu_idx: np.ndarray, milli: int) -> None:
        """A pod comes onto node n (sign 1) or leaves it (-1): one compiled step (`node_devices.take`)."""
        if self._undo is not None:
            self._save(n)
        self.mutations += 1
        self.changed_at[n] = self.mutations
        if isinstance(gpu_idx, ClaimedGpus):  # a DRA pod: its every device and its GPUs' mirror, one call
            assert self.dra is not None, "devices are claimed only in a DRA cluster"
            t, tc, arrays = int(self.dra_type[n]), gpu_idx.typed, self.device_arrays
            claimed, gpu_idx = gpu_idx, gpu_idx.view(np.ndarray)
            answer = take_claimed(claimed.pairs, sign, n, t, *arrays, tc.capacity, tc.take_cap, tc.consumes, tc.multi,
                                  cpu, mem, gpu_idx, milli, self.cpu_free, self.mem_free, self.gpu_free,
                                  self.gpu_used, self.pods_on, self.gpu_cap, self.slot_table, self.stacked_tables,
                                  self.free_whole, self.max_share, self.nvl_whole, self.numa_whole, self.both_whole)
            self.dra.follow(self.dra_stamp, n, (claimed.change, sign), arrays, self.dra_type, self.device_taints)
        else:
            answer = take(n, sign, cpu, mem, gpu_idx, milli, self.cpu_free, self.mem_free, self.gpu_free,
                          self.gpu_used, self.pods_on, self.gpu_cap, self.slot_table, self.stacked_tables,
                          self.free_whole, self.max_share, self.nvl_whole, self.numa_whole, self.both_whole)
        assert answer != OVER_ALLOCATED, "over-allocated"
        if answer == NO_TABLE:
            self._summarize_untabled(n)
        if len(gpu_idx) and self.status[n] == READY:
            self.alloc_ready_milli += sign * milli * len(gpu_idx)

    def bind_many(self, nodes: np.ndarray, counts: np.ndarray, cpu: int, mem: int, taken: np.ndarray) -> None:
        """Bind counts[i] identical pods on nodes[i] (distinct) at once, for what-if packing of
        a whole pod shape: CPU and memory counts x the pod's, GPU milli `taken` (nodes x GPUs,
        see `filters.devices_taken`). The touched nodes' summaries are recomputed as `_refresh`
        does, node by node in one compiled step (`bind_alike`)."""
        if self._undo is not None:
            self._save(nodes)
        self._bind_rows(np.asarray(nodes, np.int64), counts, cpu, mem, taken)

    def bind_claims_alike(self, nodes: np.ndarray, counts: np.ndarray, cpu: int, mem: int, claims: tuple) -> None:
        """`bind_many` for pods with claims: the allocator takes their devices on the nodes'
        rows in place (`DeviceLayer.take_alike`, which restamps them), and the GPUs among them
        come off the GPU matrix. One compiled step each, nothing written back row by row."""
        assert self.dra is not None, "devices are claimed only in a DRA cluster"
        if self._undo is not None:
            self._save(nodes)
        taken = self.dra.take_alike(self.device_arrays, self.dra_stamp, self.dra_type, claims, nodes, counts,
                                    self.gpu_free.shape[1], self.device_taints)
        self._bind_rows(nodes, counts, cpu, mem, taken)

    def fit_claims_alike(self, usable: np.ndarray, static: np.ndarray, cpu: int, mem: int, claims: tuple, most: int,
                         k: int, slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`filters.first_fit` (k pods with these claims, first fit over the usable nodes that
        pass `static`, at most `most` a node) then `bind_claims_alike` on the nodes it picks, in
        one compiled call: a what-if's every packing step, so the Python between the two and
        two of three dispatches go. The walk visits only the usable slots, in the order of
        `slots` where the caller keeps them (else found here, ascending). Outside a trial only
        (nothing saved for an undo). Returns the nodes and how many each took."""
        assert self.dra is not None and self._undo is None, "a DRA cluster, outside a trial"
        layer = self.dra
        tc, fits, claim_set, cache = layer.alike(claims, self.gpu_free.shape[1])
        marks = NO_MARKS if self.device_taints is None else self.device_taints
        nodes, got, layer.next_stamp, on_ready, ok = fit_bind_claims(
            np.flatnonzero(usable) if slots is None else slots, usable, static, cpu, mem, most, k, claim_set,
            layer.next_stamp, self.dra_type, self.slot_type, self.dra_stamp, self.dra_taken, self.dra_cap,
            self.dra_counters, fits.count_key, fits.count, fits.full, cache.key, cache.after, cache.taken,
            cache.cap_left, cache.counter_left, cache.milli, tc.never, tc.opt_start, tc.opt_end, tc.match, tc.members,
            tc.before, tc.need, tc.take_cap, tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req,
            tc.req_claim, tc.rest_min, tc.gpu_index, tc.gpu_milli, marks, tc.tolerated, MAX_RESULTS, self.status,
            READY, self.cpu_free, self.mem_free, self.gpu_free, self.gpu_used, self.pods_on, self.gpu_cap,
            self.slot_table, self.stacked_tables, self.gpu_nvl, self.gpu_numa, self.gpu_both, self.free_whole,
            self.max_share, self.nvl_whole, self.numa_whole, self.both_whole)
        assert ok, "as many pods as counted fit, none over-allocated"
        self.alloc_ready_milli += int(on_ready)
        self.mutations += len(nodes)
        self.changed_at[nodes] = self.mutations
        return nodes, got

    def _bind_rows(self, nodes: np.ndarray, counts: np.ndarray, cpu: int, mem: int, taken: np.ndarray) -> None:
        """`bind_many` once the rows before are saved."""
        on_ready, ok = bind_alike(
            nodes, np.asarray(counts, np.int64), cpu, mem, np.asarray(taken, np.int64), self.status, READY,
            self.cpu_free, self.mem_free, self.gpu_free, self.gpu_used, self.pods_on, self.gpu_cap, self.slot_table,
            self.stacked_tables, self.slot_type, self.gpu_nvl, self.gpu_numa, self.gpu_both,
            self.free_whole, self.max_share, self.nvl_whole, self.numa_whole, self.both_whole)
        assert ok, "over-allocated"
        self.alloc_ready_milli += int(on_ready)
        self.mutations += len(nodes)
        self.changed_at[nodes] = self.mutations

    def round_trip(self, nodes: list[int]) -> None:
        """Pods bound on these ready nodes in turn (a node per pod), then released in turn at one
        instant (a futile gang attempt): every node's rows come back as they were, and so does
        its device stamp, which names them; none is written. What moves is what counts changes,
        as the binds and releases move it: `mutations` and each node's `changed_at`, and, per
        release, `version` and `grown`. The caller vouches that the pods fit as they come."""
        assert self._undo is None, "outside a trial"
        mutations, changed_at = self.mutations, self.changed_at
        for n in nodes + nodes:
            mutations += 1
            changed_at[n] = mutations
        self.mutations = mutations
        self.version += len(nodes)
        self.grown += nodes

    def round_trips(self, trips: list[list[int]]) -> np.ndarray:
        """`round_trip` of each trip in turn (futile gang attempts one after another at one
        instant), in a few array steps: each node's `changed_at` is the change count of its last
        bind or release in the sequence. Returns the capacity `version` after each trip's
        releases (what the gang it released is backed off at)."""
        assert self._undo is None, "outside a trial"
        binds = list(chain.from_iterable(trips))
        touched = np.fromiter(chain.from_iterable(nodes + nodes for nodes in trips), np.int64, 2 * len(binds))
        self.mutations = stamp_in_turn(self.changed_at, self.mutations, touched)
        versions = self.version + np.cumsum(np.fromiter(map(len, trips), np.int64, len(trips)))
        self.version = int(versions[-1])
        self.grown += binds
        return versions

    def release(self, n: int, cpu: int, mem: int, gpu_idx: np.ndarray, milli: int) -> None:
        self._take(n, -1, cpu, mem, gpu_idx, milli)
        self.version += 1
        self.grown.append(n)

    def _refresh(self, n: int) -> None:
        """Recompute the summaries of one node from its GPU row."""
        self.mutations += 1
        self.changed_at[n] = self.mutations
        answer = summarize(n, self.gpu_free, self.gpu_cap, self.slot_table, self.stacked_tables, self.free_whole,
                           self.max_share, self.nvl_whole, self.numa_whole, self.both_whole)
        assert answer != OVER_ALLOCATED, "over-allocated"
        if answer == NO_TABLE:
            self._summarize_untabled(n)

    def _summarize_untabled(self, n: int) -> None:
        """The whole-GPU summaries of node n, of a type with too many GPUs for a table."""
        k, t = self.gpu_cap[n], self.slot_type[n]
        whole = self.gpu_free[n, :k] == WHOLE
        self.free_whole[n] = whole.sum()
        self.nvl_whole[n] = np.bincount(self.gpu_nvl[t, :k], weights=whole).max()
        self.numa_whole[n] = np.bincount(self.gpu_numa[t, :k], weights=whole).max()
        self.both_whole[n] = np.bincount(self.gpu_both[t, :k], weights=whole).max()

    # ---- device choice within one node -------------------------------------------------
    def pick_devices(self, n: int, gpus: int, milli: int, nvlink: bool, numa: bool) -> np.ndarray:
        """GPUs a pod takes on node n: first whole free GPUs (in one domain if claimed),
        or for a share the fitting GPU with the least free milli (lowest index on ties)."""
        if gpus == 0:
            return np.zeros(0, np.int64)
        domain = self.gpu_both if nvlink and numa else self.gpu_nvl if nvlink else self.gpu_numa
        mask = pick(n, gpus, milli, self.gpu_free, self.gpu_cap, self.slot_type, domain, nvlink or numa)
        assert mask, "no device fits"
        idx = self._devices.get(mask)
        if idx is None:  # each set of devices is one array, shared by the pods that hold it (never written)
            idx = self._devices[mask] = np.flatnonzero((mask >> np.arange(self.gpu_free.shape[1])) & 1)
        return idx

    # ---- placements: the nodes an admission layer keeps pods to ------------------------
    def placement(self, slots: np.ndarray) -> int:
        """The number of the placement that keeps pods to the slots of this mask (0 when it
        keeps them nowhere narrower than every slot), registered on first use. Placements
        never change: a mask of them is as static as a node type."""
        slots = np.asarray(slots, bool)
        if slots.all():
            return 0
        same = np.flatnonzero((self.allowed == slots).all(axis=1))
        if len(same):
            return int(same[0])
        self.allowed = np.vstack([self.allowed, slots])
        pools = np.bincount(self.slot_pool[slots], minlength=self.pool_allowed.shape[1]) > 0
        self.pool_allowed = np.vstack([self.pool_allowed, pools])
        return len(self.allowed) - 1

    # ---- views -------------------------------------------------------------------------
    def static_fit(self, models: int, profile: int, nic: bool, placement: int = 0) -> np.ndarray | None:
        """Mask of slots whose node type has one of these GPU models (bits; 0 = any), this
        partition profile (bit; 0 = none needed) and, if asked, a NIC per GPU, within this
        `placement` (0 = every slot); None = all. Node types and placements never change, so
        each combination is computed once."""
        if not (models or profile or nic or placement):
            return None
        key = (models, profile, nic, placement)
        mask = self._static_fit.get(key)
        if mask is None:
            mask = self.allowed[placement].copy()
            if models:
                mask &= (self.model_bit & models) != 0
            if profile:
                mask &= (self.profile_bits & profile) != 0
            if nic:
                mask &= self.nic_ok
            self._static_fit[key] = mask
        return mask

    def pod_static(self, models: int, profile: int, nic: bool, placement: int, taints: int) -> np.ndarray:
        """`static_fit` on the pools whose taints the pod tolerates (`Cluster.untolerated`'s row
        `taints`: 0 for a pod without GPUs, 1 with; -1 ignores taints): every check of the filter
        that never changes, as one mask (all set when none applies), computed once."""
        key = ("pod", models, profile, nic, placement, taints)
        mask = self._static_fit.get(key)
        if mask is None:
            static = self.static_fit(models, profile, nic, placement)
            mask = np.ones(self.n_slots, bool) if static is None else static.copy()
            untolerated = self.cluster.untolerated
            if untolerated is not None and taints >= 0:
                mask &= ~untolerated[taints][self.slot_pool]
            self._static_fit[key] = mask
        return mask

    @property
    def ready(self) -> np.ndarray:
        return self.status == READY

    _PER_SLOT = ("slot_pool", "slot_type", "slot_rack", "slot_block", "slot_committed", "cpu_cap", "mem_cap",
                 "gpu_cap", "gpu_milli_cap", "model_bit", "nic_ok", "profile_bits", "slot_table")
    _DYNAMIC: tuple[str, ...] = ("status", "cpu_free", "mem_free", "gpu_free", "pods_on",
                "free_whole", "max_share", "nvl_whole", "numa_whole", "both_whole", "gpu_used", "changed_at")
    DEVICE_ARRAYS = ("dra_taken", "dra_cap", "dra_counters", "dra_stamp", "dra_type")  # dynamic too, with DRA

    def subset(self, idx: np.ndarray) -> ClusterState:
        """A scratch state of only the slots `idx` (local index i is slot idx[i]): what-if
        packing over a few candidate nodes costs O(len(idx)), not O(all slots)."""
        twin = copy.copy(self)
        for name in self._PER_SLOT + self._DYNAMIC:
            setattr(twin, name, getattr(self, name)[idx])
        twin.allowed = self.allowed[:, idx]
        twin.paid_per_pool = self.paid_per_pool.copy()
        twin.grown = []
        twin._static_fit = {}
        twin._undo = None
        return twin

    def copy(self) -> ClusterState:
        """A scratch copy for what-if packing (static arrays shared, dynamic ones copied)."""
        twin = copy.copy(self)
        for name in self._DYNAMIC:
            setattr(twin, name, getattr(self, name).copy())
        twin.paid_per_pool = self.paid_per_pool.copy()
        twin.grown = []
        twin._undo = None
        return twin

    def refresh_copy(self, twin: ClusterState, since: int) -> None:
        """Make `twin`, a `copy` taken when `mutations` was `since` and changed since only as a
        scratch copy is (what-if packing, trials closed), equal to a `copy` taken now, rewriting
        only the rows changed on either side since: every change of a node moves its
        `changed_at` past `since` (a reverted trial puts back rows and counts both), so a row
        neither moved is still equal. The device types, which a what-if's `retype` changes
        without counting, are copied whole. O(slots) compares and O(rows changed) copies,
        where `copy` copies every row (the device arrays are most of the state). The rows are
        found and written by compiled loops, one call per array: numpy's fancy indexing cost
        several calls per array, most of a what-if's setup."""
        assert self._undo is None and twin._undo is None, "outside a trial"
        rows = changed_since(self.changed_at, twin.changed_at, since)
        own = {name: twin.__dict__[name] for name in self._DYNAMIC}
        twin.__dict__.update(self.__dict__)
        twin.__dict__.update(own)
        for name in self._DYNAMIC:
            write_rows(rows, getattr(self, name), own[name])
        if self.dra is not None:
            twin.dra_type[:] = self.dra_type
        twin.paid_per_pool = self.paid_per_pool.copy()
        twin.grown = []


def _domain_tables(gpus: int, nvl: np.ndarray, numa: np.ndarray, both: np.ndarray) -> list | None:
    """For each pattern of whole-free GPUs (bit i = GPU i), the summaries of `_refresh`:
    (free whole GPUs, most whole GPUs in one NVLink / NUMA / NVLink-and-NUMA domain)."""
    if gpus == 0 or gpus > 12:
        return None
    bits = (np.arange(1 << gpus)[:, None] >> np.arange(gpus)) & 1
    out = [bits.sum(axis=1)]
    for dom in (nvl[:gpus], numa[:gpus], both[:gpus]):
        onehot = dom[:, None] == np.unique(dom)[None, :]
        out.append((bits @ onehot).max(axis=1))
    return [tuple(int(v) for v in row) for row in np.stack(out, axis=1)]


@njit(cache=True)
def take_claimed(pairs, sign, n, t, taken, cap_left, counter_left, capacity, take_cap, consumes, multi, cpu, mem,
                 gpu_idx, milli, cpu_free, mem_free, gpu_free, gpu_used, pods_on, gpu_cap, slot_table, tables,
                 free_whole, max_share, nvl_whole, numa_whole, both_whole):
    """A DRA pod comes onto node n of device type t (sign 1) or leaves it (-1): its allocation's
    (option, device) pairs on the device arrays (`commit_at`), then its GPUs on the GPU matrix
    and the node's summaries (`take`, whose answer this is), in one compiled call where a bind
    or a release made two and a Python call between them."""
    commit_at(pairs, sign, n, t, taken, cap_left, counter_left, capacity, take_cap, consumes, multi)
    return take(n, sign, cpu, mem, gpu_idx, milli, cpu_free, mem_free, gpu_free, gpu_used, pods_on, gpu_cap, slot_table,
                tables, free_whole, max_share, nvl_whole, numa_whole, both_whole)


@njit(cache=True)
def bind_alike(nodes, counts, cpu, mem, taken, status, ready, cpu_free, mem_free, gpu_free, gpu_used, pods_on,
               gpu_cap, slot_table, tables, slot_type, nvl, numa, both,
               free_whole, max_share, nvl_whole, numa_whole, both_whole):
    """Bind counts[i] pods of the shape on nodes[i] (`ClusterState.bind_many`): CPU, memory and
    the `taken` milli come off, and each node is re-summarized as `_refresh` does (`summarize`;
    a type without a table by a count per domain). Returns the GPU milli taken on `ready` nodes
    and whether nothing went below 0."""
    on_ready, ok = 0, True
    for i in range(len(nodes)):
        n = nodes[i]
        cpu_free[n] -= counts[i] * cpu
        mem_free[n] -= counts[i] * mem
        pods_on[n] += counts[i]
        used = 0
        for g in range(gpu_free.shape[1]):
            gpu_free[n, g] -= taken[i, g]
            used += taken[i, g]
        gpu_used[n] += used
        if status[n] == ready:
            on_ready += used
        answer = summarize(n, gpu_free, gpu_cap, slot_table, tables, free_whole, max_share, nvl_whole, numa_whole,
                           both_whole)
        ok = ok and answer != OVER_ALLOCATED and cpu_free[n] >= 0 and mem_free[n] >= 0
        if answer == NO_TABLE:
            t = slot_type[n]
            free_whole[n] = _most_in_one_domain(gpu_free[n], np.zeros(gpu_free.shape[1], np.int32))  # one domain: all
            nvl_whole[n] = _most_in_one_domain(gpu_free[n], nvl[t])
            numa_whole[n] = _most_in_one_domain(gpu_free[n], numa[t])
            both_whole[n] = _most_in_one_domain(gpu_free[n], both[t])
    return on_ready, ok


@njit(cache=True)
def fit_bind_claims(slots, usable, static, cpu, mem, most, k, claim_set, next_stamp, dra_type, slot_type, stamp,
                    taken, cap_left, counter_left, count_key, count, full, key, after, row_taken, row_cap, row_counters,
                    row_milli, never, opt_start, opt_end, match, members, before, need, take_cap, capacity, consumes,
                    multi, con_value, con_req, req_claim, rest_min, gpu_index, gpu_milli, marks, tolerated, limit,
                    status, ready, cpu_free, mem_free, gpu_free, gpu_used, pods_on, gpu_cap, slot_table, tables, nvl,
                    numa, both, free_whole, max_share, nvl_whole, numa_whole, both_whole):
    """`ClusterState.fit_claims_alike`: the allocator's first fit (`first_fit_kernel`), its
    binds on the devices (`take_alike_kernel`), then on the GPU matrix and summaries (`bind_alike`).
    Returns the nodes, their counts, the next stamp, the GPU milli taken on `ready` nodes and
    whether all went as counted."""
    nodes, got = first_fit_kernel(slots, usable, static, cpu_free, mem_free, cpu, mem, most, k, dra_type, stamp, taken,
                                  cap_left, counter_left, count_key, count, full, never, opt_start, opt_end, match,
                                  members, before, need, take_cap, capacity, consumes, multi, con_value, con_req,
                                  req_claim, rest_min, gpu_index, gpu_milli, marks, tolerated, limit)
    milli = np.zeros((len(nodes), gpu_free.shape[1]), np.int64)
    took, next_stamp = take_alike_kernel(nodes, got, claim_set, next_stamp, dra_type, stamp, taken, cap_left,
                                         counter_left, milli, key, after, row_taken, row_cap, row_counters, row_milli,
                                         never, opt_start, opt_end, match, members, before, need, take_cap, capacity,
                                         consumes, multi, con_value, con_req, req_claim, rest_min, gpu_index,
                                         gpu_milli, marks, tolerated, limit)
    on_ready, fits = bind_alike(nodes, got, cpu, mem, milli, status, ready, cpu_free, mem_free, gpu_free, gpu_used,
                                pods_on, gpu_cap, slot_table, tables, slot_type, nvl, numa, both, free_whole,
                                max_share, nvl_whole, numa_whole, both_whole)
    return nodes, got, next_stamp, on_ready, took and fits


@njit(cache=True)
def _most_in_one_domain(row, ids):
    """The most whole-free GPUs of `row` in one domain (`ids` per GPU)."""
    most = 0
    for g in range(len(row)):
        if row[g] == WHOLE:
            same = 0
            for h in range(len(row)):
                if row[h] == WHOLE and ids[h] == ids[g]:
                    same += 1
            most = max(most, same)
    return most


@njit(cache=True)
def changed_since(changed_at, twin_changed_at, since):
    """The rows whose change stamp moved past `since` on the state or on its scratch copy (one
    `|`, not `or`: numba's short-circuit made the pass several times slower)."""
    rows = np.empty(len(changed_at), np.int64)
    m = 0
    for n in range(len(changed_at)):
        if (changed_at[n] > since) | (twin_changed_at[n] > since):
            rows[m] = n
            m += 1
    return rows[:m]


@njit(cache=True)
def write_rows(rows, src, dst):
    """dst[rows] = src[rows], element by element over the rows seen as flat: any per-slot array
    (one slot a row, of any further shape), C-contiguous as the state keeps them."""
    width = src.size // src.shape[0] if src.shape[0] else 0
    s, d = src.reshape((src.shape[0], width)), dst.reshape((dst.shape[0], width))
    for i in range(len(rows)):
        n = rows[i]
        for j in range(width):
            d[n, j] = s[n, j]


@njit(cache=True)
def stamp_in_turn(changed_at: np.ndarray, mutations: int, nodes: np.ndarray) -> int:
    """One change of each node in `nodes` in turn: each moves the change count, and its node's
    `changed_at` to it. Returns the count after them all (a handful of changes, where finding
    each node's last one by numpy's unique cost a sort and half a dozen calls)."""
    for i in range(len(nodes)):
        mutations += 1
        changed_at[nodes[i]] = mutations
    return mutations
