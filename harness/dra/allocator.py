"""The structured allocator, vectorized over nodes: can a pod's claims be allocated on each of
these nodes, and with which devices.

As upstream's allocator (k8s.io/dynamic-resource-allocation/structured) it takes the claims'
requests in order and, for each, the devices in the order the node publishes them, a device
taken only if it matches the request's class and selectors, is free (or, multi-allocatable,
has the capacity asked left), its counters fit what its slice's shared counters have left, and
it agrees with every matchAttribute constraint on the request; where a later request cannot be
met, it backtracks to the last choice. A request's `firstAvailable` alternatives are tried in
order; `All` takes every matching device of the node, all of them free.

What does not change during a run (which devices match which request, what each capacity
request rounds to, the constraint attribute values) is compiled once per node type and claim
set (`compile_claims`); the search itself, which visits one node's devices at a time, is
compiled (numba, `_search`). A node's allocation state is three arrays of `DeviceState`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from harness.dra.cel import SelectorError, compile_selector
from harness.dra.resources import (
    ALL,
    NO_EXECUTE,
    NO_SCHEDULE,
    Claim,
    Device,
    DeviceClass,
    DeviceRequest,
    RequestPolicy,
    ResourceSlice,
    check_pools,
    qualified,
)
from harness.errors import ConfigError

MAX_RESULTS = 32  # devices one claim may be allocated (upstream's AllocationResultsMaxSize)
NO_MARKS = np.zeros((0, 0), np.int64)  # device taint marks of no node: no taints configured


@dataclass(frozen=True)
class NodeDevices:
    """What one node type publishes, flattened in publishing order (slices, then devices)."""

    slices: tuple[ResourceSlice, ...]
    drivers: tuple[str, ...]  # per device
    names: tuple[str, ...]  # per device, "driver/pool/device" as an allocation result names it
    counters: tuple[tuple[str, str, str], ...]  # ("driver/pool", counter set, counter) per counter column
    counter_cap: np.ndarray  # (K,) milli-units each shared counter holds
    consumes: np.ndarray  # (D, K) what each device draws on them
    multi: np.ndarray  # (D,) allowMultipleAllocations
    capacities: tuple[str, ...]  # capacity column names
    capacity: np.ndarray  # (D, Q) milli-units (0: absent)

    @classmethod
    def of(cls, slices: tuple[ResourceSlice, ...]) -> NodeDevices:
        devices = [(s, d) for s in slices for d in s.devices]
        check_pools(slices, lambda s: f"ResourceSlice {s.name!r}")
        counters = tuple(dict.fromkeys((f"{s.driver}/{s.pool}", cset, c) for s in slices
                                       for cset, cs in s.shared_counters.items() for c in cs))
        capacities = tuple(sorted({k for _, d in devices for k in d.capacity}))
        cap_of = {(f"{s.driver}/{s.pool}", cset, c): v for s in slices for cset, cs in s.shared_counters.items()
                  for c, v in cs.items()}
        consumes = np.zeros((len(devices), len(counters)), np.int64)
        capacity = np.zeros((len(devices), len(capacities)), np.int64)
        for i, (s, d) in enumerate(devices):
            for cset, cs in d.consumes.items():
                for c, v in cs.items():
                    consumes[i, counters.index((f"{s.driver}/{s.pool}", cset, c))] = v
            for q, v in d.capacity.items():
                capacity[i, capacities.index(q)] = v
        return cls(slices, tuple(s.driver for s, _ in devices), tuple(f"{s.driver}/{s.pool}/{d.name}"
                                                                      for s, d in devices),
                   counters, np.array([cap_of[k] for k in counters], np.int64), consumes,
                   np.array([d.multi for _, d in devices], bool), capacities, capacity)

    @property
    def n_devices(self) -> int:
        return len(self.drivers)

    @property
    def items(self) -> tuple[Device, ...]:
        return tuple(d for s in self.slices for d in s.devices)


@dataclass
class DeviceState:
    """The allocation state of nodes of one type: devices taken whole, capacity left on the
    multi-allocatable ones, counters left (rows: nodes)."""

    taken: np.ndarray  # (N, D) bool
    cap_left: np.ndarray  # (N, D, Q) int64
    counter_left: np.ndarray  # (N, K) int64

    @classmethod
    def fresh(cls, devices: NodeDevices, n: int) -> DeviceState:
        return cls(np.zeros((n, devices.n_devices), bool),
                   np.repeat(devices.capacity[None], n, axis=0).copy(),
                   np.repeat(devices.counter_cap[None], n, axis=0).copy())


@dataclass(frozen=True)
class CompiledClaims:
    """A pod's claims against one node type: its requests' alternatives as arrays."""

    requests: tuple[str, ...]  # "claim/request" per request
    options: tuple[str, ...]  # the alternative each option is ("claim/request" or ".../sub")
    opt_start: np.ndarray  # (R,) first option of each request
    opt_end: np.ndarray  # (R,)
    match: np.ndarray  # (O, D) the device matches the option's class, selectors and capacity asked
    members: np.ndarray  # (O, D) the matching devices, ascending (-1 padded): what the search visits
    before: np.ndarray  # (O, D + 1) matching devices below each index: where in `members` a search resumes
    need: np.ndarray  # (O,) devices the option takes (All: every matching one)
    take_cap: np.ndarray  # (O, D, Q) capacity taken from a multi-allocatable device
    con_value: np.ndarray  # (C, D) code of the constraint's attribute on each device (-1: none)
    con_req: np.ndarray  # (C, O) the constraint binds the option (a request names all its alternatives)
    req_claim: np.ndarray  # (R,) the claim each request belongs to
    rest_min: np.ndarray  # (R,) the fewest devices the claim's later requests can take
    error: str = ""  # a selector's evaluation error on a device: no node of the type can allocate


def _rounded(asked: int | None, capacity: int, policy: RequestPolicy | None) -> int:
    """What a capacity request takes of a multi-allocatable device (KEP-5075): the policy's
    default if none is asked (the whole capacity without a policy), rounded up to a valid value
    or step; -1 where no valid amount covers it."""
    if asked is None:
        return policy.default if policy and policy.default is not None else capacity
    if policy is None:
        return asked
    if policy.valid_values:
        fits = [v for v in policy.valid_values if v >= asked]
        return fits[0] if fits else -1
    low = policy.valid_min if policy.valid_min is not None else 0
    amount = max(asked, low)
    if policy.step:
        amount = low + -(-(amount - low) // policy.step) * policy.step
    return -1 if policy.valid_max is not None and amount > policy.valid_max else amount


def _matches(devices: NodeDevices, req: DeviceRequest, classes: dict[str, DeviceClass], where: str):
    """Per device: the class's and the request's selectors hold (SelectorError if one errs)."""
    if req.device_class not in classes:
        raise ConfigError(f"{where}.deviceClassName", f"no DeviceClass {req.device_class!r}")
    selectors = [compile_selector(t, f"DeviceClass {req.device_class!r}") for t in classes[req.device_class].selectors]
    selectors += [compile_selector(t, where) for t in req.selectors]
    out = np.ones(devices.n_devices, bool)
    for i, (dev, driver) in enumerate(zip(devices.items, devices.drivers, strict=True)):
        for s in selectors:
            if not s.matches(dev, driver):
                out[i] = False
                break
        tolerated = all(t.effect not in (NO_SCHEDULE, NO_EXECUTE) or any(tol.tolerates(t) for tol in req.tolerations)
                        for t in dev.taints)
        out[i] &= tolerated
    return out


def compile_claims(claims: tuple[Claim, ...], devices: NodeDevices, classes: dict[str, DeviceClass]) -> CompiledClaims:
    """The arrays `allocate` searches with, for these claims on nodes publishing `devices`."""
    D, Q = devices.n_devices, len(devices.capacities)
    requests: list[str] = []
    options: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    match: list[np.ndarray] = []
    need: list[int] = []
    take: list[np.ndarray] = []
    constraints: list[tuple[str, set[int]]] = []
    req_claim: list[int] = []
    error = ""
    for ci, c in enumerate(claims):
        bound_by: dict[str, set[int]] = {}  # a request's name, or "request/alternative", -> its options
        for r in c.requests:
            starts.append(len(options))
            bound_by[r.name] = set(range(len(options), len(options) + len(r.first_available or (r,))))
            for k, alt in enumerate(r.first_available):
                bound_by[f"{r.name}/{alt.name}"] = {len(options) + k}
            for alt in (r.first_available or (r,)):
                where = f"claim {c.name!r} request {r.name!r}"
                try:
                    m = _matches(devices, alt, classes, where)
                except SelectorError as e:
                    error, m = f"claim {c.name!r}: {e}", np.zeros(D, bool)
                t = np.zeros((D, Q), np.int64)
                for i, (dev, driver) in enumerate(zip(devices.items, devices.drivers, strict=True)):
                    asked_of = {qualified(k, driver): v for k, v in alt.capacity.items()}  # the device's domain
                    for q, name in enumerate(devices.capacities):
                        asked = asked_of.get(name)
                        if not dev.multi:
                            m[i] &= asked is None or asked <= devices.capacity[i, q]
                            continue
                        amount = _rounded(asked, int(devices.capacity[i, q]), dev.policies.get(name))
                        m[i] &= 0 <= amount <= devices.capacity[i, q]
                        t[i, q] = max(amount, 0)
                    m[i] &= not (set(asked_of) - set(dev.capacity))
                options.append(f"{c.name}/{r.name}" + (f"/{alt.name}" if r.first_available else ""))
                match.append(m)
                need.append(int(m.sum()) if alt.mode == ALL else alt.count)
                take.append(t)
            ends.append(len(options))
            requests.append(f"{c.name}/{r.name}")
            req_claim.append(ci)
        for con in c.constraints:
            bound = set().union(*(bound_by[name] for name in (con.requests or [q.name for q in c.requests])))
            constraints.append((con.match_attribute, bound))
    codes: dict[object, int] = {}
    con_value = np.full((len(constraints), D), -1, np.int64)
    for k, (attr, _) in enumerate(constraints):
        for i, dev in enumerate(devices.items):
            v = dev.attributes.get(attr)
            if v is not None:
                con_value[k, i] = codes.setdefault((type(v).__name__, v), len(codes))
    con_req = np.zeros((len(constraints), len(options)), bool)
    for k, (_, bound) in enumerate(constraints):
        con_req[k, sorted(bound)] = True
    need_arr = np.array(need, np.int64)
    if any(n == 0 for n in need):  # All with no matching device: nothing to allocate, not allocatable
        need_arr[need_arr == 0] = D + 1
    match_arr = np.array(match, bool).reshape(len(options), D)
    fewest = np.array([need_arr[a:b].min() for a, b in zip(starts, ends, strict=True)], np.int64)
    claim_of = np.array(req_claim, np.int64)
    rest_min = np.array([fewest[r + 1:][claim_of[r + 1:] == claim_of[r]].sum() for r in range(len(starts))], np.int64)
    members, before = _visited(match_arr)
    return CompiledClaims(tuple(requests), tuple(options), np.array(starts, np.int64), np.array(ends, np.int64),
                          match_arr, members, before, need_arr,
                          np.array(take, np.int64).reshape(len(options), D, Q), con_value, con_req,
                          claim_of, rest_min, error)


def _visited(match: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the search visits per option: the matching devices ascending (-1 padded), and how
    many match below each index."""
    before = np.zeros((match.shape[0], match.shape[1] + 1), np.int64)
    before[:, 1:] = np.cumsum(match, axis=1)
    members = np.full(match.shape, -1, np.int64)
    for o in range(match.shape[0]):
        found = np.flatnonzero(match[o])
        members[o, :len(found)] = found
    return members, before


