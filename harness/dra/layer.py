"""A cluster's devices in DRA's terms, as the scheduler and every autoscaler's what-if see them:
what each node type publishes, each node's allocation state (three slot-indexed arrays the
cluster state holds beside its GPU matrix), and pods' claims compiled per node type.

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
      claims: {NAME: CLAIM SPEC}                        # templates the trace's `claim` names
      taint_rules: [...]; device_failures: {...}         # taints during the run (harness.dra.taints)

A device is one of the node type's GPUs when it has an integer attribute `index` (as NVIDIA's
driver publishes it) below the type's `gpus`; the share of that GPU it takes is its capacity
request's share of its capacity (a multi-allocatable device), else its first counter's share
of that counter (a partition), else the whole GPU.

A device taint in force on a node (a per-slot bitmask, `tainted`) keeps an option that does
not tolerate it off that device there: the claims are compiled once more for each pattern of
taints met (`compiled_tainted`), and nodes are allocated in groups of one type and pattern.
"""

from __future__ import annotations

import numpy as np

from harness.dra import translate
from harness.dra.allocator import (
    CompiledClaims,
    DeviceState,
    NodeDevices,
    allocate,
    commit_rows,
    compile_claims,
    without,
)
from harness.dra.resources import Claim, claim, device_class, resource_slice
from harness.dra.taints import DeviceTaints, tolerated_bits
from harness.errors import ConfigError
from harness.node_type import NodeType

WHOLE = translate.WHOLE
SECTION_KEYS = ("device_classes", "node_types", "claims", "taint_rules", "device_failures")


class ClaimedGpus(np.ndarray):
    """The GPUs a pod's claim was allocated on its node (the GPU matrix's view), carrying the
    allocation itself, every device (NICs too), so that releasing the pod gives back exactly
    what it took. `compiled` is the claim on the node's type, `pairs` its (option, device)s."""

    compiled: CompiledClaims
    pairs: np.ndarray


#: a DRA cluster's per-slot allocation state: devices taken, capacity left, counters left
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


