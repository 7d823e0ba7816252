"""A cluster's devices in DRA's terms, as the scheduler and every autoscaler's what-if see them:
what each node type publishes (and what an autoscaler's node-group template says it does),
each node's allocation state (three slot-indexed arrays the cluster state holds beside its GPU
matrix), and pods' claims compiled per device type.

A cluster with a `dra:` section runs every GPU pod through its claim: a template named by the
trace's `claim` column, else the claim its device columns make (harness.dra.translate). The
allocator decides which devices a pod gets (first fit in publishing order, as upstream), and
the GPU matrix mirrors the GPUs among them, so metrics read the same arrays either way. A
view that forgets claims (a pre-DRA autoscaler, `view_of`) packs pods by their columns on
that mirror.

The section (as `loopbench import dra` writes it):

    dra:
      device_classes: [{name: NAME, spec: SPEC}, ...]   # beside the built-in gpu, mig, nic
      node_types: {TYPE: [SLICE SPEC, ...]}             # else the type's columns, translated
      templates: {TYPE: [SLICE SPEC, ...]}              # what the autoscalers' node-group template
                                                        # says a node of TYPE publishes, if not that
      claims: {NAME: CLAIM SPEC}                        # templates the trace's `claim` names
      taint_rules: [...]; device_failures: {...}         # taints during the run (harness.dra.taints)

A device is one of the node type's GPUs when it has an integer attribute `index` (as NVIDIA's
driver publishes it) below the type's `gpus`; the share of that GPU it takes is its capacity
request's share of its capacity (a multi-allocatable device), else its first counter's share
of that counter (a partition), else the whole GPU.

A node-group template (`templates`) is what an autoscaler simulates a node of the type with
before it has seen one: Cluster Autoscaler builds a node group's template from its cloud
provider (`TemplateNodeInfo`) until a node of the group has been ready for a minute, then from
a copy of that node; Karpenter takes its instance types' ResourceSliceTemplates from the cloud
provider, always. Where the provider's guess differs from what the nodes really publish, the
autoscaler buys nodes that do not hold the pods, or misses ones that would. Each template is
one more device type after the node types (`template_of`): the claims are compiled against it
as against a node type, and a slot simulated by it, in a what-if or while its node boots, has
it as its `dra_type` (harness/state.py). Real nodes (the scheduler, binding, metrics) always
use what they publish. A template identical to what the nodes publish (pool names aside) is
no template. A template may publish fewer pools of a driver than the nodes do, never more:
upstream holds such a node unready until the template's pools appear (Cluster Autoscaler's
DRA readiness check, Karpenter's initialization gate), which is not modelled; nor are
templates together with device taints (a taint names devices a node publishes).

A device taint in force on a node (a per-slot bitmask, `marks`) keeps an option that does not
tolerate it off that device there: the compiled calls take the marks and each option's
tolerated bits (`TypedClaims.tolerated`) and, on a node whose marks block some option, search
it as if those (option, device) pairs did not match (`allocator.without`). A node's stamp is
renewed whenever its marks change, so a stamp still names one content (allocation and taints).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from harness.dra import translate
from harness.dra.allocator import (
    AlikeCache,
    CompiledClaims,
    DeviceState,
    FitCache,
    NodeDevices,
    TypedClaims,
    allocate,
    allocate_typed,
    compile_claims,
    count_typed,
    feasible_typed,
    first_fit_typed,
    take_alike_typed,
)
from harness.dra.resources import Claim, ResourceSlice, claim, device_class, resource_slice
from harness.dra.taints import DeviceTaints, tolerated_bits
from harness.errors import ConfigError
from harness.node_type import NodeType

WHOLE = translate.WHOLE
SECTION_KEYS = ("device_classes", "node_types", "templates", "claims", "taint_rules", "device_failures")
MOST_FOLLOWED = 1 << 20  # changes remembered by `DeviceLayer.follow` before it starts over
MOST_CONTENTS = 1 << 16  # contents remembered by `DeviceLayer.follow` (~1 KiB each) before it starts over
MOST_ALLOCATED = 1 << 16  # devices remembered by `DeviceLayer.allocated` (~0.5 KiB each) before it starts over
NO_MARKS = np.zeros((0, 0), np.int64)  # the compiled calls' taint marks where none are configured


class ClaimedGpus(np.ndarray):
    """The GPUs a pod's claim was allocated on its node (the GPU matrix's view), carrying the
    allocation itself, every device (NICs too), so that releasing the pod gives back exactly
    what it took. `typed` is the claim on every node type, `pairs` its (option, device)s,
    `change` the two as `DeviceLayer.follow` keys them (made once, not at each bind and release)."""

    typed: TypedClaims
    pairs: np.ndarray
    change: tuple[int, bytes]

    def __array_finalize__(self, obj):
        """A copy (a deep-copied simulation's) carries the allocation on."""
        if obj is not None and hasattr(obj, "pairs"):
            self.typed, self.pairs, self.change = obj.typed, obj.pairs, obj.change


#: a DRA cluster's per-slot allocation state: devices taken, capacity left, counters left
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


class DeviceLayer:
    """The static part: per device type (each node type, then each node-group template that
    differs from its type) what it publishes and which devices are its GPUs; the claims
    compiled against each device type, once."""

    def __init__(self, node_types: list[NodeType], partition_profiles: dict[str, int], raw: dict):
        if not isinstance(raw, dict):
            raise ConfigError("cluster.dra", f"expected a mapping with keys {', '.join(SECTION_KEYS)}, got {raw!r}")
        unknown = sorted(set(raw) - set(SECTION_KEYS))
        if unknown:
            raise ConfigError(f"cluster.dra.{unknown[0]}", f"unknown key (known: {', '.join(SECTION_KEYS)})")
        self.classes = translate.device_classes()
        for i, c in enumerate(raw.get("device_classes") or []):
            where = f"cluster.dra.device_classes[{i}]"
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise ConfigError(f"{where}.name", f"a device class is {{name: NAME, spec: SPEC}}, got {c!r}")
            self.classes[c["name"]] = device_class({"metadata": {"name": c["name"]}, "spec": c.get("spec") or {}},
                                                   where)
        declared = raw.get("node_types") or {}
        if not isinstance(declared, dict):
            raise ConfigError("cluster.dra.node_types",
                              f"expected a mapping TYPE -> [slice spec, ...], got {declared!r}")
        names = [t.name for t in node_types]
        for t in declared:
            if t not in names:
                raise ConfigError(f"cluster.dra.node_types.{t}", f"no such node type (known: {', '.join(names)})")
        #: per device type, what it publishes and which devices are its GPUs (-1: not a GPU): the
        #: node types, then the templates that differ from them
        self.devices: list[NodeDevices] = []
        self.gpu_index: list[np.ndarray] = []
        for nt in node_types:
            if nt.name in declared:
                slices = _slices(declared[nt.name], f"cluster.dra.node_types.{nt.name}", nt.name)
            else:
                slices = translate.slices_of(nt, partition_profiles, nt.name)
            self._add(NodeDevices.of(slices), nt, f"cluster.dra.node_types.{nt.name}")
        self.n_types = len(node_types)
        #: per node type, the device type an autoscaler simulates a node of it with before it has
        #: seen one: its node-group template, or the type itself (no template, or an identical one)
        self.template_of = np.arange(self.n_types, dtype=np.int32)
        guessed = raw.get("templates") or {}
        if not isinstance(guessed, dict):
            raise ConfigError("cluster.dra.templates", f"expected a mapping TYPE -> [slice spec, ...], got {guessed!r}")
        for name, specs in guessed.items():
            where = f"cluster.dra.templates.{name}"
            if name not in names:
                raise ConfigError(where, f"no such node type (known: {', '.join(names)})")
            t = names.index(name)
            devices = NodeDevices.of(_slices(specs, where, f"{name}-template"))
            _check_pools(devices, self.devices[t], where)
            if not _same(devices, self.devices[t]):
                self.template_of[t] = len(self.devices)
                self._add(devices, node_types[t], where)
        if (self.template_of != np.arange(self.n_types)).any() and (
                raw.get("taint_rules") is not None or raw.get("device_failures") is not None):
            raise ConfigError("cluster.dra.templates", "not modelled together with taint_rules or device_failures: "
                              "a device taint names devices a node publishes, a template's are the autoscaler's guess")
        self.claims: dict[str, Claim] = {}
        templates = raw.get("claims") or {}
        if not isinstance(templates, dict):
            raise ConfigError("cluster.dra.claims", f"expected a mapping NAME -> claim spec, got {templates!r}")
        for name, spec in templates.items():
            self.claims[str(name)] = claim({"metadata": {"name": str(name)}, "spec": spec or {}},
                                           f"cluster.dra.claims.{name}")
        self.width = max([d.n_devices for d in self.devices] + [0])
        self.n_capacities = max([len(d.capacities) for d in self.devices] + [0])
        self.n_counters = max([len(d.counters) for d in self.devices] + [0])
        self._compiled: dict[tuple[int, int], tuple[tuple[Claim, ...], CompiledClaims, np.ndarray]] = {}
        self._typed: dict[int, tuple[tuple[Claim, ...], TypedClaims, FitCache, int]] = {}
        self._alike: AlikeCache | None = None  # what-if binds of every claim set (`take_alike`), made on first use
        self.next_stamp = len(self.devices)  # the next stamp to give; below: an empty node of device type t is stamp t
        self._after: dict[tuple, int] = {}  # (stamp, change) -> the stamp of the state it leads to
        #: a node's content (`_content`: device type, rows, taint marks) -> the stamp `follow` named it by
        self._stamp_of: dict[tuple, int] = {}
        self._empties: dict[int, tuple] = {}  # device type -> `_content` of its fresh node
        self._allocated: dict[tuple[int, int], ClaimedGpus] = {}  # (claim set, stamp) -> `allocation` there
        #: taints during the run (None: none configured)
        self.taints = None
        if raw.get("taint_rules") is not None or raw.get("device_failures") is not None:
            self.taints = DeviceTaints(raw.get("taint_rules"), raw.get("device_failures"), names,
                                       [d.names for d in self.devices], [d.drivers for d in self.devices],
                                       [np.flatnonzero(g >= 0) for g in self.gpu_index])

    def _add(self, devices: NodeDevices, nt: NodeType, where: str) -> None:
        """One more device type: what a node of type `nt` publishes (or, a template, is said to)."""
        index = np.full(devices.n_devices, -1, np.int64)
        for d, (dev, driver) in enumerate(zip(devices.items, devices.drivers, strict=True)):
            g = dev.attributes.get(f"{driver}/index")
            if isinstance(g, int) and not isinstance(g, bool):
                if not 0 <= g < nt.gpus:
                    raise ConfigError(where, f"device {dev.name!r} has index {g}, but node type {nt.name!r} has "
                                      f"{nt.gpus} GPUs")
                index[d] = g
        self.devices.append(devices)
        self.gpu_index.append(index)

    @property
    def templated(self) -> bool:
        """Some node type has a node-group template that differs from what its nodes publish."""
        return len(self.devices) > self.n_types

    # ---- claims against node types ------------------------------------------------------
    def compiled(self, claims: tuple[Claim, ...], t: int) -> tuple[CompiledClaims, np.ndarray]:
        """The claims compiled for device type t, and per (option, device) the GPU milli it takes
        (0: not a GPU)."""
        key = (id(claims), t)
        hit = self._compiled.get(key)
        if hit is None:
            cc = compile_claims(claims, self.devices[t], self.classes)
            hit = self._compiled[key] = (claims, cc, self._gpu_milli(cc, t))  # the claims kept: ids stay unique
        return hit[1], hit[2]

    def typed(self, claims: tuple[Claim, ...]) -> tuple[TypedClaims, FitCache]:
        """The claims compiled against every device type, as one compiled call takes them, and
        their answers so far by node-state stamp."""
        hit = self._typed.get(id(claims)) or self._type(claims)
        return hit[1], hit[2]

    def _type(self, claims: tuple[Claim, ...]) -> tuple[tuple[Claim, ...], TypedClaims, FitCache, int]:
        """`typed`'s entry, made: the claims kept (ids stay unique while they are), then a small
        number of their own (`AlikeCache` keys by it)."""
        per_type = [self.compiled(claims, t) for t in range(len(self.devices))]
        tolerated = None if self.taints is None else tolerated_bits(claims, self.taints.catalogue)
        tc = TypedClaims.of([cc for cc, _ in per_type], self.devices, self.gpu_index,
                            [milli for _, milli in per_type], self.width, self.n_capacities, self.n_counters, tolerated)
        hit = self._typed[id(claims)] = (claims, tc, FitCache.empty(), len(self._typed))
        return hit

    def _gpu_milli(self, cc: CompiledClaims, t: int) -> np.ndarray:
        dev, index = self.devices[t], self.gpu_index[t]
        out = np.zeros(cc.match.shape, np.int64)
        for d in np.flatnonzero(index >= 0):
            caps = np.flatnonzero(dev.capacity[d] > 0)
            draws = np.flatnonzero(dev.consumes[d] > 0)
            if dev.multi[d] and len(caps):
                out[:, d] = cc.take_cap[:, d, caps[0]] * WHOLE // dev.capacity[d, caps[0]]
            elif len(draws):
                out[:, d] = dev.consumes[d, draws[0]] * WHOLE // dev.counter_cap[draws[0]]
            else:
                out[:, d] = WHOLE
        return out

    def gpu_milli(self, claims: tuple[Claim, ...], where: str) -> int:
        """The share of each GPU the claims take, on every device type (0: they take no GPU).
        Refused where devices of different shares could serve them: a pod holds one share of
        each of its GPUs."""
        seen: set[int] = set()
        for t in range(len(self.devices)):
            cc, milli = self.compiled(claims, t)
            if cc.error:
                raise ConfigError(where, cc.error)
            seen |= set(milli[cc.match & (milli > 0)].tolist())
        if len(seen) > 1:
            raise ConfigError(where, f"GPU devices of different shares could serve it ({sorted(seen)} milli): a pod "
                              "holds one share of each GPU it takes")
        return seen.pop() if seen else 0

    def fits_empty(self, claims: tuple[Claim, ...], types: np.ndarray | None = None) -> np.ndarray:
        """Per node type (or per device type of `types`, templates included): could an empty
        node of it allocate the claims?"""
        types = np.arange(self.n_types) if types is None else np.asarray(types)
        out = np.zeros(len(types), bool)
        for i, t in enumerate(types.tolist()):
            dev = self.devices[t]
            cc, _ = self.compiled(claims, t)
            out[i] = allocate(cc, dev, DeviceState.fresh(dev, 1), np.zeros(1, np.int64))[0][0]
        return out

    # ---- node state: slot-indexed arrays, padded to the widest type --------------------
    def arrays(self, n: int) -> Arrays:
        """Empty allocation state for n slots: devices taken, capacity left, counters left."""
        return (np.zeros((n, self.width), bool), np.zeros((n, self.width, self.n_capacities), np.int64),
                np.zeros((n, self.n_counters), np.int64))

    def restamp(self, stamp: np.ndarray, nodes) -> None:
        """The allocation state of node(s) `nodes` changed: each gets a stamp never given
        before. A stamp names one content of a node's state (and its type) wherever it is
        found, in the cluster or a what-if copy, so answers are cached by stamp (`FitCache`)."""
        k = np.size(nodes)
        stamp[nodes] = np.arange(self.next_stamp, self.next_stamp + k) if np.ndim(nodes) else self.next_stamp
        self.next_stamp += k

    def follow(self, stamp: np.ndarray, n: int, change: Hashable, arrays: Arrays, slot_type: np.ndarray,
               marks: np.ndarray | None = None) -> None:
        """Node n (its rows in `arrays`, its device type in `slot_type`, its taint marks in
        `marks`) went through `change`, a full description of what was done to its allocation
        state (its result a function of the state before): a state reached from the same stamp
        by the same change is the same content, so it gets the same stamp. A change not seen
        from that stamp is named by the content it leads to: a content named before (by any
        history: pods bound in another order, a pod bound then released, a node emptied, which
        is its type's stamp) gets that stamp again, so what was answered for it holds again
        (most of the scheduler's allocator searches were of contents already answered under
        another stamp)."""
        if len(self._after) > MOST_FOLLOWED:
            self._after.clear()  # only reuse is lost: a state reached again gets a new stamp
        key = (int(stamp[n]), change)
        after = self._after.get(key)
        if after is None:
            t = int(slot_type[n])
            content = _content(arrays, n, t, marks)
            after = self._stamp_of.get(content)
            if after is None:
                if len(self._stamp_of) >= MOST_CONTENTS:
                    self._stamp_of.clear()  # only reuse is lost
                if content == self._empty_content(t):
                    after = t  # a fresh node of type t, untainted: as `reset` names it
                else:
                    after = self.next_stamp
                    self.next_stamp += 1
                self._stamp_of[content] = after
            self._after[key] = after
        stamp[n] = after

    def _empty_content(self, t: int) -> tuple:
        """`_content` of a fresh node of device type t without taints (stamp t, `reset`)."""
        empty = self._empties.get(t)
        if empty is None:
            arrays = self.arrays(1)
            self.reset(*arrays, np.zeros(1, np.int64), 0, t)
            empty = self._empties[t] = _content(arrays, 0, t, None)
        return empty

    def allocated(self, arrays: Arrays, stamp: np.ndarray, t: int, claims: tuple[Claim, ...], n: int,
                  marks: np.ndarray | None = None) -> ClaimedGpus:
        """`allocation` of the claims on node n, remembered by its stamp: a stamp names the
        node's allocation state, device type and taints, so the same claims get the same
        devices wherever and whenever that state is found (nodes of one history share it: every
        fresh node of a type, and each after the same placements). The answer is shared,
        never written."""
        hit = self._typed.get(id(claims)) or self._type(claims)
        key = (hit[3], int(stamp[n]))
        out = self._allocated.get(key)
        if out is None:
            if len(self._allocated) >= MOST_ALLOCATED:
                self._allocated.clear()  # only reuse is lost
            out = self._allocated[key] = allocation(self, arrays, t, claims, n, marks)
        return out

    def take_alike(self, arrays: Arrays, stamp: np.ndarray, slot_type: np.ndarray, claims: tuple[Claim, ...],
                   slots: np.ndarray, counts: np.ndarray, n_gpus: int, marks: np.ndarray | None = None) -> np.ndarray:
        """Allocate counts[i] pods with these claims on slots[i] (distinct), one after another, in
        place: the slots' rows of the arrays and their stamps become the state after (`follow`'s
        rule: the same stamp from the same stamp and change). Returns the GPU milli they take
        (len(slots) x n_gpus, for the GPU matrix). A bind seen before is copied (`AlikeCache`)."""
        tc, _, claim_set, cache = self.alike(claims, n_gpus)
        milli = np.zeros((len(slots), n_gpus), np.int64)
        ok, self.next_stamp = take_alike_typed(tc, claim_set, cache, DeviceState(*arrays), stamp, slot_type, slots,
                                               counts, milli, self.next_stamp, taint_marks(marks))
        assert ok, "as many pods as counted fit"
        return milli

    def alike(self, claims: tuple[Claim, ...], n_gpus: int) -> tuple[TypedClaims, FitCache, int, AlikeCache]:
        """What a compiled bind of pods alike takes beside the state: the claims typed, their
        answers by stamp, their number and the binds cached (`AlikeCache`, for n_gpus GPUs)."""
        _, tc, fits, claim_set = self._typed.get(id(claims)) or self._type(claims)
        cache = self._alike
        if cache is None or cache.milli.shape[1] != n_gpus:
            cache = self._alike = AlikeCache.empty(self.width, self.n_capacities, self.n_counters, n_gpus)
        return tc, fits, claim_set, cache

    def reset(self, taken: np.ndarray, cap: np.ndarray, counters: np.ndarray, stamp: np.ndarray, n: int,
              t: int, marks: np.ndarray | None = None) -> None:
        """Slot n holds a fresh node of device type t (nothing allocated, stamp t: one content per
        type, unless device taints are in force on the slot (`marks`): then a stamp of its
        own), or none (t = -1)."""
        taken[n] = False
        cap[n] = 0
        counters[n] = 0
        if t >= 0:
            dev = self.devices[t]
            cap[n, :dev.n_devices, :len(dev.capacities)] = dev.capacity
            counters[n, :len(dev.counters)] = dev.counter_cap
        if t >= 0 and (marks is None or not marks[n].any()):
            stamp[n] = t
        else:
            self.restamp(stamp, n)


def _content(arrays: Arrays, n: int, t: int, marks: np.ndarray | None) -> tuple:
    """What names node n's allocation state exactly: its device type, its rows of the three
    arrays and the device taints in force on it (none where none are configured or set)."""
    taken, cap, counters = arrays
    taints = b"" if marks is None or not marks[n].any() else marks[n].tobytes()
    return t, taken[n].tobytes(), cap[n].tobytes(), counters[n].tobytes(), taints


def _slices(specs: object, where: str, prefix: str) -> tuple[ResourceSlice, ...]:
    """The slice specs of one node (a list), read as ResourceSlices named `prefix-i`; a bad one is
    refused naming its place under `where`."""
    if not isinstance(specs, list):
        raise ConfigError(where, f"expected a list of slice specs, got {specs!r}")
    out = []
    for i, s in enumerate(specs):
        try:
            out.append(resource_slice({"metadata": {"name": f"{prefix}-{i}"}, "spec": s}, f"{where}[{i}]"))
        except ConfigError as e:
            raise ConfigError(f"{where}[{i}]", f"{e.where}: {e.rule}") from None
    return tuple(out)


def _pools(devices: NodeDevices) -> dict[str, int]:
    """Pools per driver among one node's slices (every pool a node publishes is complete here)."""
    pools: dict[str, set[str]] = {}
    for s in devices.slices:
        pools.setdefault(s.driver, set()).add(s.pool)
    return {driver: len(p) for driver, p in pools.items()}


def _check_pools(template: NodeDevices, real: NodeDevices, where: str) -> None:
    """A template publishes at most as many pools of each driver as the nodes do (upstream's
    `areResourcePoolsReady`: with more, the node would be held unready for pools that never come)."""
    have = _pools(real)
    for driver, n in sorted(_pools(template).items()):
        if n > have.get(driver, 0):
            raise ConfigError(where, f"publishes {n} pool(s) of driver {driver!r}, the node type's nodes "
                              f"{have.get(driver, 0)}: an autoscaler would hold each such node unready, waiting "
                              "for pools that never come (not modelled); a template may differ in devices and "
                              "attributes, and publish fewer pools, never more")


def _same(a: NodeDevices, b: NodeDevices) -> bool:
    """Two devices lists an allocator cannot tell apart: the same drivers, devices and counters
    in the same order (pool and slice names aside)."""
    return (a.drivers == b.drivers and a.items == b.items and a.capacities == b.capacities
            and [c[1:] for c in a.counters] == [c[1:] for c in b.counters]
            and np.array_equal(a.counter_cap, b.counter_cap) and np.array_equal(a.consumes, b.consumes)
            and np.array_equal(a.multi, b.multi) and np.array_equal(a.capacity, b.capacity))


def feasible(layer: DeviceLayer, arrays: Arrays, stamp: np.ndarray, slot_type: np.ndarray, claims: tuple[Claim, ...],
             slots: np.ndarray, usable: np.ndarray, static: np.ndarray, cpu_free: np.ndarray, mem_free: np.ndarray,
             cpu: int, mem: int, marks: np.ndarray | None = None) -> np.ndarray:
    """Per slot: its node is usable, passes the pod's static checks, has its CPU and memory,
    and can allocate the claims now (`marks`: per slot and device, the taints in force; None:
    no taints configured)."""
    return feasible_typed(*layer.typed(claims), DeviceState(*arrays), stamp, slot_type, slots, usable, static,
                          cpu_free, mem_free, cpu, mem, taint_marks(marks))


def taint_marks(marks: np.ndarray | None) -> np.ndarray:
    """The taint marks as the compiled calls take them: no rows when no taints are configured."""
    return NO_MARKS if marks is None else marks


def allocation(layer: DeviceLayer, arrays: Arrays, t: int, claims: tuple[Claim, ...], n: int,
               marks: np.ndarray | None = None) -> ClaimedGpus:
    """The devices the claims get on node n (of type t), first fit as upstream; its GPUs as
    the pod's GPU array. The node must fit."""
    tc = layer.typed(claims)[0]
    pairs, gpus = allocate_typed(tc, DeviceState(*arrays), t, n, taint_marks(marks))
    out = gpus.view(ClaimedGpus)
    out.typed, out.pairs, out.change = tc, pairs, (id(tc), pairs.tobytes())
    return out


def first_fit(layer: DeviceLayer, arrays: Arrays, stamp: np.ndarray, slot_type: np.ndarray, claims: tuple[Claim, ...],
              usable: np.ndarray, static: np.ndarray, cpu_free: np.ndarray, mem_free: np.ndarray, cpu: int, mem: int,
              most: int, k: int, marks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Where k pods with the claims go first fit over the nodes `feasible` passes, in slot
    order, each taking all it can (at most `most`): the nodes used and how many each takes."""
    return first_fit_typed(*layer.typed(claims), DeviceState(*arrays), stamp, slot_type, usable, static, cpu_free,
                           mem_free, cpu, mem, most, k, taint_marks(marks))


def fit_counts(layer: DeviceLayer, arrays: Arrays, stamp: np.ndarray, slot_type: np.ndarray,
               claims: tuple[Claim, ...], slots: np.ndarray, bound: np.ndarray,
               marks: np.ndarray | None = None) -> np.ndarray:
    """How many pods with these claims each slot's node takes one after another (at most
    `bound`, what its CPU and memory allow), the state left as it was."""
    return count_typed(*layer.typed(claims), DeviceState(*arrays), stamp, slot_type, slots, bound, taint_marks(marks))