def without(cc: CompiledClaims, blocked: np.ndarray) -> CompiledClaims:
    """The claims with the (option, device) pairs of `blocked` no longer matching (a device
    taint the option does not tolerate, on one node). What an option needs is unchanged, so
    `All` over a blocked device fails, as upstream's allocateDevice refuses it."""
    match = cc.match & ~blocked
    members, before = _visited(match)
    return replace(cc, match=match, members=members, before=before)


@njit(cache=True, inline="always")
def _fits(d, o, taken, cap_left, counter_left, match, take_cap, consumes, multi, con_value, con_req, con_n, con_v):
    """Device d can serve option o now. Conditions of `|` and `&`, not `or` and `and`: inlined
    into every device scan, numba compiles short-circuit ones several times slower."""
    if (not match[o, d]) | (taken[d] & (not multi[d])):
        return False
    if multi[d]:
        for q in range(cap_left.shape[1]):
            if cap_left[d, q] < take_cap[o, d, q]:
                return False
    if not (multi[d] & taken[d]):  # a shared device draws its counters on its first allocation only
        for k in range(len(counter_left)):
            if counter_left[k] < consumes[d, k]:
                return False
    for c in range(len(con_n)):
        if con_req[c, o] & ((con_value[c, d] < 0) | ((con_n[c] > 0) & (con_value[c, d] != con_v[c]))):
            return False
    return True


@njit(cache=True, inline="always")
def _take(d, o, sign, taken, cap_left, cap_full, counter_left, take_cap, consumes, multi, con_value, con_req, con_n,
          con_v):
    """Device d taken for (sign 1) or given back from (-1) option o. A multi-allocatable device
    is `taken` while any allocation holds it: it draws its counters on the first and gives them
    back when its capacity is whole again."""
    draw = True
    if multi[d]:
        for q in range(cap_left.shape[1]):
            cap_left[d, q] -= sign * take_cap[o, d, q]
        if sign > 0:
            draw = not taken[d]
            taken[d] = True
        else:
            for q in range(cap_left.shape[1]):
                if cap_left[d, q] != cap_full[d, q]:
                    draw = False
            if draw:
                taken[d] = False
    else:
        taken[d] = sign > 0
    if draw:
        for k in range(len(counter_left)):
            counter_left[k] -= sign * consumes[d, k]
    for c in range(len(con_n)):
        if con_req[c, o]:
            con_n[c] += sign
            con_v[c] = con_value[c, d]