class DeviceLayer:
    """The static part: per node type what it publishes and which devices are its GPUs; the
    claims compiled against each type, once."""

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
        self.devices: list[NodeDevices] = []
        self.gpu_index: list[np.ndarray] = []  # per type, per device: its GPU (-1: not a GPU)
        for nt in node_types:
            if nt.name in declared:
                specs = declared[nt.name]
                if not isinstance(specs, list):
                    raise ConfigError(f"cluster.dra.node_types.{nt.name}", f"expected a list of slice specs, "
                                      f"got {specs!r}")
                slices = tuple(resource_slice({"metadata": {"name": f"{nt.name}-{i}"}, "spec": s},
                                              f"cluster.dra.node_types.{nt.name}[{i}]") for i, s in enumerate(specs))
            else:
                slices = translate.slices_of(nt, partition_profiles, nt.name)
            devices = NodeDevices.of(slices)
            index = np.full(devices.n_devices, -1, np.int64)
            for d, (dev, driver) in enumerate(zip(devices.items, devices.drivers, strict=True)):
                g = dev.attributes.get(f"{driver}/index")
                if isinstance(g, int) and not isinstance(g, bool):
                    if not 0 <= g < nt.gpus:
                        raise ConfigError(f"cluster.dra.node_types.{nt.name}", f"device {dev.name!r} has index {g}, "
                                          f"but node type {nt.name!r} has {nt.gpus} GPUs")
                    index[d] = g
            self.devices.append(devices)
            self.gpu_index.append(index)
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
        #: taints during the run (None: none configured)
        self.taints = None
        if raw.get("taint_rules") is not None or raw.get("device_failures") is not None:
            self.taints = DeviceTaints(raw.get("taint_rules"), raw.get("device_failures"), names,
                                       [d.names for d in self.devices], [d.drivers for d in self.devices],
                                       [np.flatnonzero(g >= 0) for g in self.gpu_index])
        self._tainted: dict[tuple[int, int, bytes], CompiledClaims] = {}
        self._tolerated: dict[int, np.ndarray] = {}

    # ---- claims against node types ------------------------------------------------------
    def compiled(self, claims: tuple[Claim, ...], t: int) -> tuple[CompiledClaims, np.ndarray]:
        """The claims compiled for node type t, and per (option, device) the GPU milli it takes
        (0: not a GPU)."""
        key = (id(claims), t)
        hit = self._compiled.get(key)
        if hit is None:
            cc = compile_claims(claims, self.devices[t], self.classes)
            hit = self._compiled[key] = (claims, cc, self._gpu_milli(cc, t))  # the claims kept: ids stay unique
        return hit[1], hit[2]

    def compiled_tainted(self, claims: tuple[Claim, ...], t: int, marks: np.ndarray) -> CompiledClaims:
        """The claims compiled for a node of type t whose devices carry these taints (`marks`:
        per device, a bitmask over the catalogue of `taints`)."""
        key = (id(claims), t, marks.tobytes())
        hit = self._tainted.get(key)
        if hit is None:
            assert self.taints is not None, "devices are tainted only where taints are configured"
            cc, _ = self.compiled(claims, t)
            tolerated = self._tolerated.get(id(claims))
            if tolerated is None:
                tolerated = self._tolerated[id(claims)] = tolerated_bits(claims, self.taints.catalogue)
            row = marks[:self.devices[t].n_devices]
            hit = self._tainted[key] = without(cc, (row[None, :] & ~tolerated[:, None]) != 0)
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
        """The share of each GPU the claims take, on every node type (0: they take no GPU).
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

    def fits_empty(self, claims: tuple[Claim, ...]) -> np.ndarray:
        """Per node type: could an empty node of it allocate the claims?"""
        out = np.zeros(len(self.devices), bool)
        for t, dev in enumerate(self.devices):
            cc, _ = self.compiled(claims, t)
            out[t] = allocate(cc, dev, DeviceState.fresh(dev, 1), np.zeros(1, np.int64))[0][0]
        return out

    # ---- node state: slot-indexed arrays, padded to the widest type --------------------
    def arrays(self, n: int) -> Arrays:
        """Empty allocation state for n slots: devices taken, capacity left, counters left."""
        return (np.zeros((n, self.width), bool), np.zeros((n, self.width, self.n_capacities), np.int64),
                np.zeros((n, self.n_counters), np.int64))

    def reset(self, taken: np.ndarray, cap: np.ndarray, counters: np.ndarray, n: int, t: int) -> None:
        """Slot n holds a fresh node of type t (nothing allocated), or none (t = -1)."""
        taken[n] = False
        cap[n] = 0
        counters[n] = 0
        if t >= 0:
            dev = self.devices[t]
            cap[n, :dev.n_devices, :len(dev.capacities)] = dev.capacity
            counters[n, :len(dev.counters)] = dev.counter_cap

    def view(self, taken: np.ndarray, cap: np.ndarray, counters: np.ndarray, t: int) -> DeviceState:
        """The rows of these arrays as type t's allocation state (views: writes go through)."""
        dev = self.devices[t]
        return DeviceState(taken[:, :dev.n_devices], cap[:, :dev.n_devices, :len(dev.capacities)],
                           counters[:, :len(dev.counters)])


def _groups(layer: DeviceLayer, slot_type: np.ndarray, tainted: np.ndarray | None, claims: tuple[Claim, ...],
            slots: np.ndarray):
    """(type, the claims compiled for it, the positions in `slots`) for each group of slots
    whose nodes are of one type and carry one pattern of device taints (`tainted`: per slot and
    device, the taints in force; None: no taints configured)."""
    types = slot_type[slots]
    for t in np.unique(types).tolist():
        at = np.flatnonzero(types == t)
        marks = None if tainted is None else tainted[slots[at]]
        if marks is None or not marks.any():
            yield t, layer.compiled(claims, t)[0], at
            continue
        patterns, which = np.unique(marks, axis=0, return_inverse=True)
        for i, row in enumerate(patterns):
            cc = layer.compiled_tainted(claims, t, row) if row.any() else layer.compiled(claims, t)[0]
            yield t, cc, at[which.ravel() == i]


def fits(layer: DeviceLayer, arrays: Arrays, slot_type: np.ndarray, claims: tuple[Claim, ...],
         slots: np.ndarray, tainted: np.ndarray | None = None) -> np.ndarray:
    """Per slot: can its node allocate the claims now?"""
    out = np.zeros(len(slots), bool)
    for t, cc, at in _groups(layer, slot_type, tainted, claims, slots):
        out[at] = allocate(cc, layer.devices[t], layer.view(*arrays, t), slots[at])[0]
    return out


