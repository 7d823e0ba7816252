"""Feasibility filters: which nodes could take a pod now, as one boolean mask over node slots.

Reads only per-node summary arrays, never the node x GPU matrix (see `harness.state`).
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numba import njit

from harness import packer
from harness.dra import layer as dra_layer
from harness.dra.allocator import FitCache, TypedClaims, cached_answer
from harness.state import WHOLE, ClusterState
from harness.status import READY
from harness.workload import Workload

MOST_ALIKE = 4096  # pods of one shape a node is counted for, when neither CPU nor memory bounds them


def feasible(state: ClusterState, w: Workload, pod: int, usable: np.ndarray | None = None,
             at: np.ndarray | None = None) -> np.ndarray:
    """Mask of ready (or `usable`) nodes with room for pod: resources, GPU model, shares
    per device, partition profile and topology claims (NVLink, NUMA, NIC per GPU), on a
    pool whose taints the pod tolerates (`Cluster.untolerated`), within the nodes an
    admission layer keeps it to (`Workload.placement`); the checks are `pod_rule`'s.
    With `at` (slot indices, or one slot), the mask covers only those slots (or is one
    bool): a check of a few nodes costs O(len(at)), not O(all slots)."""
    claims = claims_of(w, pod)
    if claims is not None:
        return _claims_feasible(state, w, pod, claims, usable, at)
    cpu, mem, static, column, need = pod_rule(state, w, pod)
    base = (state.status == READY) if usable is None else usable
    if at is None:
        return fit_mask(base, state.cpu_free, state.mem_free, static, column, cpu, mem, need)
    return (base[at] & static[at] & (state.cpu_free[at] >= cpu) & (state.mem_free[at] >= mem)
            & (column[at] >= need))


def claims_of(w: Workload, pod: int) -> tuple | None:
    """The claims pod runs by in this view (None: its device columns)."""
    if w.claim is None or w.claim[pod] < 0:
        return None
    return w.claim_sets[w.claim[pod]]


def _devices(state: ClusterState) -> dra_layer.DeviceLayer:
    assert state.dra is not None, "a pod has claims only in a DRA cluster"
    return state.dra


def _claims_feasible(state: ClusterState, w: Workload, pod: int, claims: tuple, usable: np.ndarray | None,
                     at: np.ndarray | None) -> np.ndarray:
    """`feasible` for a pod with claims: CPU, memory, taints and placement as for any pod, then
    the structured allocator on the nodes that pass (DynamicResources' Filter)."""
    if at is not None and np.ndim(at) == 0:
        return cast(np.ndarray, _claims_feasible_at(state, w, pod, claims, usable, int(at)))  # one bool, as `ok[0]`
    base = (state.status == READY) if usable is None else usable
    slots = np.arange(state.n_slots) if at is None else np.atleast_1d(np.asarray(at, np.int64))
    ok = dra_layer.feasible(_devices(state), state.device_arrays, state.dra_stamp, state.dra_type, claims, slots, base,
                            _claims_static(state, w, pod), state.cpu_free, state.mem_free, int(w.cpu[pod]),
                            int(w.mem[pod]), state.device_taints)
    return ok if at is None or np.ndim(at) else ok[0]


def _claims_feasible_at(state: ClusterState, w: Workload, pod: int, claims: tuple, usable: np.ndarray | None,
                        n: int) -> bool:
    """`_claims_feasible` on one slot, as the compiled pass checks it (`allocator.passes`, then
    the claims' stamp cache), in Python: the compiled search runs only where the cache does not
    know the node's allocation state, since a compiled call of ~30 arguments costs several
    times these few reads."""
    usable_n = state.status[n] == READY if usable is None else usable[n]
    if not (usable_n & _claims_static(state, w, pod)[n] & (state.cpu_free[n] >= int(w.cpu[pod]))
            & (state.mem_free[n] >= int(w.mem[pod]))):
        return False
    devices = _devices(state)
    known = cached_answer(*devices.typed(claims), state.dra_stamp, state.dra_type, n)
    if known >= 0:
        return known == 1
    return bool(dra_layer.feasible(devices, state.device_arrays, state.dra_stamp, state.dra_type, claims,
                                   np.array([n], np.int64), usable if usable is not None else state.status == READY,
                                   _claims_static(state, w, pod), state.cpu_free, state.mem_free, int(w.cpu[pod]),
                                   int(w.mem[pod]), state.device_taints)[0])


def claims_rule(state: ClusterState, w: Workload, pod: int,
                claims: tuple) -> tuple[TypedClaims, FitCache, np.ndarray, np.ndarray]:
    """What `feasible` checks a pod with claims by, for a compiled walk that checks node by node
    (`dra.allocator.passes`, then `dra.allocator.fits_rows`): the claims typed, their answers
    by node-state stamp, the static mask (`_claims_static`) and the device taints in force."""
    tc, cache = _devices(state).typed(claims)
    return tc, cache, _claims_static(state, w, pod), dra_layer.taint_marks(state.device_taints)


def _claims_static(state: ClusterState, w: Workload, pod: int) -> np.ndarray:
    """The static checks of a pod with claims: taints and placement (its devices are the claims')."""
    placement = int(w.placement[pod]) if len(state.allowed) > 1 else 0
    return state.pod_static(0, 0, False, placement, int(w.gpus[pod] > 0))


def pick_devices(state: ClusterState, w: Workload, pod: int, node: int) -> np.ndarray:
    """The devices pod gets on node: its claims' allocation (`dra.layer.ClaimedGpus`), else
    the GPUs `ClusterState.pick_devices` chooses by its columns."""
    claims = claims_of(w, pod)
    if claims is None:
        return state.pick_devices(node, int(w.gpus[pod]), int(w.milli[pod]), bool(w.nvlink[pod]), bool(w.numa[pod]))
    return _devices(state).allocated(state.device_arrays, state.dra_stamp, int(state.dra_type[node]), claims, node,
                                     state.device_taints)


def pod_rule(state: ClusterState, w: Workload, pod: int,
             claims: bool = True) -> tuple[int, int, np.ndarray, np.ndarray, int]:
    """The filter for one pod as one rule over per-node columns, which a compiled kernel checks
    node by node: a node fits when cpu_free >= cpu, mem_free >= mem, `static` is set (GPU model,
    partition profile, NIC per GPU, tolerated taints, the admission's placement: what never
    changes) and `column` >= need (the summary the pod's GPUs are checked against: the largest
    free share for a share, whole GPUs free in the best domain it claims, or free whole GPUs).
    claims=False: the rule with its topology claims (NVLink, NUMA, NIC) ignored. Pods of one
    shape share it (`Workload.rules`)."""
    key = int(w.shape[pod]) * 2 + claims
    rule = w.rules.get(key)
    if rule is None:
        rule = w.rules[key] = _rule_of(w, pod, claims)
    cpu, mem, (models, profile, nic, placement, taints), column, need = rule
    if len(state.allowed) == 1:  # no placement registered: every pod may go anywhere
        placement = 0
    return cpu, mem, state.pod_static(models, profile, nic, placement, taints), getattr(state, column), need


def _rule_of(w: Workload, pod: int, claims: bool) -> tuple:
    """`pod_rule` with the state left out: (cpu, mem, `ClusterState.pod_static`'s arguments,
    the name of the summary column, need)."""
    k, milli, placement = int(w.gpus[pod]), int(w.milli[pod]), int(w.placement[pod])
    if k == 0:
        return int(w.cpu[pod]), int(w.mem[pod]), (0, 0, False, placement, 0), "free_whole", 0  # >= 0: any node
    nvlink, numa = claims and bool(w.nvlink[pod]), claims and bool(w.numa[pod])
    static = (int(w.model_mask[pod]), int(w.profile_bit[pod]), claims and bool(w.nic[pod]), placement, 1)
    if milli < WHOLE:
        column, need = "max_share", milli
    elif nvlink and numa:
        column, need = "both_whole", k
    elif nvlink:
        column, need = "nvl_whole", k
    elif numa:
        column, need = "numa_whole", k
    else:
        column, need = "free_whole", k
    return int(w.cpu[pod]), int(w.mem[pod]), static, column, need


@njit(cache=True)
def fit_mask(base: np.ndarray, cpu_free: np.ndarray, mem_free: np.ndarray, static: np.ndarray,
             column: np.ndarray, cpu: int, mem: int, need: int) -> np.ndarray:
    """`pod_rule` checked on every node in one pass (numpy took one pass per check)."""
    out = np.empty(len(base), np.bool_)
    for n in range(len(base)):
        out[n] = packer.fits_rule(n, base, cpu_free, mem_free, cpu, mem, static, column, need)
    return out


def groups_that_fit(state: ClusterState, w: Workload, pods: np.ndarray, mask: np.ndarray,
                    groups: np.ndarray) -> np.ndarray:
    """Racks or blocks (values of `groups`, in increasing order) that may hold the gang: for a
    gang of one pod shape, those whose nodes can together take the gang's size (`fits_on`,
    exact); otherwise those where its first pod fits. Prunes groups before a trial placement."""
    nodes = np.flatnonzero(feasible(state, w, int(pods[0]), mask))
    if (w.shape[pods] != w.shape[pods[0]]).any():
        return np.flatnonzero(np.bincount(groups[nodes]))  # group ids are small non-negative ints
    if len(nodes) == 0:
        return nodes
    total = np.bincount(groups[nodes], weights=np.minimum(fits_on(state, w, int(pods[0]), nodes), len(pods)))
    return np.flatnonzero(total >= len(pods))


def fits_count(state: ClusterState, w: Workload, pod: int, mask: np.ndarray) -> np.ndarray:
    """Exactly how many pods shaped like `pod` each node can still take one after another
    (0 where `mask` or the filter says no): the least of the CPU, memory and GPU bounds. The
    GPU bound is exact for every pod kind, whatever devices each pod picks: whole GPUs without
    a domain claim free_whole // gpus; with an NVLink/NUMA claim the sum over domains of
    (whole GPUs free in it) // gpus, as each pod takes its GPUs from one domain; a share or
    partition the sum over devices of free milli // milli, as each pod takes one device."""
    nodes = np.flatnonzero(feasible(state, w, pod, mask))
    out = np.zeros(state.n_slots, np.int64)
    out[nodes] = fits_on(state, w, pod, nodes)
    return out


def first_feasible(state: ClusterState, w: Workload, pod: int, mask: np.ndarray, k: int) -> np.ndarray:
    """The first k `mask` nodes (in slot order) that `feasible` passes, found by a walk that
    stops at the k-th: `np.flatnonzero(feasible(state, w, pod, mask))[:k]` without the mask."""
    if claims_of(w, pod) is not None:
        return np.flatnonzero(feasible(state, w, pod, mask))[:k]
    cpu, mem, static, column, need = pod_rule(state, w, pod)
    return packer.first_feasible(mask, state.cpu_free, state.mem_free, cpu, mem, static, column, need, k)


def first_fit(state: ClusterState, w: Workload, pod: int, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Where k pods shaped like `pod` go first fit over the `mask` nodes in slot order, without
    binding them: the lowest-index feasible node takes all it can (`fits_on`), then the next.
    Returns the nodes that take some and how many each takes (in all at most k)."""
    claims = claims_of(w, pod)
    if claims is not None:
        return _claims_first_fit(state, w, pod, claims, mask, k)
    _, _, static, column, need = pod_rule(state, w, pod)
    return packer.first_fit(mask, static, column, need, k, *shape_of(w, pod), state.cpu_free, state.mem_free,
                            state.gpu_free, state.free_whole, state.slot_type, domains_of(state, w, pod))


def _claims_first_fit(state: ClusterState, w: Workload, pod: int, claims: tuple, mask: np.ndarray,
                      k: int) -> tuple[np.ndarray, np.ndarray]:
    """`first_fit` for a pod with claims: the filter and the count (`fits_on`) in one walk."""
    return dra_layer.first_fit(_devices(state), state.device_arrays, state.dra_stamp, state.dra_type, claims, mask,
                               _claims_static(state, w, pod), state.cpu_free, state.mem_free, int(w.cpu[pod]),
                               int(w.mem[pod]), MOST_ALIKE, k, state.device_taints)


def fits_on(state: ClusterState, w: Workload, pod: int, nodes: np.ndarray) -> np.ndarray:
    """`fits_count` on the given nodes, which the filter passed (each can take one or more)."""
    claims = claims_of(w, pod)
    if claims is not None:
        nodes = np.asarray(nodes, np.int64)
        cpu, mem = int(w.cpu[pod]), int(w.mem[pod])
        bound = np.minimum(state.cpu_free[nodes] // cpu if cpu else MOST_ALIKE,
                           state.mem_free[nodes] // mem if mem else MOST_ALIKE)
        return dra_layer.fit_counts(_devices(state), state.device_arrays, state.dra_stamp, state.dra_type, claims,
                                    nodes, np.minimum(bound, MOST_ALIKE), state.device_taints)
    return packer.fits_on(np.asarray(nodes, np.int64), *shape_of(w, pod), state.cpu_free, state.mem_free,
                          state.gpu_free, state.free_whole, state.slot_type, domains_of(state, w, pod))


def devices_taken(state: ClusterState, w: Workload, pod: int, nodes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """GPU milli (nodes x GPUs) that counts[i] pods shaped like `pod` take on nodes[i] when
    bound one after another with `ClusterState.pick_devices`, node by node (counts within
    `fits_count`). Whole GPUs: the first free ones in index order, or with a domain claim the
    domains in id order, each filled before the next (the first domain with room stays first
    until full). Shares: pick_devices' best fit keeps choosing the same device until it is too
    full, so devices fill in order of (free milli, index)."""
    _, _, gpus, milli, kind = shape_of(w, pod)
    return packer.devices_taken(np.asarray(nodes, np.int64), np.asarray(counts, np.int64), gpus, milli, kind,
                                state.gpu_free, state.slot_type, domains_of(state, w, pod))


def bind_alike(state: ClusterState, w: Workload, pod: int, nodes: np.ndarray, counts: np.ndarray) -> None:
    """Bind counts[i] pods shaped like `pod` on nodes[i] at once (what-if packing), each taking
    the devices binding them one by one would: `ClusterState.bind_many` with `devices_taken`,
    or for a pod with claims the allocator's, round by round."""
    claims = claims_of(w, pod)
    nodes, counts = np.asarray(nodes, np.int64), np.asarray(counts, np.int64)
    if claims is None:
        state.bind_many(nodes, counts, int(w.cpu[pod]), int(w.mem[pod]), devices_taken(state, w, pod, nodes, counts))
        return
    state.bind_claims_alike(nodes, counts, int(w.cpu[pod]), int(w.mem[pod]), claims)


def first_fit_bind(state: ClusterState, w: Workload, pod: int, mask: np.ndarray, k: int,
                   slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`first_fit` then `bind_alike` on the nodes it picks: the nodes and how many each took. A
    pod with claims outside a trial takes one compiled call for both (`ClusterState.fit_claims_alike`,
    which walks `slots`, the mask's slots where the caller keeps them, in the order given: a
    first fit over tiers of nodes, each in slot order, in one walk)."""
    claims = claims_of(w, pod)
    if claims is not None and not state.in_trial:
        return state.fit_claims_alike(mask, _claims_static(state, w, pod), int(w.cpu[pod]), int(w.mem[pod]), claims,
                                      MOST_ALIKE, k, slots)
    nodes, got = first_fit(state, w, pod, mask, k)
    if len(nodes):
        bind_alike(state, w, pod, nodes, got)
    return nodes, got


def shape_of(w: Workload, pod: int) -> tuple[int, int, int, int, int]:
    """The pod as the packer's kernels take it: (cpu, mem, gpus, milli, kind of GPU request)."""
    gpus, milli = int(w.gpus[pod]), int(w.milli[pod])
    kind = (packer.NO_GPU if gpus == 0 else packer.SHARE if milli < WHOLE
            else packer.DOMAIN if w.nvlink[pod] or w.numa[pod] else packer.WHOLE_GPUS)
    return int(w.cpu[pod]), int(w.mem[pod]), gpus, milli, kind


def domains_of(state: ClusterState, w: Workload, pod: int) -> np.ndarray:
    """Node type x GPU: the domain ids of the pod's claim, as `ClusterState.pick_devices`
    numbers them (NVLink, NUMA, or their intersection; NVLink's when it claims none)."""
    nvlink, numa = bool(w.nvlink[pod]), bool(w.numa[pod])
    return state.gpu_both if nvlink and numa else state.gpu_numa if numa else state.gpu_nvl