@njit(cache=True)
def _search(taken, cap_left, cap_full, counter_left, opt_start, opt_end, match, members, before, need, take_cap,
            consumes, multi, con_value, con_req, req_claim, rest_min, limit, claim_used, con_n, con_v, picks, opt):
    """Depth-first over the requests in order, each request's devices in publishing order
    (ascending, so a set of devices is tried once), backtracking to the last choice where a
    request cannot be met. State arrays are this node's, updated in place while searching and
    restored on failure; on success `picks[r, j]` are the devices of request r, `opt[r]` its
    alternative. An alternative that would give its claim more than `limit` devices, counting
    the fewest its later requests take, is not tried (upstream's AllocationResultsMaxSize).
    Returns whether an allocation exists."""
    R, D = len(opt_start), match.shape[1]
    if R == 0:
        return True
    con_n[:] = 0
    claim_used[:] = 0
    r, j, cursor = 0, 0, 0
    opt[0] = opt_start[0]
    while True:
        if r == R:
            return True
        o = opt[r]
        if j == need[o]:
            claim_used[req_claim[r]] += need[o]
            r += 1
            j, cursor = 0, 0
            if r < R:
                opt[r] = opt_start[r]
            continue
        found = -1
        # too few matching devices are left to try, or the claim would get too many
        if (before[o, D] - before[o, cursor] >= need[o] - j
                and (j > 0 or claim_used[req_claim[r]] + need[o] + rest_min[r] <= limit)):
            for p in range(before[o, cursor], before[o, D]):
                d = members[o, p]
                if _fits(d, o, taken, cap_left, counter_left, match, take_cap, consumes, multi, con_value,
                         con_req, con_n, con_v):
                    found = d
                    break
        if found >= 0:
            _take(found, o, 1, taken, cap_left, cap_full, counter_left, take_cap, consumes, multi, con_value, con_req,
                  con_n, con_v)
            picks[r, j] = found
            j += 1
            cursor = found + 1
            continue
        # backtrack: give back the last device taken (in this request, else in the one before)
        if j == 0:
            if opt[r] + 1 < opt_end[r]:
                opt[r] += 1
                cursor = 0
                continue
            if r == 0:
                return False
            r -= 1
            j = need[opt[r]]
            claim_used[req_claim[r]] -= j
        j -= 1
        d = picks[r, j]
        picks[r, j] = -1
        _take(d, opt[r], -1, taken, cap_left, cap_full, counter_left, take_cap, consumes, multi, con_value, con_req,
              con_n, con_v)
        cursor = d + 1


@njit(cache=True)
def _allocate_nodes(rows, taken, cap_left, cap_full, counter_left, opt_start, opt_end, match, members, before,
                    need, take_cap, consumes, multi, con_value, con_req, req_claim, rest_min, limit, width):
    """`_search` on each node of `rows`; the state is left as it was. Returns feasibility, the
    devices (padded with -1) and the alternative of each request, per node."""
    R, C = len(opt_start), con_value.shape[0]
    ok = np.zeros(len(rows), np.bool_)
    picks = np.full((len(rows), R, width), -1, np.int64)
    opts = np.full((len(rows), R), -1, np.int64)
    t, cl, kl = np.empty_like(taken[0]), np.empty_like(cap_left[0]), np.empty_like(counter_left[0])
    con_n, con_v = np.zeros(C, np.int64), np.zeros(C, np.int64)
    claim_used = np.zeros(req_claim.max() + 1 if R else 1, np.int64)
    for i in range(len(rows)):
        n = rows[i]
        t[:] = taken[n]
        cl[:] = cap_left[n]
        kl[:] = counter_left[n]
        ok[i] = _search(t, cl, cap_full, kl, opt_start, opt_end, match, members, before, need, take_cap, consumes,
                        multi, con_value, con_req, req_claim, rest_min, limit, claim_used, con_n, con_v, picks[i],
                        opts[i])
    return ok, picks, opts


@dataclass(frozen=True)
class TypedClaims:
    """A pod's claims compiled against every node type at once, each type's arrays padded to
    the widest type's devices, capacities and counters (padding matches nothing and holds
    nothing), so that one compiled call answers nodes of any type: per-type calls cost a
    dispatch and a dozen numpy calls each, more than most searches."""

    never: np.ndarray  # (T,) no node of the type can allocate them (a selector errs, too few devices)
    opt_start: np.ndarray  # (R,) as CompiledClaims, the same on every type
    opt_end: np.ndarray  # (R,)
    req_claim: np.ndarray  # (R,)
    con_req: np.ndarray  # (C, O)
    match: np.ndarray  # (T, O, W) as CompiledClaims, per type
    members: np.ndarray  # (T, O, W)
    before: np.ndarray  # (T, O, W + 1)
    need: np.ndarray  # (T, O)
    take_cap: np.ndarray  # (T, O, W, Q)
    con_value: np.ndarray  # (T, C, W)
    rest_min: np.ndarray  # (T, R)
    capacity: np.ndarray  # (T, W, Q) as NodeDevices, per type
    consumes: np.ndarray  # (T, W, K)
    multi: np.ndarray  # (T, W)
    gpu_index: np.ndarray  # (T, W) the GPU each device is (-1: not a GPU)
    gpu_milli: np.ndarray  # (T, O, W) the GPU milli an option takes of each device
    tolerated: np.ndarray  # (O,) the device taints (bits of the taint catalogue) an option tolerates

    @classmethod
    def of(cls, compiled: list[CompiledClaims], devices: list[NodeDevices], gpu_index: list[np.ndarray],
           gpu_milli: list[np.ndarray], width: int, n_capacities: int, n_counters: int,
           tolerated: np.ndarray | None = None) -> TypedClaims:
        T, W, Q, K = len(compiled), width, n_capacities, n_counters
        P, R, C = compiled[0].match.shape[0], len(compiled[0].opt_start), compiled[0].con_value.shape[0]
        never = np.zeros(T, bool)
        match, members = np.zeros((T, P, W), bool), np.full((T, P, W), -1, np.int64)
        before, need = np.zeros((T, P, W + 1), np.int64), np.zeros((T, P), np.int64)
        take_cap, con_value = np.zeros((T, P, W, Q), np.int64), np.full((T, C, W), -1, np.int64)
        rest_min = np.zeros((T, R), np.int64)
        capacity, consumes = np.zeros((T, W, Q), np.int64), np.zeros((T, W, K), np.int64)
        multi, index, milli = np.zeros((T, W), bool), np.full((T, W), -1, np.int64), np.zeros((T, P, W), np.int64)
        for t, (cc, dev) in enumerate(zip(compiled, devices, strict=True)):
            D, q, k = dev.n_devices, len(dev.capacities), len(dev.counters)
            never[t] = bool(cc.error) or bool(R and (cc.need > D).all())
            match[t, :, :D], members[t, :, :D], need[t] = cc.match, cc.members, cc.need
            before[t, :, :D + 1] = cc.before
            before[t, :, D + 1:] = cc.before[:, D:]
            take_cap[t, :, :D, :q], con_value[t, :, :D], rest_min[t] = cc.take_cap, cc.con_value, cc.rest_min
            capacity[t, :D, :q], consumes[t, :D, :k], multi[t, :D] = dev.capacity, dev.consumes, dev.multi
            index[t, :D], milli[t, :, :D] = gpu_index[t], gpu_milli[t]
        first = compiled[0]
        return cls(never, first.opt_start, first.opt_end, first.req_claim, first.con_req, match, members, before,
                   need, take_cap, con_value, rest_min, capacity, consumes, multi, index, milli,
                   np.zeros(P, np.int64) if tolerated is None else np.asarray(tolerated, np.int64))