def allocation(layer: DeviceLayer, arrays: Arrays, t: int, claims: tuple[Claim, ...], n: int,
               tainted: np.ndarray | None = None) -> ClaimedGpus:
    """The devices the claims get on node n (of type t), first fit as upstream; its GPUs as
    the pod's GPU array. The node must fit."""
    cc, milli = layer.compiled(claims, t)
    if tainted is not None and tainted[n].any():
        cc = layer.compiled_tainted(claims, t, tainted[n])
    ok, found = allocate(cc, layer.devices[t], layer.view(*arrays, t), np.array([n], np.int64))
    assert ok[0], "the claims fit the node they are allocated on"
    opts, picks = found.opts[0], found.picks[0]
    opt = np.repeat(opts, picks.shape[1])
    dev = picks.ravel()
    pairs = np.stack([opt[dev >= 0], dev[dev >= 0]], axis=1)
    gpus = layer.gpu_index[t][pairs[:, 1]]
    out = gpus[gpus >= 0].view(ClaimedGpus)
    out.compiled, out.pairs = cc, pairs
    return out


def fit_counts(layer: DeviceLayer, arrays: Arrays, slot_type: np.ndarray, claims: tuple[Claim, ...],
               slots: np.ndarray, bound: np.ndarray, tainted: np.ndarray | None = None) -> np.ndarray:
    """How many pods with these claims each slot's node takes one after another (at most
    `bound`, what its CPU and memory allow): allocated and kept on a scratch copy, round by
    round over the nodes still taking more."""
    out = np.zeros(len(slots), np.int64)
    for t, cc, at in _groups(layer, slot_type, tainted, claims, slots):
        scratch = tuple(a[slots[at]].copy() for a in arrays)
        out[at] = _rounds(layer, scratch, t, claims, cc, bound[at])[0]
    return out


def take_alike(layer: DeviceLayer, arrays: Arrays, slot_type: np.ndarray, claims: tuple[Claim, ...],
               slots: np.ndarray, counts: np.ndarray, n_gpus: int,
               tainted: np.ndarray | None = None) -> tuple[np.ndarray, tuple]:
    """Allocate counts[i] pods with these claims on slots[i] (distinct), one after another:
    the GPU milli they take (len(slots) x GPUs, for the GPU matrix) and the slots' rows of the
    arrays after (for the caller to write once it saved the rows before)."""
    taken = np.zeros((len(slots), n_gpus), np.int64)
    after = tuple(a[slots].copy() for a in arrays)
    for t, cc, at in _groups(layer, slot_type, tainted, claims, slots):
        sub = tuple(a[at] for a in after)
        got, taken[at] = _rounds(layer, sub, t, claims, cc, counts[at], n_gpus)
        assert (got == counts[at]).all(), "as many pods as counted fit"
        for a, s in zip(after, sub, strict=True):
            a[at] = s
    return taken, after


def _rounds(layer: DeviceLayer, arrays: Arrays, t: int, claims: tuple[Claim, ...], cc: CompiledClaims,
            bound: np.ndarray, n_gpus: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows 0.. of `arrays` (one per node of type t) take pods with the claims (compiled as
    `cc` for these nodes), each node up to its bound, kept: how many each took, and the GPU
    milli they took there (rows x n_gpus)."""
    milli = layer.compiled(claims, t)[1]
    dev, state = layer.devices[t], layer.view(*arrays, t)
    got = np.zeros(len(bound), np.int64)
    gpu_milli = np.zeros((len(bound), n_gpus), np.int64)
    alive = np.flatnonzero(bound > 0)
    while len(alive):
        ok, found = allocate(cc, dev, state, alive)
        alive = alive[ok]
        if not len(alive):
            break
        picks, opts = found.picks[ok], found.opts[ok]
        commit_rows(cc, dev, state, alive, picks, opts)
        got[alive] += 1
        if n_gpus:
            opt = np.repeat(opts, picks.shape[2], axis=1).reshape(picks.shape)
            d = np.where(picks >= 0, picks, 0)
            g = np.where(picks >= 0, layer.gpu_index[t][d], -1)
            m = milli[opt, d]
            row = np.repeat(alive, picks.shape[1] * picks.shape[2]).reshape(picks.shape)
            on = g >= 0
            np.add.at(gpu_milli, (row[on], g[on]), m[on])
        alive = alive[got[alive] < bound[alive]]
    return got, gpu_milli