@dataclass(frozen=True)
class FitCache:
    """One claim set's answers by node-state stamp (a stamp names one content of a node's
    allocation state, so an answer holds wherever the stamp is found): direct-mapped, a
    bucket keeping the last stamp answered."""

    fit_key: np.ndarray  # (FIT_BUCKETS,) 1 + the stamp whose feasibility the bucket holds (0: none)
    fit: np.ndarray  # (FIT_BUCKETS,)
    count_key: np.ndarray  # (S,) the stamp whose count the bucket holds (-1: none); S a power of two
    count: np.ndarray  # (S,) pods the node took one after another
    full: np.ndarray  # (S,) the count stopped at its bound: more may fit

    @classmethod
    def empty(cls, size: int = 4096) -> FitCache:
        assert size > 0 and size & (size - 1) == 0, "a power of two: a stamp's count bucket is its low bits"
        return cls(np.zeros(FIT_BUCKETS, np.int64), np.zeros(FIT_BUCKETS, bool), np.full(size, -1, np.int64),
                   np.zeros(size, np.int64), np.zeros(size, bool))


#: buckets of a claim set's feasibility answers: a power of two (a stamp's bucket is its low
#: bits, `cached_fit`), and many more than the distinct node contents a walk meets (a few
#: thousand nodes), as two contents in one bucket are searched again at every walk. Keys are
#: kept as 1 + the stamp so that an empty cache is zeros: pages no answer was written to take
#: no memory (a claim set asked on few nodes costs little)
FIT_BUCKETS = 1 << 16


def feasible_typed(tc: TypedClaims, cache: FitCache, state: DeviceState, stamp: np.ndarray, slot_type: np.ndarray,
                   slots: np.ndarray, usable: np.ndarray, static: np.ndarray, cpu_free: np.ndarray,
                   mem_free: np.ndarray, cpu: int, mem: int, marks: np.ndarray = NO_MARKS) -> np.ndarray:
    """Per slot: the node is usable, passes the pod's static checks, has its CPU and memory,
    and can allocate the claims, in one compiled pass. `marks` (slots x devices, or no rows:
    no taints configured) are the device taints in force: device d of node n is no match for
    option o where `marks[n, d] & ~tc.tolerated[o]` (`without`)."""
    return _feasible_typed(np.asarray(slots, np.int64), usable, static, cpu_free, mem_free, cpu, mem, slot_type, stamp,
                           state.taken, state.cap_left, state.counter_left, cache.fit_key, cache.fit, tc.never,
                           tc.opt_start, tc.opt_end, tc.match, tc.members, tc.before, tc.need, tc.take_cap,
                           tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req, tc.req_claim, tc.rest_min,
                           marks, tc.tolerated, MAX_RESULTS)


def first_fit_typed(tc: TypedClaims, cache: FitCache, state: DeviceState, stamp: np.ndarray, slot_type: np.ndarray,
                    usable: np.ndarray, static: np.ndarray, cpu_free: np.ndarray, mem_free: np.ndarray, cpu: int,
                    mem: int, most: int, k: int, marks: np.ndarray = NO_MARKS) -> tuple[np.ndarray, np.ndarray]:
    """Where k pods with the claims go first fit over the nodes `feasible_typed` passes, in
    slot order: each node takes all it can (`count_typed`, bounded by its CPU and memory and
    `most`) until k are placed. Returns the nodes that take some and how many each takes."""
    return first_fit_kernel(np.flatnonzero(usable), usable, static, cpu_free, mem_free, cpu, mem, most, k, slot_type,
                            stamp, state.taken, state.cap_left, state.counter_left, cache.count_key, cache.count,
                            cache.full, tc.never, tc.opt_start, tc.opt_end, tc.match, tc.members, tc.before, tc.need,
                            tc.take_cap, tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req, tc.req_claim,
                            tc.rest_min, tc.gpu_index, tc.gpu_milli, marks, tc.tolerated, MAX_RESULTS)


def allocate_typed(tc: TypedClaims, state: DeviceState, t: int, n: int,
                   marks: np.ndarray = NO_MARKS) -> tuple[np.ndarray, np.ndarray]:
    """The devices the claims get on node n (of type t), first fit: (option, device) pairs in
    the order taken, and the GPUs among them in that order. The node must fit."""
    return _allocate_pairs(n, t, state.taken, state.cap_left, state.counter_left, tc.opt_start, tc.opt_end, tc.match,
                           tc.members, tc.before, tc.need, tc.take_cap, tc.capacity, tc.consumes, tc.multi,
                           tc.con_value, tc.con_req, tc.req_claim, tc.rest_min, tc.gpu_index, marks, tc.tolerated,
                           MAX_RESULTS)


def count_typed(tc: TypedClaims, cache: FitCache, state: DeviceState, stamp: np.ndarray, slot_type: np.ndarray,
                rows: np.ndarray, bound: np.ndarray, marks: np.ndarray = NO_MARKS) -> np.ndarray:
    """How many pods with the claims each node row takes one after another, at most bound[i]
    (`take_typed` on a copy of its state, or the count its stamp had: a count that stopped at
    a pod that did not fit holds for any bound, one that stopped at its bound for lower ones)."""
    return _count_typed(np.asarray(rows, np.int64), slot_type, stamp, state.taken, state.cap_left,
                        state.counter_left, np.asarray(bound, np.int64), cache.count_key, cache.count, cache.full,
                        tc.never, tc.opt_start, tc.opt_end, tc.match, tc.members, tc.before, tc.need, tc.take_cap,
                        tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req, tc.req_claim, tc.rest_min,
                        tc.gpu_index, tc.gpu_milli, marks, tc.tolerated, MAX_RESULTS)


def take_typed(tc: TypedClaims, state: DeviceState, row_type: np.ndarray, bound: np.ndarray,
               n_gpus: int, marks: np.ndarray = NO_MARKS) -> tuple[np.ndarray, np.ndarray]:
    """Rows 0.. of the padded state (row i a node of type row_type[i]) take pods with the
    claims one after another, each up to bound[i], kept: how many each took, and the GPU milli
    they took there (rows x n_gpus). Each node's pods are allocated first fit on its state
    after the ones before, as `allocate` then `commit` one at a time would."""
    milli = np.zeros((len(bound), n_gpus), np.int64)
    got = _take_typed(row_type, state.taken, state.cap_left, state.counter_left, np.asarray(bound, np.int64), milli,
                      tc.never, tc.opt_start, tc.opt_end, tc.match, tc.members, tc.before, tc.need, tc.take_cap,
                      tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req, tc.req_claim, tc.rest_min,
                      tc.gpu_index, tc.gpu_milli, marks, tc.tolerated, MAX_RESULTS)
    return got, milli


@dataclass(frozen=True)
class AlikeCache:
    """What-if binds of pods alike (`take_alike_typed`) by the node's stamp before, the claim set
    and the pod count: the node's rows after, the GPU milli taken and the stamp after. What-ifs
    re-pack much the same pods onto the same node states again and again (each consolidation
    option), so most binds copy rows instead of allocating. Direct-mapped, shared by the claim
    sets of a cluster, its size bounded in bytes whatever the devices."""

    key: np.ndarray  # (S, 3) stamp before, claim set, count (stamp -1: empty)
    after: np.ndarray  # (S,) the stamp of the state after
    taken: np.ndarray  # (S, W) the rows after, as DeviceState's
    cap_left: np.ndarray  # (S, W, Q)
    counter_left: np.ndarray  # (S, K)
    milli: np.ndarray  # (S, G) the GPU milli the pods took

    @classmethod
    def empty(cls, width: int, n_capacities: int, n_counters: int, n_gpus: int, most_bytes: int = 1 << 23,
              most: int = 4096) -> AlikeCache:
        row = width * (1 + 8 * n_capacities) + 8 * (n_counters + n_gpus + 4)
        size = 1 << max(4, min(most, most_bytes // row).bit_length() - 1)  # a power of 2: the bucket is a mask
        key = np.full((size, 3), -1, np.int64)
        return cls(key, np.zeros(size, np.int64), np.zeros((size, width), bool),
                   np.zeros((size, width, n_capacities), np.int64), np.zeros((size, n_counters), np.int64),
                   np.zeros((size, n_gpus), np.int64))


def take_alike_typed(tc: TypedClaims, claim_set: int, cache: AlikeCache, state: DeviceState, stamp: np.ndarray,
                     slot_type: np.ndarray, slots: np.ndarray, counts: np.ndarray, milli: np.ndarray,
                     next_stamp: int, marks: np.ndarray = NO_MARKS) -> tuple[bool, int]:
    """Slots[i] (distinct, stamped) take counts[i] pods with the claims one after another, in
    place, as `take_typed`: their rows and stamps become the state after (a new stamp from
    `next_stamp` on, or the one a bind from the same stamp gave before: `follow`'s rule), and
    milli[i] (zeros) the GPU milli taken. A bind in `cache` (`claim_set` numbers the claims) is
    copied, not allocated. Returns whether every slot took all its pods, and the next stamp."""
    return take_alike_kernel(np.asarray(slots, np.int64), np.asarray(counts, np.int64), claim_set, next_stamp,
                             slot_type, stamp, state.taken, state.cap_left, state.counter_left, milli, cache.key,
                             cache.after, cache.taken, cache.cap_left, cache.counter_left, cache.milli, tc.never,
                             tc.opt_start, tc.opt_end, tc.match, tc.members, tc.before, tc.need, tc.take_cap,
                             tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req, tc.req_claim, tc.rest_min,
                             tc.gpu_index, tc.gpu_milli, marks, tc.tolerated, MAX_RESULTS)


@njit(cache=True)
def take_alike_kernel(slots, counts, claim_set, next_stamp, slot_type, stamp, taken, cap_left, counter_left, milli,
                      key, after, row_taken, row_cap, row_counters, row_milli, never, opt_start, opt_end, match,
                      members, before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim,
                      rest_min, gpu_index, gpu_milli, marks, tolerated, limit):
    """`take_alike_typed` on the arrays themselves, for compiled callers (`state.fit_bind_claims`)."""
    mask = len(after) - 1
    for i in range(len(slots)):
        n, c = slots[i], counts[i]
        if c == 0:  # nothing taken: the same content, the same stamp
            continue
        s = stamp[n]
        b = ((s * 0x9E3779B1) ^ (claim_set * 0x85EBCA77) ^ (c * 0xC2B2AE3D)) & mask
        if key[b, 0] == s and key[b, 1] == claim_set and key[b, 2] == c:
            _copy_rows(b, n, i, row_taken, row_cap, row_counters, row_milli, taken, cap_left, counter_left, milli)
        else:
            mark = marks[n:n + 1] if marks.shape[0] else marks
            got = _take_typed(slot_type[n:n + 1], taken[n:n + 1], cap_left[n:n + 1], counter_left[n:n + 1],
                              counts[i:i + 1], milli[i:i + 1], never, opt_start, opt_end, match, members, before,
                              need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min,
                              gpu_index, gpu_milli, mark, tolerated, limit)[0]
            if got != c:
                return False, next_stamp
            key[b, 0], key[b, 1], key[b, 2], after[b] = s, claim_set, c, next_stamp
            next_stamp += 1
            row_taken[b], row_cap[b], row_counters[b], row_milli[b] = taken[n], cap_left[n], counter_left[n], milli[i]
        stamp[n] = after[b]
    return True, next_stamp


@njit(cache=True, inline="always")
def _copy_rows(b, n, i, row_taken, row_cap, row_counters, row_milli, taken, cap_left, counter_left, milli):
    """A cached bind's rows (bucket b) onto node n's rows and the pods' GPU milli (row i), element
    by element: an assignment of one array's row to another's compiles to a broadcast copy that
    cost more than these few elements, at every bind a what-if takes from the cache."""
    for d in range(taken.shape[1]):
        taken[n, d] = row_taken[b, d]
        for q in range(cap_left.shape[2]):
            cap_left[n, d, q] = row_cap[b, d, q]
    for j in range(counter_left.shape[1]):
        counter_left[n, j] = row_counters[b, j]
    for g in range(milli.shape[1]):
        milli[i, g] = row_milli[b, g]


@njit(cache=True, inline="always")
def _blocked(marks, n, tolerated, match):
    """Whether the device taints in force on node n (row n of `marks`; no rows: no taints)
    keep some option off a device it matches (`marks[n, d] & ~tolerated[o]`)."""
    if marks.shape[0] == 0:
        return False
    for d in range(match.shape[1]):
        if marks[n, d] != 0:
            for o in range(match.shape[0]):
                if match[o, d] & ((marks[n, d] & ~tolerated[o]) != 0):
                    return True
    return False


@njit(cache=True)
def _unblocked(marks, n, tolerated, match):
    """The options' match, members and before on node n without the devices its taints keep
    each option off, as `without` compiles them."""
    P, W = match.shape
    out_match, out_members = np.zeros((P, W), np.bool_), np.full((P, W), -1, np.int64)
    out_before = np.zeros((P, W + 1), np.int64)
    for o in range(P):
        c = 0
        for d in range(W):
            on = match[o, d] and marks[n, d] & ~tolerated[o] == 0
            out_match[o, d] = on
            if on:
                out_members[o, c] = d
                c += 1
            out_before[o, d + 1] = c
    return out_match, out_members, out_before


@njit(cache=True)
def fits_rows(rows, slot_type, stamp, taken, cap_left, counter_left, fit_key, fit, never, opt_start, opt_end, match,
              members, before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min,
              marks, tolerated, limit):
    """Whether each node of `rows` can allocate the claims now (its devices only: CPU, memory and
    static checks are the caller's), from the stamp cache or searched and remembered by stamp."""
    ok = np.zeros(len(rows), np.bool_)
    scratch = search_scratch(taken, cap_left, counter_left, opt_start, con_req, req_claim)
    for i in range(len(rows)):
        known = cached_fit(rows[i], slot_type, stamp, fit_key, fit, never)
        ok[i] = known == 1 if known >= 0 else search_node(
            rows[i], slot_type, stamp, fit_key, fit, taken, cap_left, counter_left, opt_start, opt_end, match,
            members, before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min,
            marks, tolerated, limit, scratch)
    return ok


@njit(cache=True)
def search_scratch(taken, cap_left, counter_left, opt_start, con_req, req_claim):
    """The working arrays `search_node` searches a node with, made once per call over many nodes:
    its devices taken, capacity and counters left, the picks, the alternatives chosen, the
    constraints' counts and values, the devices per claim."""
    R, C, W = len(opt_start), con_req.shape[0], taken.shape[1]
    return (np.empty(W, np.bool_), np.empty(cap_left.shape[1:], np.int64),
            np.empty(counter_left.shape[1], np.int64), np.full((R, max(W, 1)), -1, np.int64),
            np.zeros(R, np.int64), np.zeros(C, np.int64), np.zeros(C, np.int64),
            np.zeros(req_claim.max() + 1 if R else 1, np.int64))


@njit(cache=True, inline="always")
def cached_fit(n, slot_type, stamp, fit_key, fit, never):
    """What the stamp cache says of node n: 1 fits, 0 does not (or its type never does), -1 not
    known (search it: `search_node`). The cache's size is a power of two, so a stamp's bucket
    is its low bits. Few arguments and inlined: a call per node of every walk."""
    if never[slot_type[n]]:
        return 0
    b = stamp[n] & (len(fit_key) - 1)
    if fit_key[b] == stamp[n] + 1:
        return 1 if fit[b] else 0
    return -1


def cached_answer(tc: TypedClaims, cache: FitCache, stamp: np.ndarray, slot_type: np.ndarray, n: int) -> int:
    """`cached_fit` of one node, run as Python: for a caller asking of one node, to whom a
    compiled call costs more than the look-up."""
    return _CACHED_FIT(n, slot_type, stamp, cache.fit_key, cache.fit, tc.never)


_CACHED_FIT = getattr(cached_fit, "py_func", cached_fit)  # (NUMBA_DISABLE_JIT=1: the function itself)


@njit(cache=True)
def search_node(n, slot_type, stamp, fit_key, fit, taken, cap_left, counter_left, opt_start, opt_end, match, members,
                before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min, marks,
                tolerated, limit, scratch):
    """Whether node n can allocate the claims, by `_search` on a copy of its allocation state, its
    taints applied; remembered in the stamp cache."""
    t, cl, kl, picks, opt, con_n, con_v, claim_used = scratch
    k = slot_type[n]
    mk, memk, bk = match[k], members[k], before[k]
    if _blocked(marks, n, tolerated, mk):
        mk, memk, bk = _unblocked(marks, n, tolerated, mk)
    ok = _enough_free(taken[n], multi[k], opt_start, opt_end, memk, bk, need[k])
    if ok:
        t[:] = taken[n]
        cl[:] = cap_left[n]
        kl[:] = counter_left[n]
        ok = _search(t, cl, capacity[k], kl, opt_start, opt_end, mk, memk, bk, need[k], take_cap[k], consumes[k],
                     multi[k], con_value[k], con_req, req_claim, rest_min[k], limit, claim_used, con_n, con_v, picks,
                     opt)
    b = stamp[n] & (len(fit_key) - 1)
    fit_key[b], fit[b] = stamp[n] + 1, ok
    return ok


@njit(cache=True)
def _enough_free(taken, multi, opt_start, opt_end, members, before, need):
    """Whether every request has an alternative with as many matching devices not taken whole
    (free, or multi-allocatable) as it needs: what `_search` needs before it can succeed, so a
    node without it is ruled out before the search copies its state and backtracks."""
    D = members.shape[1]
    for r in range(len(opt_start)):
        enough = False
        for o in range(opt_start[r], opt_end[r]):
            free = 0
            for p in range(before[o, D]):
                d = members[o, p]
                free += (not taken[d]) | multi[d]
            if free >= need[o]:
                enough = True
                break
        if not enough:
            return False
    return True


@njit(cache=True)
def _feasible_typed(slots, usable, static, cpu_free, mem_free, cpu, mem, slot_type, stamp, taken, cap_left,
                    counter_left, fit_key, fit, never, opt_start, opt_end, match, members, before, need, take_cap,
                    capacity, consumes, multi, con_value, con_req, req_claim, rest_min, marks, tolerated, limit):
    rows, at = np.empty(len(slots), np.int64), np.empty(len(slots), np.int64)
    m = 0
    for i in range(len(slots)):
        if passes(slots[i], usable, static, cpu_free, mem_free, cpu, mem):
            rows[m], at[m] = slots[i], i
            m += 1
    ok = fits_rows(rows[:m], slot_type, stamp, taken, cap_left, counter_left, fit_key, fit, never, opt_start,
                     opt_end, match, members, before, need, take_cap, capacity, consumes, multi, con_value, con_req,
                     req_claim, rest_min, marks, tolerated, limit)
    out = np.zeros(len(slots), np.bool_)
    for j in range(m):
        out[at[j]] = ok[j]
    return out


@njit(cache=True, inline="always")
def passes(n, usable, static, cpu_free, mem_free, cpu, mem):
    """Node n is usable, passes the static checks and has the CPU and memory. One expression of
    `&`, not `and`: numba compiles a helper that returns a short-circuit `and` of array reads
    ~20x slower, per node of every walk."""
    return usable[n] & static[n] & (cpu_free[n] >= cpu) & (mem_free[n] >= mem)


@njit(cache=True)
def first_fit_kernel(slots, usable, static, cpu_free, mem_free, cpu, mem, most, k, slot_type, stamp, taken,
                     cap_left, counter_left, count_key, count, full, never, opt_start, opt_end, match, members, before,
                     need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min, gpu_index,
                     gpu_milli, marks, tolerated, limit):
    """`first_fit_typed` on the arrays themselves, for compiled callers (`state.fit_bind_claims`).
    It walks `slots` in the order given (distinct, every slot `usable` holds among them): the
    usable slots are a few of all in a what-if, and a walk over every slot cost more than the
    counts it looks up."""
    nodes, got = np.empty(len(slots), np.int64), np.empty(len(slots), np.int64)
    one, bound = np.zeros(1, np.int64), np.zeros(1, np.int64)
    m, left, low = 0, k, len(count_key) - 1
    for i in range(len(slots)):
        n = slots[i]
        if left == 0:
            break
        if not passes(n, usable, static, cpu_free, mem_free, cpu, mem):
            continue
        b = stamp[n] & low
        if count_key[b] == stamp[n] and not full[b]:
            c = _within(count[b], cpu_free[n], mem_free[n], cpu, mem, most)
        else:
            one[0] = n
            bound[0] = min(cpu_free[n] // cpu if cpu else most, mem_free[n] // mem if mem else most, most)
            if count_key[b] == stamp[n] and count[b] >= bound[0]:
                c = bound[0]
            else:
                c = _count_typed(one, slot_type, stamp, taken, cap_left, counter_left, bound, count_key, count, full,
                                 never, opt_start, opt_end, match, members, before, need, take_cap, capacity,
                                 consumes, multi, con_value, con_req, req_claim, rest_min, gpu_index, gpu_milli, marks,
                                 tolerated, limit)[0]
        if c > 0:
            nodes[m], got[m] = n, min(c, left)
            left -= got[m]
            m += 1
    return nodes[:m].copy(), got[:m].copy()


@njit(cache=True, inline="always")
def _within(c, cpu_free, mem_free, cpu, mem, most):
    """min(c, cpu_free // cpu, mem_free // mem, most) (a zero request bounds nothing), dividing
    only where a bound is below c: c * cpu > cpu_free exactly when c > cpu_free // cpu. A walk
    reads a cached count at nearly every node it passes, mostly 0, and two divisions per node
    were most of its time."""
    if c > most:
        c = most
    if cpu and c * cpu > cpu_free:
        c = cpu_free // cpu
    if mem and c * mem > mem_free:
        c = mem_free // mem
    return c


@njit(cache=True)
def _allocate_pairs(n, t, taken, cap_left, counter_left, opt_start, opt_end, match, members, before, need, take_cap,
                    capacity, consumes, multi, con_value, con_req, req_claim, rest_min, gpu_index, marks, tolerated,
                    limit):
    """`allocate_typed` in one compiled call: type t's arrays picked and the picks flattened
    here, not by a dozen numpy calls per pod bound."""
    picks, opt = _allocate_one(n, taken, cap_left, counter_left, opt_start, opt_end, match[t], members[t], before[t],
                               need[t], take_cap[t], capacity[t], consumes[t], multi[t], con_value[t], con_req,
                               req_claim, rest_min[t], marks, tolerated, limit)
    m = 0
    for r in range(picks.shape[0]):
        for j in range(picks.shape[1]):
            m += picks[r, j] >= 0
    pairs, gpus = np.empty((m, 2), np.int64), np.empty(m, np.int64)
    i, g = 0, 0
    for r in range(picks.shape[0]):
        for j in range(picks.shape[1]):
            d = picks[r, j]
            if d >= 0:
                pairs[i, 0], pairs[i, 1] = opt[r], d
                i += 1
                if gpu_index[t, d] >= 0:
                    gpus[g] = gpu_index[t, d]
                    g += 1
    return pairs, gpus[:g].copy()


@njit(cache=True)
def _allocate_one(n, taken, cap_left, counter_left, opt_start, opt_end, match, members, before, need, take_cap,
                  capacity, consumes, multi, con_value, con_req, req_claim, rest_min, marks, tolerated, limit):
    R, C, W = len(opt_start), con_req.shape[0], taken.shape[1]
    picks, opt = np.full((R, max(W, 1)), -1, np.int64), np.zeros(R, np.int64)
    claim_used = np.zeros(req_claim.max() + 1 if R else 1, np.int64)
    if _blocked(marks, n, tolerated, match):
        match, members, before = _unblocked(marks, n, tolerated, match)
    ok = _search(taken[n].copy(), cap_left[n].copy(), capacity, counter_left[n].copy(), opt_start, opt_end, match,
                 members, before, need, take_cap, consumes, multi, con_value, con_req, req_claim, rest_min, limit,
                 claim_used, np.zeros(C, np.int64), np.zeros(C, np.int64), picks, opt)
    assert ok, "the claims fit the node they are allocated on"
    return picks, opt


@njit(cache=True)
def _count_typed(rows, slot_type, stamp, taken, cap_left, counter_left, bound, count_key, count, full, never, opt_start,
                 opt_end, match, members, before, need, take_cap, capacity, consumes, multi, con_value, con_req,
                 req_claim, rest_min, gpu_index, gpu_milli, marks, tolerated, limit):
    got = np.zeros(len(rows), np.int64)
    one = np.zeros(1, slot_type.dtype)  # as the slot types: _take_typed compiles once
    t, cl, kl = taken[:1].copy(), cap_left[:1].copy(), counter_left[:1].copy()
    mark = np.zeros((min(marks.shape[0], 1), marks.shape[1]), np.int64)  # the node's row of `marks`, if any
    no_gpus = np.zeros((1, 0), np.int64)
    for i in range(len(rows)):
        n = rows[i]
        b = stamp[n] & (len(count_key) - 1)
        if count_key[b] == stamp[n] and (not full[b] or count[b] >= bound[i]):
            got[i] = min(count[b], bound[i])
            continue
        t[0], cl[0], kl[0] = taken[n], cap_left[n], counter_left[n]
        if mark.shape[0]:
            mark[0] = marks[n]
        one[0] = slot_type[n]
        got[i] = _take_typed(one, t, cl, kl, bound[i:i + 1], no_gpus, never, opt_start, opt_end, match, members,
                             before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min,
                             gpu_index, gpu_milli, mark, tolerated, limit)[0]
        count_key[b], count[b], full[b] = stamp[n], got[i], got[i] == bound[i]
    return got


@njit(cache=True)
def _take_typed(row_type, taken, cap_left, counter_left, bound, milli, never, opt_start, opt_end, match, members,
                before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min, gpu_index,
                gpu_milli, marks, tolerated, limit):
    R, C, W = len(opt_start), con_req.shape[0], taken.shape[1]
    got = np.zeros(len(bound), np.int64)
    t, cl, kl = np.empty(W, np.bool_), np.empty(cap_left.shape[1:], np.int64), np.empty(counter_left.shape[1], np.int64)
    picks, opt = np.full((R, max(W, 1)), -1, np.int64), np.zeros(R, np.int64)
    con_n, con_v = np.zeros(C, np.int64), np.zeros(C, np.int64)
    claim_used = np.zeros(req_claim.max() + 1 if R else 1, np.int64)
    none, counts = np.zeros((0, take_cap.shape[1]), np.bool_), np.zeros(0, np.int64)
    no_values = np.zeros((0, W), np.int64)
    one_device = R == 1 and opt_end[0] - opt_start[0] == 1 and C == 0
    for n in range(len(bound)):
        k = row_type[n]
        if never[k]:
            continue
        mk, memk, bk = match[k], members[k], before[k]
        if _blocked(marks, n, tolerated, mk):  # taints keep options off devices: searched without them
            mk, memk, bk = _unblocked(marks, n, tolerated, mk)
        # the node's rows and its type's arrays, taken once (a view made per device costs a refcount)
        tn, cn, kn, full, tk, ck, mul = taken[n], cap_left[n], counter_left[n], capacity[k], take_cap[k], consumes[k], \
            multi[k]
        if one_device and need[k, opt_start[0]] == 1:
            got[n] = _take_one_by_one(n, k, opt_start[0], bound[n], tn, cn, kn, mk, memk, bk, tk, full, ck, mul,
                                      gpu_index, gpu_milli, milli)
            continue
        nk, cvk, rk = need[k], con_value[k], rest_min[k]
        while got[n] < bound[n]:
            t[:] = tn
            cl[:] = cn
            kl[:] = kn
            picks[:] = -1
            if not _search(t, cl, full, kl, opt_start, opt_end, mk, memk, bk, nk, tk, ck, mul, cvk, con_req,
                           req_claim, rk, limit, claim_used, con_n, con_v, picks, opt):
                break
            for r in range(R):
                for j in range(picks.shape[1]):
                    d = picks[r, j]
                    if d < 0:
                        continue
                    _take(d, opt[r], 1, tn, cn, full, kn, tk, ck, mul, no_values, none, counts, counts)
                    if milli.shape[1] and gpu_index[k, d] >= 0:
                        milli[n, gpu_index[k, d]] += gpu_milli[k, opt[r], d]
            got[n] += 1
    return got


@njit(cache=True)
def _take_one_by_one(n, k, o, bound, taken, cap_left, counter_left, match, members, before, take_cap, capacity,
                     consumes, multi, gpu_index, gpu_milli, milli):
    """`_take_typed` on node n for a claim of one device of one kind, no constraint: each pod
    takes the first device that fits, and a device that did not fit an earlier pod fits no
    later one (devices are only taken, capacity and counters only drawn), so each pod's scan
    resumes at the device the pod before took instead of the first. `match`, `members` and
    `before` are the node's (type k's, or without the devices taints keep off); `taken`,
    `cap_left` and `counter_left` node n's rows, `take_cap`, `capacity`, `consumes` and `multi`
    type k's. Returns the pods taken."""
    W = taken.shape[0]
    none, counts = np.zeros((0, take_cap.shape[0]), np.bool_), np.zeros(0, np.int64)
    no_values = np.zeros((0, W), np.int64)
    got, p, end = 0, 0, before[o, W]
    while got < bound:
        while p < end:
            if _fits(members[o, p], o, taken, cap_left, counter_left, match, take_cap, consumes, multi, no_values,
                     none, counts, counts):
                break
            p += 1
        if p == end:
            break
        d = members[o, p]
        _take(d, o, 1, taken, cap_left, capacity, counter_left, take_cap, consumes, multi, no_values, none, counts,
              counts)
        if milli.shape[1] and gpu_index[k, d] >= 0:
            milli[n, gpu_index[k, d]] += gpu_milli[k, o, d]
        got += 1
    return got


@dataclass(frozen=True)
class Allocation:
    """The devices a pod's claims got on one node: per request, its alternative and devices."""

    option: tuple[int, ...]  # per request, the index into CompiledClaims.options
    devices: tuple[tuple[int, ...], ...]  # per request, device indices


@dataclass(frozen=True)
class Allocations:
    """`allocate`'s answer per node row, as arrays; `[i]` is row i's Allocation (None: none)."""

    ok: np.ndarray  # (N,) bool
    picks: np.ndarray  # (N, R, width) device indices, -1 padded
    opts: np.ndarray  # (N, R) the option of each request

    def __len__(self) -> int:
        return len(self.ok)

    def __getitem__(self, i: int) -> Allocation | None:
        if not self.ok[i]:
            return None
        return Allocation(tuple(int(o) for o in self.opts[i]),
                          tuple(tuple(int(d) for d in row if d >= 0) for row in self.picks[i]))


def allocate(cc: CompiledClaims, devices: NodeDevices, state: DeviceState,
             rows: np.ndarray) -> tuple[np.ndarray, Allocations]:
    """For each node row: can the claims be allocated there, and how."""
    rows = np.asarray(rows, np.int64)
    R = len(cc.opt_start)
    if cc.error or (R and (cc.need > devices.n_devices).all()):
        return np.zeros(len(rows), bool), Allocations(np.zeros(len(rows), bool), np.zeros((len(rows), R, 1), np.int64),
                                                      np.zeros((len(rows), R), np.int64))
    width = max(int(min(cc.need.max(), devices.n_devices)), 1) if R else 1
    ok, picks, opts = _allocate_nodes(rows, state.taken, state.cap_left, devices.capacity, state.counter_left,
                                      cc.opt_start, cc.opt_end, cc.match, cc.members, cc.before, cc.need, cc.take_cap,
                                      devices.consumes, devices.multi, cc.con_value, cc.con_req, cc.req_claim,
                                      cc.rest_min, MAX_RESULTS, width)
    return ok, Allocations(ok, picks, opts)


def commit(cc: CompiledClaims, devices: NodeDevices, state: DeviceState, row: int, a: Allocation,
           sign: int = 1) -> None:
    """Take (sign 1) or give back (-1) an allocation on node `row`."""
    pairs = np.array([(o, d) for o, devs in zip(a.option, a.devices, strict=True) for d in devs], np.int64)
    _commit(pairs.reshape(-1, 2), sign, state.taken[row], state.cap_left[row], devices.capacity,
            state.counter_left[row], cc.take_cap, devices.consumes, devices.multi)


@njit(cache=True)
def commit_at(pairs, sign, n, t, taken, cap_left, counter_left, capacity, take_cap, consumes, multi):
    """Take (sign 1) or give back (-1) an allocation, as (option, device) pairs, on node n of
    type t: the state's arrays (`DeviceState`'s, every node) and the claims' (`TypedClaims`',
    every type) as they are, the rows picked in the compiled call (a bind's one compiled call)."""
    _commit(pairs, sign, taken[n], cap_left[n], capacity[t], counter_left[n], take_cap[t], consumes[t], multi[t])


@njit(cache=True)
def _commit(pairs, sign, taken, cap_left, cap_full, counter_left, take_cap, consumes, multi):
    """`_take` for each (option, device) of an allocation, on one node's state rows (no
    constraints to track: the placeholders are empty)."""
    values = np.zeros((0, len(taken)), np.int64)
    none = np.zeros((0, take_cap.shape[0]), np.bool_)
    counts = np.zeros(0, np.int64)
    for i in range(len(pairs)):
        _take(pairs[i, 1], pairs[i, 0], sign, taken, cap_left, cap_full, counter_left, take_cap, consumes, multi,
              values, none, counts, counts)


def result(cc: CompiledClaims, devices: NodeDevices, a: Allocation) -> list[dict]:
    """The allocation as a ResourceClaim's status.allocation.devices.results lists it."""
    out = []
    for o, devs in zip(a.option, a.devices, strict=True):
        for d in devs:
            driver, pool, name = devices.names[d].split("/", 2)
            out.append({"request": cc.options[o].split("/", 1)[1], "driver": driver, "pool": pool, "device": name})
    return out
