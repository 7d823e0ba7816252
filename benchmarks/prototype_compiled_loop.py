"""A prototype of the merged loop's event loop compiled whole (numba), to measure what a compiled
event loop would give: the moonshot's "1M pods in 30 s" decided from a number, not a guess.

    python benchmarks/prototype_compiled_loop.py [--sizes 10000,100000,300000,1000000] [--trace-dir DIR]
                                                 [--compare [--real KEY=VALUE ...]] [--json]

It replays the same scale workload the speed benchmarks use (benchmarks/bench_scale.py:
`workload=scale`, n_jobs = 0.7 x pods, the arrival span scaled with the pods, on
conf/cluster/scale.yaml), read through the harness's own config and trace compiler (`build`, not
timed, as bench_scale's build column), then runs one @njit function over typed arrays:

- the clock: a binary heap of pod ends and node-ready events, the trace's job arrivals streamed
  in submit order, and the planner's scans on a 10 s grid while anything is queued, a node waits
  for scale-down or a node changed since the last scan;
- the placer (each instant something changed): queued jobs in PrioritySort order (priority,
  then submit), each whole or not at all (the Atomic gang plugin) on ready nodes, pod by pod:
  NodeResourcesFit (CPU, memory, GPUs: whole devices, in one NUMA/NVLink domain where the pod
  asks, or a share of one device), the walk from nextStartNodeIndex over the ready nodes in the
  seeded node order stopping at kube-scheduler's adaptive number of feasible nodes, scored by
  LeastAllocated + BalancedAllocation over CPU and memory, ties by the seeded node order; a
  rack- or block-local gang tried in each group whose nodes can hold it; within a cycle a shape
  (and gang size) that found no node is not tried again, and a job that failed is retried only
  when a node that grew since can hold its pod (QueueingHints);
- the planner (each scan): every queued job not already failed on this node layout is first-fit
  packed on the ready nodes with room for it and the booting nodes, then on new nodes of each
  pool that fits it (a rack-local gang in the pool's rack with the most free slots), all or
  nothing; the cheapest plan wins by the merged loop's price (harness/autoscalers/plan_price.py:
  the new nodes' hourly price beyond committed slots, times the job's dominant share of them
  plus the share of their GPUs the demand seen for the pool would leave idle; the demand is the
  queued pods and those that arrived in the last 600 s and were placed); the plan's nodes are
  requested (a pool with finite stock that cannot grant them all grants none and is backed off,
  300 s doubling to 1,800 s, then asked only up to what it held), boot after the pool's drawn
  delay, and the plan is bound at once;
- pods start when their job's min_member are bound on ready nodes, and end after their run time;
- scale-down (each scan): a ready node with no pod, not in a committed slot, above its pool's
  min_size, is unneeded from the scan that first sees it and removed 600 s later, at most 10 per
  scan, none within 600 s of a scale-up;
- the accounting: billed, used, booting, unallocated, gang-wait and committed accelerator time,
  integrated exactly between instants from running integer totals.

What it leaves out, against the real merged loop (harness/loops/merged.py and what it calls):
DRA (claims are read as their device columns: a partition is a share of one GPU's milli), the
drain of under-used nodes (consolidation: the real loop drains one node per scan after 600 s
under 50% use), the provision timeout and ceilings learned from short grants beyond the first,
node-group templates, the Job controller's backoff, preemption, services, the pending reasons
(`_relabel`, every cycle), the decision trace and every hook, the timeline samples, the idle
split by GPU model and fragmentation, and the quiet-tick bulk pass (its scans are cheap here).
Its node pick, packing order and boot-delay draws are its own, so it does not match the real
loop bit for bit; `--compare` also replays each trace through the real merged loop (a subprocess,
as bench_scale runs it, with two hooks counting binds and unbinds) and prints both loops' figures
side by side: they must agree on the kind and amount of work for the timing to mean anything
(`--compare --real consolidation=false` gives the real loop the prototype's scale-down, empty
nodes only: on the 10k and 100k traces the two then agree within 2% on events, binds, nodes
provisioned and idle accelerator hours).

What makes it fast, and a full port would keep: (1) the walk visits only the ready nodes of the
pod's pools, or of its gang's rack or block (lists kept in the seeded order as nodes come and
go), from the same place, so it finds the same nodes and moves nextStartNodeIndex as the walk
over every ready node would (`--full-walk` takes that walk instead: the same outputs); (2) the
filter and scores read one row per node (free CPU, memory, whole devices, whole devices in one
NVLink/NUMA domain, the largest share, pool, capacities, seeded rank), renewed when the node's
room changes; (3) the helpers called per node or per pod take scalars and one or two arrays:
every array a compiled function is handed costs an atomic reference count, and with a dozen
arrays per call that was 60% of the replay (perf; NRT_incref/decref).

Each size is run twice in one process: the first call's extra time is numba's compilation, or
loading it from numba's cache (benchmarks/__pycache__; `NUMBA_CACHE_DIR=$(mktemp -d)` for a
cold compile); the second is the replay timed. `python ../shared/tools/calib.py` is printed
beside each row.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

ROOT = Path(__file__).resolve().parents[1]
JOBS_PER_POD = 0.7  # as bench_scale.py
SPAN_PER_POD_S = 2592000 / 1_000_000

ABSENT, BOOTING, READY = 0, 1, 2
NOT_ARRIVED, PENDING, BOUND, RUNNING, DONE, REFUSED = 0, 1, 2, 3, 4, 5
EV_END, EV_READY = 0, 1
WHOLE = 1000
MAX_SCORE = 100
#: stats vector indices (`replay` returns them in this order)
STATS = ("events", "arrivals", "pod_ends", "nodes_ready", "binds", "binds_on_booting", "nodes_provisioned",
         "nodes_removed", "scans", "cycles", "job_attempts", "plans", "short_grants", "violations",
         "billed_ms", "used_ms", "booting_ms", "unallocated_ms", "gang_wait_ms", "committed_ms",
         "gang_start_wait_s", "start_wait_s", "jobs_started", "end_used_milli", "end_gang_wait_milli")


# ---- devices on one node -------------------------------------------------------------------
FREE_WHOLE, MAX_SHARE = 8, 9  # columns after a node's 8 devices: its summaries, kept as pods come and go


@njit(cache=True)
def summarize(gpu_free, n, ngpu):
    """Node n's summaries: whole devices free, the most milli free on one device."""
    whole = 0
    most = 0
    for g in range(ngpu):
        whole += gpu_free[n, g] == WHOLE
        most = max(most, gpu_free[n, g])
    gpu_free[n, FREE_WHOLE] = whole
    gpu_free[n, MAX_SHARE] = most


@njit(cache=True)
def gpu_reset(gpu_free, n, ngpu):
    """A new node: every device free."""
    gpu_free[n, :] = 0
    gpu_free[n, :ngpu] = WHOLE
    summarize(gpu_free, n, ngpu)


@njit(cache=True)
def gpu_fits(gpu_free, n, ngpu, gpus, milli, dom):
    """Can node n take `gpus` devices of `milli` each (a share: one device with that much free;
    whole devices: all in one aligned domain of `dom` GPUs)? The summaries answer but for a
    domain smaller than the node."""
    if gpus == 0:
        return True
    if milli < WHOLE:
        return gpu_free[n, MAX_SHARE] >= milli
    if gpu_free[n, FREE_WHOLE] < gpus:
        return False
    if dom >= ngpu:
        return True
    for d0 in range(0, ngpu, dom):
        c = 0
        for g in range(d0, min(d0 + dom, ngpu)):
            if gpu_free[n, g] == WHOLE:
                c += 1
        if c >= gpus:
            return True
    return False


@njit(cache=True)
def gpu_take(gpu_free, n, ngpu, gpus, milli, dom):
    """Take the devices (as harness.node_devices.pick: a share on the fitting device with the
    least free; whole ones first-free in the lowest domain with enough) and return their mask."""
    if gpus == 0:
        return 0
    if milli < WHOLE:
        best = -1
        for g in range(ngpu):
            f = gpu_free[n, g]
            if f >= milli and (best < 0 or f < gpu_free[n, best]):
                best = g
        gpu_free[n, best] -= milli
        summarize(gpu_free, n, ngpu)
        return 1 << best
    for d0 in range(0, ngpu, dom):
        c = 0
        for g in range(d0, min(d0 + dom, ngpu)):
            if gpu_free[n, g] == WHOLE:
                c += 1
        if c >= gpus:
            mask = 0
            got = 0
            for g in range(d0, min(d0 + dom, ngpu)):
                if got < gpus and gpu_free[n, g] == WHOLE:
                    gpu_free[n, g] = 0
                    mask |= 1 << g
                    got += 1
            summarize(gpu_free, n, ngpu)
            return mask
    return -1


@njit(cache=True)
def gpu_give(gpu_free, n, ngpu, mask, milli):
    g = 0
    while mask:
        if mask & 1:
            gpu_free[n, g] += milli
        mask >>= 1
        g += 1
    summarize(gpu_free, n, ngpu)


# ---- the event heap ------------------------------------------------------------------------
@njit(cache=True)
def heap_push(ht, hs, hk, hi, size, t, seq, kind, ident):
    i = size
    ht[i], hs[i], hk[i], hi[i] = t, seq, kind, ident
    while i > 0:
        parent = (i - 1) // 2
        if ht[parent] < ht[i] or (ht[parent] == ht[i] and hs[parent] < hs[i]):
            break
        ht[i], ht[parent] = ht[parent], ht[i]
        hs[i], hs[parent] = hs[parent], hs[i]
        hk[i], hk[parent] = hk[parent], hk[i]
        hi[i], hi[parent] = hi[parent], hi[i]
        i = parent
    return size + 1


@njit(cache=True)
def heap_pop(ht, hs, hk, hi, size):
    """Remove the top; return the new size (the caller read the top before)."""
    size -= 1
    ht[0], hs[0], hk[0], hi[0] = ht[size], hs[size], hk[size], hi[size]
    i = 0
    while True:
        a, b, m = 2 * i + 1, 2 * i + 2, i
        if a < size and (ht[a] < ht[m] or (ht[a] == ht[m] and hs[a] < hs[m])):
            m = a
        if b < size and (ht[b] < ht[m] or (ht[b] == ht[m] and hs[b] < hs[m])):
            m = b
        if m == i:
            return size
        ht[i], ht[m] = ht[m], ht[i]
        hs[i], hs[m] = hs[m], hs[i]
        hk[i], hk[m] = hk[m], hk[i]
        hi[i], hi[m] = hi[m], hi[i]
        i = m


# ---- scoring ---------------------------------------------------------------------------------
@njit(cache=True)
def score(cpu_free, mem_free, cpu_cap, mem_cap, n, cpu, mem):
    """LeastAllocated + BalancedAllocation over CPU and memory (weights 1), integer as upstream."""
    req_c = cpu_cap[n] - cpu_free[n] + cpu
    req_m = mem_cap[n] - mem_free[n] + mem
    least = ((cpu_cap[n] - req_c) * MAX_SCORE // cpu_cap[n] + (mem_cap[n] - req_m) * MAX_SCORE // mem_cap[n]) // 2
    fc = min(req_c / cpu_cap[n], 1.0)
    fm = min(req_m / mem_cap[n], 1.0)
    balanced = int((1.0 - abs(fc - fm) / 2.0) * MAX_SCORE)
    return least + balanced


# A node's fields the filter and the scores read, in one row of one array: every array a
# compiled helper takes costs an atomic reference count per call (most of the replay's time when
# the filter took the node arrays), and the walk visits nodes in the seeded order, a cache miss
# per array. The arrays stay the truth; the row is renewed (`sync`) whenever the node's room changes.
(H_CPU, H_MEM, H_WHOLE, H_SHARE, H_NVL_WHOLE, H_NUMA_WHOLE, H_POOL, H_CPU_CAP, H_MEM_CAP,
 H_RANK) = range(10)


@njit(cache=True)
def most_whole_in_domain(gpu_free, n, ngpu, dom):
    """The most whole devices free in one aligned domain of `dom` devices of node n."""
    most = 0
    for d0 in range(0, ngpu, dom):
        c = 0
        for g in range(d0, min(d0 + dom, ngpu)):
            c += gpu_free[n, g] == WHOLE
        most = max(most, c)
    return most


@njit(cache=True)
def sync(hot, n, cpu_free, mem_free, gpu_free, ngpu, nvl, numa):
    hot[n, H_CPU], hot[n, H_MEM] = cpu_free[n], mem_free[n]
    hot[n, H_WHOLE], hot[n, H_SHARE] = gpu_free[n, FREE_WHOLE], gpu_free[n, MAX_SHARE]
    hot[n, H_NVL_WHOLE] = most_whole_in_domain(gpu_free, n, ngpu, nvl)
    hot[n, H_NUMA_WHOLE] = most_whole_in_domain(gpu_free, n, ngpu, numa)


@njit(cache=True)
def hot_rows(slot_pool, slot_cpu, slot_mem, slot_rank, slot_ngpu, slot_nvl, slot_numa, cpu_free, mem_free, gpu_free):
    """Every node's row of the fields the filter and the scores read."""
    hot = np.zeros((len(slot_pool), 10), np.int64)
    for n in range(len(slot_pool)):
        hot[n, H_POOL], hot[n, H_CPU_CAP], hot[n, H_MEM_CAP], hot[n, H_RANK] = (
            slot_pool[n], slot_cpu[n], slot_mem[n], slot_rank[n])
        sync(hot, n, cpu_free, mem_free, gpu_free, slot_ngpu[n], slot_nvl[n], slot_numa[n])
    return hot


@njit(cache=True, inline="always")
def fits_row(hot, n, pools, cpu, mem, gpus, milli, dom_kind):
    """`fits` from the node's row (dom_kind: 0 any devices, 1 one NVLink domain, 2 one NUMA domain)."""
    if not (pools >> hot[n, H_POOL]) & 1 or hot[n, H_CPU] < cpu or hot[n, H_MEM] < mem:
        return False
    if gpus == 0:
        return True
    if milli < WHOLE:
        return hot[n, H_SHARE] >= milli
    return hot[n, H_WHOLE if dom_kind == 0 else (H_NVL_WHOLE if dom_kind == 1 else H_NUMA_WHOLE)] >= gpus


@njit(cache=True)
def fitting(hot, nodes, count, out, groups, per_group, pools, cpu, mem, gpus, milli, dom_kind):
    """The nodes of `nodes[:count]` that pass `fits_row`, into `out` (returns how many), or, if
    `per_group` has room, counted there by their group: one call per scan, not one per node."""
    k = 0
    for r in range(count):
        n = nodes[r]
        if fits_row(hot, n, pools, cpu, mem, gpus, milli, dom_kind):
            if len(per_group):
                per_group[groups[n]] += 1
            else:
                out[k] = n
            k += 1
    return k


@njit(cache=True)
def num_feasible(n_all):
    if n_all < 100:
        return n_all
    pct = max(50 - n_all // 125, 5)
    return max(n_all * pct // 100, 100)


@njit(cache=True)
def fits(p, n, pod_cpu, pod_mem, pod_gpus, pod_milli, pod_dom, pod_pools, slot_pool, slot_ngpu, slot_nvl,
         slot_numa, cpu_free, mem_free, gpu_free):
    """NodeResourcesFit of pod p on node n (its pool's node type may hold it; room now), from the
    arrays themselves: what `fits_row` answers from a node's row (the test's reference)."""
    if not (pod_pools[p] >> slot_pool[n]) & 1:
        return False
    if cpu_free[n] < pod_cpu[p] or mem_free[n] < pod_mem[p]:
        return False
    dom = slot_ngpu[n] if pod_dom[p] == 0 else (slot_nvl[n] if pod_dom[p] == 1 else slot_numa[n])
    return gpu_fits(gpu_free, n, slot_ngpu[n], pod_gpus[p], pod_milli[p], dom)


# ---- small structures: an indexed set of nodes, the accounting's running totals --------------
# acc: GPU milli now, by state (`replay` integrates them between instants)
EXIST, BOOTING_MILLI, READY_MILLI, USED, GANG_WAIT, COMMITTED_EMPTY = range(6)
(S_EVENTS, S_ARRIVALS, S_POD_ENDS, S_NODES_READY, S_BINDS, S_BINDS_ON_BOOTING, S_PROVISIONED, S_REMOVED, S_SCANS,
 S_CYCLES, S_ATTEMPTS, S_PLANS, S_SHORT, S_VIOLATIONS, S_BILLED, S_USED, S_BOOTING, S_UNALLOCATED, S_GANG_WAIT,
 S_COMMITTED, S_GANG_START_WAIT, S_START_WAIT, S_JOBS_STARTED, S_END_USED, S_END_GANG_WAIT) = range(len(STATS))
N_STATS = len(STATS)


@njit(cache=True)
def set_add(items, pos, count, n):
    if pos[n] < 0:
        pos[n] = count[0]
        items[count[0]] = n
        count[0] += 1


@njit(cache=True)
def set_remove(items, pos, count, n):
    k = pos[n]
    if k >= 0:
        count[0] -= 1
        last = items[count[0]]
        items[k] = last
        pos[last] = k
        pos[n] = -1


@njit(cache=True)
def lower_bound(nodes, count, slot_rank, rank):
    """The first place in `nodes[:count]` (kept in the seeded order) whose rank is >= `rank`."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        if slot_rank[nodes[mid]] < rank:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def ready_insert(ready, count, slot_rank, n):
    """Node n joins a list of ready nodes kept in the seeded node order (the order the walk takes)."""
    lo = lower_bound(ready, count[0], slot_rank, slot_rank[n])
    for k in range(count[0], lo, -1):  # in place: a slice copy allocated, then copied twice
        ready[k] = ready[k - 1]
    ready[lo] = n
    count[0] += 1


@njit(cache=True)
def ready_remove(ready, count, slot_rank, n):
    lo = lower_bound(ready, count[0], slot_rank, slot_rank[n])
    for k in range(lo, count[0] - 1):
        ready[k] = ready[k + 1]
    count[0] -= 1


@njit(cache=True)
def index_ready(n, joins, slot_pool, slot_rack, slot_block, slot_rank, by_pools, by_pools_n, by_rack, by_rack_n,
                by_block, by_block_n):
    """Node n joins (or leaves) the ready nodes of each set of pools that holds its pool, of its
    rack and of its block, each list in the seeded order: the indexed walk's lists."""
    q, r, b = slot_pool[n], slot_rack[n], slot_block[n]
    for m in range(1, by_pools.shape[0]):
        if (m >> q) & 1:
            if joins:
                ready_insert(by_pools[m], by_pools_n[m:m + 1], slot_rank, n)
            else:
                ready_remove(by_pools[m], by_pools_n[m:m + 1], slot_rank, n)
    if joins:
        ready_insert(by_rack[r], by_rack_n[r:r + 1], slot_rank, n)
        ready_insert(by_block[b], by_block_n[b:b + 1], slot_rank, n)
    else:
        ready_remove(by_rack[r], by_rack_n[r:r + 1], slot_rank, n)
        ready_remove(by_block[b], by_block_n[b:b + 1], slot_rank, n)


@njit(cache=True)
def run_pod(p, now, pod_status, pod_gpus, pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate):
    """Pod p runs from now: its GPUs are used, its end is an event."""
    pod_status[p] = RUNNING
    acc[USED] += pod_gpus[p] * pod_milli[p]
    heap_push_state(ht, hs, hk, hi, hstate, now + pod_dur[p], EV_END, p)


@njit(cache=True)
def heap_push_state(ht, hs, hk, hi, hstate, t, kind, ident):
    hstate[0] = heap_push(ht, hs, hk, hi, hstate[0], t, hstate[1], kind, ident)
    hstate[1] += 1


@njit(cache=True)
def start_job(j, now, job_first, job_size, job_submit, job_started, pod_status, pod_node, node_status, pod_gpus,
              pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate, stats):
    """min_member of job j's pods are bound on ready nodes: those pods run (their GPUs leave
    gang wait), the others when their nodes are ready."""
    job_started[j] = now
    stats[S_JOBS_STARTED] += 1
    stats[S_START_WAIT] += now - job_submit[j]
    if job_size[j] > 1:
        stats[S_GANG_START_WAIT] += now - job_submit[j]
    for p in range(job_first[j], job_first[j] + job_size[j]):
        if pod_status[p] == BOUND and node_status[pod_node[p]] == READY:
            acc[GANG_WAIT] -= pod_gpus[p] * pod_milli[p]
            run_pod(p, now, pod_status, pod_gpus, pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate)


@njit(cache=True)
def walk_step(g, groups, start, k_feasible, ready, n_all, nodes, count, slot_rank, hot, pools, cpu, mem, gpus, milli,
              dom_kind):
    """One placement step: from nextStartNodeIndex `start` (a place in `ready`, the n_all ready
    nodes in the seeded order), walk them until k_feasible pass NodeResourcesFit (of group g if
    g >= 0), score each, keep the best (ties by the seeded order). Returns (node or -1, the next
    start). The walk takes `nodes[:count]`: all ready nodes, or (indexed) the ready nodes of the
    pod's pools or group alone, in the same order from the same place, so it finds the same
    nodes, and the next start is counted in `ready` as upstream's nextStartNodeIndex."""
    best, best_score, found, last, stopped = -1, -1, 0, -1, False
    if n_all == 0 or count == 0:
        return -1, 0 if n_all == 0 else start
    whole = H_WHOLE if dom_kind == 0 else (H_NVL_WHOLE if dom_kind == 1 else H_NUMA_WHOLE)
    i = lower_bound(nodes, count, slot_rank, slot_rank[ready[start]])
    if i == count:
        i = 0
    for _ in range(count):  # the filter inlined, cheapest test first: this loop is most of the replay
        n = nodes[i]
        i += 1
        if i == count:
            i = 0
        if g >= 0 and groups[n] != g:
            continue
        if not (pools >> hot[n, H_POOL]) & 1 or hot[n, H_CPU] < cpu or hot[n, H_MEM] < mem:
            continue
        if gpus and hot[n, H_SHARE if milli < WHOLE else whole] < (milli if milli < WHOLE else gpus):
            continue
        if found == k_feasible:  # a (k+1)-th feasible node: the walk stopped at the k-th
            stopped = True
            break
        found += 1
        last = n
        cpu_cap, mem_cap = hot[n, H_CPU_CAP], hot[n, H_MEM_CAP]  # `score` from the row, written out
        req_c, req_m = cpu_cap - hot[n, H_CPU] + cpu, mem_cap - hot[n, H_MEM] + mem
        least = ((cpu_cap - req_c) * MAX_SCORE // cpu_cap + (mem_cap - req_m) * MAX_SCORE // mem_cap) // 2
        s = least + int((1.0 - abs(min(req_c / cpu_cap, 1.0) - min(req_m / mem_cap, 1.0)) / 2.0) * MAX_SCORE)
        if s > best_score or (s == best_score and hot[n, H_RANK] < hot[best, H_RANK]):
            best, best_score = n, s
    checked = n_all  # no more than k feasible: every node was checked (as harness/scheduler/sampling.py)
    if stopped:
        checked = (lower_bound(ready, n_all, slot_rank, slot_rank[last]) - start) % n_all + 1
    return best, (start + checked) % n_all


# ---- the replay ------------------------------------------------------------------------------
@njit(cache=True)
def replay(seed, horizon, scan_s,
           pod_cpu, pod_mem, pod_gpus, pod_milli, pod_dom, pod_pools, pod_dur, pod_shape, pod_job,
           job_first, job_size, job_min, job_loc, job_prio, job_submit, arrival_jobs,
           slot_pool, slot_rack, slot_block, slot_ngpu, slot_nvl, slot_numa, slot_cpu, slot_mem, slot_committed,
           slot_rank,
           pool_first, pool_count, pool_price, pool_boot_min, pool_boot_max, pool_stock, pool_min,
           n_racks, n_blocks, n_shapes,
           unneeded_s, delay_after_add_s, max_removals, demand_window_s, backoff_s, max_backoff_s, indexed):
    """The merged loop's replay, compiled whole (the module docstring says what it models).
    Returns (stats in `STATS` order, pod status, pod node, node status, CPU, memory and GPU free)."""
    np.random.seed(seed)  # noqa: NPY002 (numba compiles the legacy API only)
    n_pods, n_jobs, n_slots, n_pools = len(pod_cpu), len(job_first), len(slot_pool), len(pool_first)
    stats = np.zeros(N_STATS)
    acc = np.zeros(6, np.int64)
    # nodes
    node_status = np.zeros(n_slots, np.int8)
    cpu_free = slot_cpu.copy()
    mem_free = slot_mem.copy()
    gpu_free = np.zeros((n_slots, 10), np.int64)
    hot = hot_rows(slot_pool, slot_cpu, slot_mem, slot_rank, slot_ngpu, slot_nvl, slot_numa, cpu_free, mem_free,
                   gpu_free)
    node_npods = np.zeros(n_slots, np.int64)
    node_head = np.full(n_slots, -1, np.int64)  # the pods on a node: a doubly linked list
    pod_next = np.full(n_pods, -1, np.int64)
    pod_prev = np.full(n_pods, -1, np.int64)
    unneeded_at = np.full(n_slots, -1.0)
    empty_items, empty_pos, n_empty = np.zeros(n_slots, np.int64), np.full(n_slots, -1, np.int64), np.zeros(1, np.int64)
    boot_items, boot_pos, n_boot = np.zeros(n_slots, np.int64), np.full(n_slots, -1, np.int64), np.zeros(1, np.int64)
    grown_items, grown_pos, n_grown = np.zeros(n_slots, np.int64), np.full(n_slots, -1, np.int64), np.zeros(1, np.int64)
    pool_present = np.zeros(n_pools, np.int64)
    rack_free = np.zeros(n_racks, np.int64)
    for n in range(n_slots):
        rack_free[slot_rack[n]] += 1
        if slot_committed[n]:
            acc[COMMITTED_EMPTY] += slot_ngpu[n] * WHOLE
    # pods and jobs
    pod_status = np.zeros(n_pods, np.int8)
    pod_node = np.full(n_pods, -1, np.int64)
    pod_mask = np.zeros(n_pods, np.int64)
    job_placed = np.zeros(n_jobs, np.int64)
    job_ready_bound = np.zeros(n_jobs, np.int64)
    job_started = np.full(n_jobs, np.nan)
    tried_at = np.full(n_jobs, -1, np.int64)  # capacity version of the job's last failure (-1: try it)
    planned_at = np.full(n_jobs, -1, np.int64)  # layout version of its last failed plan
    queue = np.zeros(n_jobs, np.int64)  # the queued jobs in QueueSort order
    n_queue = 0
    # the event heap
    cap = n_pods + 4 * n_slots + 1024
    ht, hs, hk, hi = np.zeros(cap), np.zeros(cap, np.int64), np.zeros(cap, np.int8), np.zeros(cap, np.int64)
    hstate = np.zeros(2, np.int64)  # size, next sequence number
    layout_version, cap_version, scanned_layout = 0, 0, -1
    last_scale_up = -1e18
    backoff_until, backoff_len = np.zeros(n_pools), np.zeros(n_pools)
    ceiling = np.full(n_pools, -1, np.int64)  # nodes a pool held when it fell short (-1: none)
    failed_cycle = np.zeros(n_shapes * 3, np.int64)  # the cycle a (shape, locality) found no place in
    failed_size = np.zeros(n_shapes * 3, np.int64)  # ... and the smallest gang size that failed
    cycle_no, next_start = 0, 0
    ready, n_ready = np.zeros(n_slots, np.int64), np.zeros(1, np.int64)  # the ready nodes in the seeded order
    # ... and (the indexed walk) those of each set of pools, rack and block
    by_pools, by_pools_n = np.zeros((1 << n_pools, n_slots), np.int64), np.zeros(1 << n_pools, np.int64)
    rack_size, block_size = np.zeros(n_racks, np.int64), np.zeros(n_blocks, np.int64)
    for n in range(n_slots):
        rack_size[slot_rack[n]] += 1
        block_size[slot_block[n]] += 1
    by_rack, by_rack_n = np.zeros((n_racks, rack_size.max()), np.int64), np.zeros(n_racks, np.int64)
    by_block, by_block_n = np.zeros((n_blocks, block_size.max()), np.int64), np.zeros(n_blocks, np.int64)
    max_job = int(job_size.max())
    trial_node, trial_mask = np.zeros(max_job, np.int64), np.zeros(max_job, np.int64)
    group_cap = np.zeros(max(n_racks, n_blocks), np.int64)
    have = np.zeros(n_slots, np.int64)  # the planner's scratch: what it has, candidates, a snapshot
    cand = np.zeros(n_slots + max_job, np.int64)
    s_cpu, s_mem = np.zeros(n_slots + max_job, np.int64), np.zeros(n_slots + max_job, np.int64)
    s_gpu = np.zeros((n_slots + max_job, 10), np.int64)
    plan_at = np.zeros(max_job, np.int64)  # the plan: each pod's candidate, the best one's nodes and new slots
    best_plan = np.zeros(max_job, np.int64)
    best_open = np.zeros(max_job, np.int64)
    demand = np.zeros(n_pools, np.int64)
    arrival_submit = job_submit[arrival_jobs]
    next_arrival = 0
    now = last = 0.0
    next_scan = 0.0  # scans on the grid 0, s, 2s, ...: the earliest next one
    dirty = True

    for q in range(n_pools):  # each pool's min_size nodes, ready at 0
        for i in range(pool_min[q]):
            n = pool_first[q] + i
            node_status[n] = READY
            gpu_reset(gpu_free, n, slot_ngpu[n])
            sync(hot, n, cpu_free, mem_free, gpu_free, slot_ngpu[n], slot_nvl[n], slot_numa[n])
            pool_present[q] += 1
            rack_free[slot_rack[n]] -= 1
            acc[EXIST] += slot_ngpu[n] * WHOLE
            acc[READY_MILLI] += slot_ngpu[n] * WHOLE
            ready_insert(ready, n_ready, slot_rank, n)
            index_ready(n, True, slot_pool, slot_rack, slot_block, slot_rank, by_pools, by_pools_n, by_rack,
                        by_rack_n, by_block, by_block_n)
            if slot_committed[n]:
                acc[COMMITTED_EMPTY] -= slot_ngpu[n] * WHOLE

    while True:
        # ---- the next instant: an event, an arrival or a scan -------------------------------
        t = ht[0] if hstate[0] else np.inf
        if next_arrival < len(arrival_jobs) and arrival_submit[next_arrival] < t:
            t = arrival_submit[next_arrival]
        wants_scan = n_queue > 0 or n_empty[0] > 0 or scanned_layout != layout_version
        if wants_scan:
            t = min(t, max(next_scan, np.ceil(now / scan_s) * scan_s))
        if t > horizon or not np.isfinite(t):
            break
        dt = t - last  # ---- integrate the accounting up to t
        if dt > 0:
            stats[S_BILLED] += (acc[EXIST] + acc[COMMITTED_EMPTY]) * dt
            stats[S_USED] += acc[USED] * dt
            stats[S_BOOTING] += acc[BOOTING_MILLI] * dt
            stats[S_UNALLOCATED] += (acc[READY_MILLI] - acc[USED] - acc[GANG_WAIT]) * dt
            stats[S_GANG_WAIT] += acc[GANG_WAIT] * dt
            stats[S_COMMITTED] += acc[COMMITTED_EMPTY] * dt
        now = last = t
        # ---- events due: pod ends, nodes ready -------------------------------------------
        while hstate[0] and ht[0] <= now:
            kind, ident = hk[0], hi[0]
            hstate[0] = heap_pop(ht, hs, hk, hi, hstate[0])
            stats[S_EVENTS] += 1
            dirty = True
            if kind == EV_END:
                p = ident
                n = pod_node[p]
                cpu_free[n] += pod_cpu[p]
                mem_free[n] += pod_mem[p]
                gpu_give(gpu_free, n, slot_ngpu[n], pod_mask[p], pod_milli[p])
                sync(hot, n, cpu_free, mem_free, gpu_free, slot_ngpu[n], slot_nvl[n], slot_numa[n])
                acc[USED] -= pod_gpus[p] * pod_milli[p]
                pod_status[p] = DONE
                if pod_prev[p] >= 0:
                    pod_next[pod_prev[p]] = pod_next[p]
                else:
                    node_head[n] = pod_next[p]
                if pod_next[p] >= 0:
                    pod_prev[pod_next[p]] = pod_prev[p]
                node_npods[n] -= 1
                if node_npods[n] == 0 and not slot_committed[n]:
                    set_add(empty_items, empty_pos, n_empty, n)
                cap_version += 1
                set_add(grown_items, grown_pos, n_grown, n)
                stats[S_POD_ENDS] += 1
                continue
            n = ident  # a node is ready: its planned pods run, or wait for their gang
            node_status[n] = READY
            ready_insert(ready, n_ready, slot_rank, n)
            index_ready(n, True, slot_pool, slot_rack, slot_block, slot_rank, by_pools, by_pools_n, by_rack,
                        by_rack_n, by_block, by_block_n)
            next_start %= n_ready[0]
            acc[BOOTING_MILLI] -= slot_ngpu[n] * WHOLE
            acc[READY_MILLI] += slot_ngpu[n] * WHOLE
            set_remove(boot_items, boot_pos, n_boot, n)
            layout_version += 1
            cap_version += 1
            set_add(grown_items, grown_pos, n_grown, n)
            if node_npods[n] == 0 and not slot_committed[n]:
                set_add(empty_items, empty_pos, n_empty, n)
            p = node_head[n]
            while p >= 0:
                j = pod_job[p]
                job_ready_bound[j] += 1
                if np.isnan(job_started[j]):
                    acc[GANG_WAIT] += pod_gpus[p] * pod_milli[p]
                else:
                    run_pod(p, now, pod_status, pod_gpus, pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate)
                p = pod_next[p]
            p = node_head[n]
            while p >= 0:
                j = pod_job[p]
                if np.isnan(job_started[j]) and job_ready_bound[j] >= job_min[j]:
                    start_job(j, now, job_first, job_size, job_submit, job_started, pod_status, pod_node,
                              node_status, pod_gpus, pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate, stats)
                p = pod_next[p]
            stats[S_NODES_READY] += 1
        # ---- arrivals: each job whole at its submit time, into the queue -----------------
        while next_arrival < len(arrival_jobs) and arrival_submit[next_arrival] <= now:
            j = arrival_jobs[next_arrival]
            next_arrival += 1
            stats[S_EVENTS] += 1
            stats[S_ARRIVALS] += 1
            refused = False
            for p in range(job_first[j], job_first[j] + job_size[j]):
                refused |= pod_pools[p] == 0  # no pool's node could ever hold it
            for p in range(job_first[j], job_first[j] + job_size[j]):
                pod_status[p] = REFUSED if refused else PENDING
            if refused:
                continue
            i = n_queue  # PrioritySort: priority (higher first), then submit, then job
            while i > 0:
                o = queue[i - 1]
                if job_prio[o] > job_prio[j] or (job_prio[o] == job_prio[j] and (
                        job_submit[o] < job_submit[j] or (job_submit[o] == job_submit[j] and o < j))):
                    break
                queue[i] = o
                i -= 1
            queue[i] = j
            n_queue += 1
            dirty = True
        # ---- the loop's step: the placer; on its cadence the planner, scale-down, the placer
        wants_scan = n_queue > 0 or n_empty[0] > 0 or scanned_layout != layout_version
        scan_now = wants_scan and now >= max(next_scan, np.ceil(now / scan_s) * scan_s)
        for phase in range(3 if scan_now else 1):
            if phase == 1:
                # ---- a planner scan ----------------------------------------------------------
                next_scan = (np.floor(now / scan_s) + 1) * scan_s
                stats[S_SCANS] += 1
                demand[:] = 0  # the demand seen per pool: queued pods, and those placed of the window
                for qi in range(n_queue):
                    j = queue[qi]
                    for p in range(job_first[j], job_first[j] + job_size[j]):
                        for q in range(n_pools):
                            if (pod_pools[p] >> q) & 1:
                                demand[q] += pod_gpus[p] * pod_milli[p]
                a = next_arrival - 1
                while a >= 0 and arrival_submit[a] > now - demand_window_s:
                    j = arrival_jobs[a]
                    a -= 1
                    if job_placed[j]:
                        for p in range(job_first[j], job_first[j] + job_size[j]):
                            for q in range(n_pools):
                                if (pod_pools[p] >> q) & 1:
                                    demand[q] += pod_gpus[p] * pod_milli[p]
                qi = 0
                while qi < n_queue:
                    j = queue[qi]
                    qi += 1
                    if planned_at[j] == layout_version:
                        continue
                    first, size, loc = job_first[j], job_size[j], job_loc[j]
                    f_pools, f_cpu, f_mem = pod_pools[first], pod_cpu[first], pod_mem[first]  # its first pod
                    f_gpus, f_milli, f_dom = pod_gpus[first], pod_milli[first], pod_dom[first]
                    stats[S_PLANS] += 1
                    # what it has: ready nodes with room for its pod, then booting nodes
                    scan, n_scan = (by_pools[pod_pools[first]], by_pools_n[pod_pools[first]]) if indexed else (
                        ready, n_ready[0])
                    n_have = fitting(hot, scan, n_scan, have, slot_block, group_cap[:0], f_pools, f_cpu, f_mem,
                                     f_gpus, f_milli, f_dom)
                    for b in range(n_boot[0]):
                        have[n_have] = boot_items[b]
                        n_have += 1
                    best_cost, best_opened, best_pool = np.inf, 0, -2
                    for q in range(-1, n_pools):  # -1: only what it has
                        n_new = 0
                        if q == -1:
                            if n_have == 0 or (loc != 0 and size > 1):
                                continue
                        else:
                            usable = True
                            for p in range(first, first + size):
                                usable &= (pod_pools[p] >> q) & 1 == 1
                            want = size
                            if now < backoff_until[q]:  # backed off: only within what it held
                                want = min(want, ceiling[q] - pool_present[q])
                            if not usable or want <= 0:
                                continue
                            rack = -1
                            if loc == 1:  # the pool's rack with the most free slots
                                most = 0
                                for r in range(slot_rack[pool_first[q]],
                                               slot_rack[pool_first[q] + pool_count[q] - 1] + 1):
                                    if rack_free[r] > most:
                                        most, rack = rack_free[r], r
                                if rack < 0:
                                    continue
                            for n in range(pool_first[q], pool_first[q] + pool_count[q]):
                                if n_new == want:
                                    break
                                if node_status[n] == ABSENT and (rack < 0 or slot_rack[n] == rack):
                                    cand[n_have + n_new] = n
                                    n_new += 1
                            if n_new == 0:
                                continue
                        m = 0  # the snapshot: what it has (in the new slots' group, a local gang), new slots
                        for h in range(n_have):
                            n = have[h]
                            if loc != 0 and q >= 0:
                                g0 = slot_rack[cand[n_have]] if loc == 1 else slot_block[cand[n_have]]
                                if (slot_rack[n] if loc == 1 else slot_block[n]) != g0:
                                    continue
                            cand[m] = n
                            s_cpu[m], s_mem[m] = cpu_free[n], mem_free[n]
                            s_gpu[m, :] = gpu_free[n, :]
                            m += 1
                        n_usable = m
                        for k in range(n_new):
                            n = cand[n_have + k]
                            cand[m] = n
                            s_cpu[m], s_mem[m] = slot_cpu[n], slot_mem[n]
                            gpu_reset(s_gpu, m, slot_ngpu[n])
                            m += 1
                        opened = 0
                        packed = True
                        for i in range(size):  # first fit, a new slot opened when nothing open fits
                            p = first + i
                            at = -1
                            c = 0
                            while c < n_usable + opened or opened < n_new:
                                if c == n_usable + opened:
                                    opened += 1
                                n = cand[c]
                                dom = slot_ngpu[n] if pod_dom[p] == 0 else (
                                    slot_nvl[n] if pod_dom[p] == 1 else slot_numa[n])
                                if ((pod_pools[p] >> slot_pool[n]) & 1 and s_cpu[c] >= pod_cpu[p]
                                        and s_mem[c] >= pod_mem[p]
                                        and gpu_fits(s_gpu, c, slot_ngpu[n], pod_gpus[p], pod_milli[p], dom)):
                                    gpu_take(s_gpu, c, slot_ngpu[n], pod_gpus[p], pod_milli[p], dom)
                                    s_cpu[c] -= pod_cpu[p]
                                    s_mem[c] -= pod_mem[p]
                                    at = c
                                    break
                                c += 1
                            if at < 0:
                                packed = False
                                break
                            plan_at[i] = at
                        if not packed:
                            continue
                        cost = 0.0  # the share of the new nodes it pays for, beyond committed slots
                        if q >= 0 and opened > 0:
                            cc = mm = gg = fc = fm = fg = committed = 0
                            for k in range(n_usable, n_usable + opened):
                                n = cand[k]
                                cc += slot_cpu[n]
                                mm += slot_mem[n]
                                gg += slot_ngpu[n] * WHOLE
                                fc += s_cpu[k]
                                fm += s_mem[k]
                                fg += s_gpu[k, :slot_ngpu[n]].sum()
                                committed += slot_committed[n]
                            used = max(1 - fc / cc, 1 - fm / mm)
                            if gg:
                                used = max(used, 1 - fg / gg)
                            idle = max(0.0, 1 - demand[q] / gg) if gg else 0.0
                            cost = (opened - committed) * pool_price[q] * min(1.0, used + idle)
                        if best_pool == -2 or cost < best_cost or (cost == best_cost and opened < best_opened):
                            best_cost, best_opened, best_pool = cost, opened, q
                            for i in range(size):
                                best_plan[i] = cand[plan_at[i]]
                            for k in range(opened):
                                best_open[k] = cand[n_usable + k]
                    if best_pool == -2:  # no pool can hold it now: it waits for the layout to change
                        planned_at[j] = layout_version
                        continue
                    if best_opened:
                        q = best_pool
                        if pool_stock[q] >= 0 and pool_present[q] + best_opened > pool_stock[q]:
                            stats[S_SHORT] += 1  # short: all or nothing, so none; the pool backs off
                            backoff_len[q] = backoff_s if backoff_len[q] == 0 else min(2 * backoff_len[q],
                                                                                       max_backoff_s)
                            backoff_until[q] = now + backoff_len[q]
                            ceiling[q] = pool_present[q]
                            qi -= 1  # planned again at once
                            continue
                        backoff_len[q] = 0.0
                        for k in range(best_opened):
                            n = best_open[k]
                            node_status[n] = BOOTING
                            cpu_free[n], mem_free[n] = slot_cpu[n], slot_mem[n]
                            gpu_reset(gpu_free, n, slot_ngpu[n])
                            sync(hot, n, cpu_free, mem_free, gpu_free, slot_ngpu[n], slot_nvl[n], slot_numa[n])
                            pool_present[q] += 1
                            rack_free[slot_rack[n]] -= 1
                            acc[EXIST] += slot_ngpu[n] * WHOLE
                            acc[BOOTING_MILLI] += slot_ngpu[n] * WHOLE
                            if slot_committed[n]:
                                acc[COMMITTED_EMPTY] -= slot_ngpu[n] * WHOLE
                            set_add(boot_items, boot_pos, n_boot, n)
                            heap_push_state(ht, hs, hk, hi, hstate,
                                            now + np.random.uniform(pool_boot_min[q], pool_boot_max[q]),  # noqa: NPY002 (numba: legacy API)
                                            EV_READY, n)
                            stats[S_PROVISIONED] += 1
                        layout_version += 1
                        last_scale_up = now
                    for i in range(size):  # bind the plan, on ready and booting nodes
                        p = first + i
                        n = best_plan[i]
                        dom = slot_ngpu[n] if pod_dom[p] == 0 else (slot_nvl[n] if pod_dom[p] == 1 else slot_numa[n])
                        mask = gpu_take(gpu_free, n, slot_ngpu[n], pod_gpus[p], pod_milli[p], dom)
                        cpu_free[n] -= pod_cpu[p]
                        mem_free[n] -= pod_mem[p]
                        sync(hot, n, cpu_free, mem_free, gpu_free, slot_ngpu[n], slot_nvl[n], slot_numa[n])
                        if mask < 0 or cpu_free[n] < 0 or mem_free[n] < 0:  # over-committed
                            stats[S_VIOLATIONS] += 1
                        pod_node[p], pod_mask[p], pod_status[p] = n, mask, BOUND
                        pod_prev[p], pod_next[p] = -1, node_head[n]
                        if node_head[n] >= 0:
                            pod_prev[node_head[n]] = p
                        node_head[n] = p
                        node_npods[n] += 1
                        set_remove(empty_items, empty_pos, n_empty, n)
                        unneeded_at[n] = -1.0
                        stats[S_BINDS] += 1
                        if node_status[n] == READY:
                            job_ready_bound[j] += 1
                            acc[GANG_WAIT] += pod_gpus[p] * pod_milli[p]
                        else:
                            stats[S_BINDS_ON_BOOTING] += 1
                    job_placed[j] = size
                    if job_ready_bound[j] >= job_min[j]:
                        start_job(j, now, job_first, job_size, job_submit, job_started, pod_status, pod_node,
                                  node_status, pod_gpus, pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate, stats)
                    for p in range(first, first + size):  # planned: no longer queued demand
                        for q in range(n_pools):
                            if (pod_pools[p] >> q) & 1:
                                demand[q] -= pod_gpus[p] * pod_milli[p]
                    qi -= 1
                    queue[qi:n_queue - 1] = queue[qi + 1:n_queue]
                    n_queue -= 1
                    dirty = True
                # ---- scale-down: empty nodes unneeded long enough, 10 a scan, none after a scale-up
                removed = 0
                e = 0
                while e < n_empty[0]:
                    n = empty_items[e]
                    e += 1
                    if node_status[n] != READY:
                        continue
                    if unneeded_at[n] < 0:
                        unneeded_at[n] = now
                        continue
                    q = slot_pool[n]
                    if (now - unneeded_at[n] < unneeded_s or now - last_scale_up < delay_after_add_s
                            or removed == max_removals or pool_present[q] <= pool_min[q]):
                        continue
                    node_status[n] = ABSENT
                    ready_remove(ready, n_ready, slot_rank, n)
                    index_ready(n, False, slot_pool, slot_rack, slot_block, slot_rank, by_pools, by_pools_n, by_rack,
                                by_rack_n, by_block, by_block_n)
                    next_start %= max(n_ready[0], 1)
                    pool_present[q] -= 1
                    rack_free[slot_rack[n]] += 1
                    acc[EXIST] -= slot_ngpu[n] * WHOLE
                    acc[READY_MILLI] -= slot_ngpu[n] * WHOLE
                    unneeded_at[n] = -1.0
                    set_remove(empty_items, empty_pos, n_empty, n)
                    e -= 1
                    removed += 1
                    stats[S_REMOVED] += 1
                    layout_version += 1
                scanned_layout = layout_version
                continue
            # ---- a scheduler cycle (phases 0 and 2) ------------------------------------------
            if not dirty or n_queue == 0:
                if n_queue == 0:
                    while n_grown[0]:
                        set_remove(grown_items, grown_pos, n_grown, grown_items[0])
                continue
            dirty = False
            cycle_no += 1
            stats[S_CYCLES] += 1
            k_feasible = num_feasible(n_ready[0])
            qi = 0
            while qi < n_queue:
                j = queue[qi]
                qi += 1
                first, size, loc = job_first[j], job_size[j], job_loc[j]
                f_pools, f_cpu, f_mem = pod_pools[first], pod_cpu[first], pod_mem[first]  # its first pod
                f_gpus, f_milli, f_dom = pod_gpus[first], pod_milli[first], pod_dom[first]
                if tried_at[j] >= 0 and tried_at[j] != cap_version:  # QueueingHints: a grown node fits it?
                    helped = False
                    for gi in range(n_grown[0]):
                        n = grown_items[gi]
                        if node_status[n] == READY and fits_row(hot, n, f_pools, f_cpu, f_mem, f_gpus, f_milli, f_dom):
                            helped = True
                            break
                    if not helped:
                        tried_at[j] = cap_version
                if tried_at[j] == cap_version:
                    continue
                key = pod_shape[first] * 3 + loc
                if failed_cycle[key] == cycle_no and failed_size[key] <= size:  # failed this cycle
                    tried_at[j] = cap_version
                    continue
                stats[S_ATTEMPTS] += 1
                n_groups = 0  # a local gang: the racks or blocks whose ready nodes can hold it
                if loc != 0:
                    n_groups = n_racks if loc == 1 else n_blocks
                    group_cap[:n_groups] = 0
                    scan, n_scan = (by_pools[pod_pools[first]], by_pools_n[pod_pools[first]]) if indexed else (
                        ready, n_ready[0])
                    fitting(hot, scan, n_scan, have, slot_rack if loc == 1 else slot_block, group_cap, f_pools,
                            f_cpu, f_mem, f_gpus, f_milli, f_dom)  # a member a node here
                placed = False
                for g in range(-1 if n_groups == 0 else 0, max(n_groups, 0)):
                    if g >= 0 and group_cap[g] < size:
                        continue
                    ok = True
                    for i in range(size):
                        p = first + i
                        if not indexed:
                            nodes, count = ready, n_ready[0]
                        elif g < 0:
                            nodes, count = by_pools[pod_pools[p]], by_pools_n[pod_pools[p]]
                        elif loc == 1:
                            nodes, count = by_rack[g], by_rack_n[g]
                        else:
                            nodes, count = by_block[g], by_block_n[g]
                        best, next_start = walk_step(g, slot_rack if loc == 1 else slot_block, next_start,
                                                     k_feasible, ready, n_ready[0], nodes, count, slot_rank, hot,
                                                     pod_pools[p], pod_cpu[p], pod_mem[p], pod_gpus[p], pod_milli[p],
                                                     pod_dom[p])
                        if best < 0:  # Unreserve the trial
                            ok = False
                            for b in range(i):
                                cpu_free[trial_node[b]] += pod_cpu[first + b]
                                mem_free[trial_node[b]] += pod_mem[first + b]
                                gpu_give(gpu_free, trial_node[b], slot_ngpu[trial_node[b]], trial_mask[b],
                                         pod_milli[first + b])
                                nb = trial_node[b]
                                sync(hot, nb, cpu_free, mem_free, gpu_free, slot_ngpu[nb], slot_nvl[nb], slot_numa[nb])
                            break
                        dom = slot_ngpu[best] if pod_dom[p] == 0 else (
                            slot_nvl[best] if pod_dom[p] == 1 else slot_numa[best])
                        trial_mask[i] = gpu_take(gpu_free, best, slot_ngpu[best], pod_gpus[p], pod_milli[p], dom)
                        trial_node[i] = best
                        cpu_free[best] -= pod_cpu[p]
                        mem_free[best] -= pod_mem[p]
                        sync(hot, best, cpu_free, mem_free, gpu_free, slot_ngpu[best], slot_nvl[best], slot_numa[best])
                        if trial_mask[i] < 0 or cpu_free[best] < 0 or mem_free[best] < 0:  # over-committed
                            stats[S_VIOLATIONS] += 1
                    if ok:
                        placed = True
                        break
                if not placed:
                    tried_at[j] = cap_version
                    if failed_cycle[key] != cycle_no or failed_size[key] > size:
                        failed_cycle[key] = cycle_no
                        failed_size[key] = size
                    continue
                for i in range(size):  # bound on ready nodes: the job starts
                    p = first + i
                    n = trial_node[i]
                    pod_node[p], pod_mask[p], pod_status[p] = n, trial_mask[i], BOUND
                    pod_prev[p], pod_next[p] = -1, node_head[n]
                    if node_head[n] >= 0:
                        pod_prev[node_head[n]] = p
                    node_head[n] = p
                    node_npods[n] += 1
                    set_remove(empty_items, empty_pos, n_empty, n)
                    unneeded_at[n] = -1.0
                    acc[GANG_WAIT] += pod_gpus[p] * pod_milli[p]
                    stats[S_BINDS] += 1
                job_placed[j] = size
                job_ready_bound[j] = size
                start_job(j, now, job_first, job_size, job_submit, job_started, pod_status, pod_node,
                          node_status, pod_gpus, pod_milli, pod_dur, acc, ht, hs, hk, hi, hstate, stats)
                qi -= 1
                queue[qi:n_queue - 1] = queue[qi + 1:n_queue]
                n_queue -= 1
            while n_grown[0]:
                set_remove(grown_items, grown_pos, n_grown, grown_items[0])
    stats[S_END_USED], stats[S_END_GANG_WAIT] = acc[USED], acc[GANG_WAIT]  # what is running, waiting at the end
    return stats, pod_status, pod_node, node_status, cpu_free, mem_free, gpu_free


# ---- the driver (Python, not timed) ------------------------------------------------------------
def inputs(trace: Path, seed: int = 0, indexed: bool = True) -> dict:
    """The prototype's arrays from the harness's own build of the scale replay (the trace compiled
    against conf/cluster/scale.yaml, the seeded node order, the horizon): pods in job order."""
    from harness.config import compose
    from harness.replay import build
    from harness.workload import pools_fit

    cfg = compose("config", ["loop=merged", "cluster=scale", f"trace.path={trace}", f"seed={seed}"])
    sim, _ = build(cfg)
    w, st, cluster = sim.w, sim.state, sim.cluster
    pods = w.pods_by_job  # job after job
    sizes = np.diff(w.job_bounds)
    if not (w.submit[pods] == np.repeat(w.job_submit, sizes)).all():
        raise ValueError(f"{trace}: a job's pods arrive at different times; the prototype streams jobs whole")
    fit = pools_fit(cluster, w)[:, pods]
    types = [cluster.node_types[cluster.type_index(pool.node_type)] for pool in cluster.pools]
    slot_type = np.array([types[p] for p in st.slot_pool.tolist()], dtype=object)
    ngpu = np.array([t.gpus for t in slot_type], np.int64)
    slot_pools = [st.pool_slots(p) for p in range(len(cluster.pools))]
    return {
        "seed": seed, "horizon": float(sim.horizon), "scan_s": 10.0,
        "pod_cpu": w.cpu[pods].astype(np.int64), "pod_mem": w.mem[pods].astype(np.int64),
        "pod_gpus": w.gpus[pods].astype(np.int64), "pod_milli": w.milli[pods].astype(np.int64),
        "pod_dom": np.where(w.numa[pods], 2, np.where(w.nvlink[pods], 1, 0)).astype(np.int64),
        "pod_pools": (fit.astype(np.int64) << np.arange(len(cluster.pools))[:, None]).sum(axis=0),
        "pod_dur": sim._duration[pods].astype(np.float64),
        "pod_shape": w.shape[pods].astype(np.int64),
        "pod_job": np.repeat(np.arange(w.n_jobs), sizes).astype(np.int64),
        "job_first": w.job_bounds[:-1].astype(np.int64), "job_size": sizes.astype(np.int64),
        "job_min": w.job_min_member.astype(np.int64), "job_loc": w.job_locality.astype(np.int64),
        "job_prio": w.job_priority.astype(np.int64), "job_submit": w.job_submit.astype(np.float64),
        "arrival_jobs": np.argsort(w.job_submit, kind="stable").astype(np.int64),
        "slot_pool": st.slot_pool.astype(np.int64), "slot_rack": st.slot_rack.astype(np.int64),
        "slot_block": st.slot_block.astype(np.int64), "slot_ngpu": ngpu,
        "slot_nvl": np.array([max(t.gpus // t.nvlink_domains, 1) for t in slot_type], np.int64),
        "slot_numa": np.array([max(t.gpus // t.numa_domains, 1) for t in slot_type], np.int64),
        "slot_cpu": np.array([t.cpu_milli for t in slot_type], np.int64),
        "slot_mem": np.array([t.memory_mib for t in slot_type], np.int64),
        "slot_committed": st.slot_committed.astype(np.int64),
        "slot_rank": sim.node_rank.astype(np.int64),
        "pool_first": np.array([s.start for s in slot_pools], np.int64),
        "pool_count": np.array([s.stop - s.start for s in slot_pools], np.int64),
        "pool_price": np.array([pool.price for pool in cluster.pools], np.float64),
        "pool_boot_min": np.array([pool.boot_delay.min_s for pool in cluster.pools], np.float64),
        "pool_boot_max": np.array([pool.boot_delay.max_s for pool in cluster.pools], np.float64),
        "pool_stock": np.array([-1 if pool.stock is None else pool.stock for pool in cluster.pools], np.int64),
        "pool_min": np.array([pool.min_size for pool in cluster.pools], np.int64),
        "n_racks": int(st.slot_rack.max()) + 1, "n_blocks": int(st.slot_block.max()) + 1,
        "n_shapes": int(w.shape.max()) + 1,
        "unneeded_s": 600.0, "delay_after_add_s": 600.0, "max_removals": 10, "demand_window_s": 600.0,
        "backoff_s": 300.0, "max_backoff_s": 1800.0, "indexed": indexed,
    }


def figures(stats: np.ndarray, pod_status: np.ndarray) -> dict:
    """The figures compared with the real merged loop (accelerator-hours from milli-seconds)."""
    out = {name: float(v) for name, v in zip(STATS, stats, strict=True)}
    hours = {f"{k[:-3]}_h": out.pop(k) / 3.6e6 for k in [s for s in STATS if s.endswith("_ms")]}
    hours["idle_h"] = hours["billed_h"] - hours["used_h"]
    counts = np.bincount(pod_status, minlength=6)
    return {**out, **hours, "pods_done": int(counts[DONE]), "pods_running": int(counts[RUNNING]),
            "pods_bound": int(counts[BOUND]), "pods_pending": int(counts[PENDING]),
            "pods_refused": int(counts[REFUSED])}


def timed(args: dict) -> tuple[dict, float, float, tuple]:
    """One replay: (its summary, wall s, CPU s, its raw outputs)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = replay(**args)
    return figures(out[0], out[1]), time.perf_counter() - w0, time.process_time() - c0, out


def calibration() -> str:
    calib = ROOT.parent / "shared" / "tools" / "calib.py"
    if not calib.exists():
        return "n/a"
    return subprocess.run([sys.executable, str(calib)], capture_output=True, text=True).stdout.split()[-1]


def generate(pods: int, folder: Path) -> Path:
    """bench_scale.py's trace for this many pods (its generator preset and span)."""
    trace = folder / f"scale_{pods}.parquet"
    if not trace.exists():
        subprocess.run([sys.executable, "-m", "harness.cli", "generate", "workload=scale",
                        f"workload.n_jobs={int(pods * JOBS_PER_POD)}", f"workload.span_s={int(pods * SPAN_PER_POD_S)}",
                        f"out={trace}", "check_fits=false"], cwd=ROOT, check=True, capture_output=True)
    return trace


# The real merged loop on a trace (argv[1]), as bench_scale.py builds it, with any further config
# overrides (argv[2:]); prints the compared figures as JSON
REAL = """
import json, sys, time
from harness.config import compose
from harness.metrics import MILLI_HOUR
from harness.replay import build
from harness.status import DONE
import numpy as np
sim, loop = build(compose("config", ["loop=merged", "cluster=scale", f"trace.path={sys.argv[1]}", *sys.argv[2:]]))
count = {"binds": 0, "unbinds": 0}
sim.hooks.bound.append(lambda p, n: count.__setitem__("binds", count["binds"] + 1))
sim.hooks.unbound.append(lambda j: count.__setitem__("unbinds", count["unbinds"] + 1))
c0 = time.process_time()
sim.run(loop)
tot, w = sim.acct.totals, sim.w
gang = w.job_min_member > 1
wait = sim.job_started - w.job_submit
print(json.dumps({"cpu_s": time.process_time() - c0, "events": sim.n_events, **count,
                  "nodes_provisioned": sum(1 for r in sim.nodes if r.requested_at > 0),
                  "pods_done": int((sim.pod_status == DONE).sum()), "jobs_started": int(np.isfinite(wait).sum()),
                  "start_wait_s": float(np.nansum(wait)), "gang_start_wait_s": float(np.nansum(wait[gang])),
                  **{f"{k}_h": tot[k] / MILLI_HOUR
                     for k in ("billed", "used", "booting", "unallocated", "gang_wait", "committed")},
                  "idle_h": (tot["billed"] - tot["used"]) / MILLI_HOUR}))
"""
COMPARED = [("events", "events"), ("binds", "binds"), ("unbinds (drains, timeouts)", "unbinds"),
            ("nodes provisioned", "nodes_provisioned"), ("pods done", "pods_done"),
            ("mean job start wait s", "start_wait_s"), ("mean gang start wait s", "gang_start_wait_s"),
            ("idle accel h", "idle_h"), ("... booting", "booting_h"), ("... unallocated", "unallocated_h"),
            ("... gang wait", "gang_wait_h"), ("... committed", "committed_h"), ("used accel h", "used_h")]


def compare(trace: Path, result: dict, n_jobs: int, n_gangs: int, overrides: list[str]) -> None:
    """The real merged loop's figures beside the prototype's (relative difference)."""
    out = subprocess.run([sys.executable, "-c", REAL, str(trace), *overrides], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    real = json.loads(out.stdout.strip().splitlines()[-1])
    mine = {**result, "unbinds": 0.0}
    named = "".join(" " + o for o in overrides)
    print(f"\n{trace.name}: real merged loop{named} (replay CPU {real['cpu_s']:.1f} s, with two counting hooks) "
          "against the prototype\n\n| figure | real | prototype | difference |\n|---|---|---|---|")
    for label, key in COMPARED:
        a, b = float(real[key]), float(mine[key])
        if key == "start_wait_s":
            a, b = a / n_jobs, b / n_jobs
        elif key == "gang_start_wait_s":
            a, b = a / n_gangs, b / n_gangs
        diff = f"{100 * (b - a) / a:+.1f}%" if a else "-"
        print(f"| {label} | {a:,.1f} | {b:,.1f} | {diff} |")
    print(flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,300000,1000000")
    ap.add_argument("--trace-dir", default=None, help="where the traces are (made there if absent)")
    ap.add_argument("--json", action="store_true", help="print each size's figures as one JSON line too")
    ap.add_argument("--full-walk", action="store_true",
                    help="walk every ready node for every pod, as the harness does (default: the indexed walk, "
                         "the same nodes found from the ready nodes of the pod's pools or group)")
    ap.add_argument("--compare", action="store_true", help="replay each trace through the real merged loop too")
    ap.add_argument("--real", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for the real loop's replay (consolidation=false: its scale-down as "
                         "the prototype's, empty nodes only)")
    args = ap.parse_args()
    folder = Path(args.trace_dir) if args.trace_dir else Path(tempfile.mkdtemp())
    print("| pods | build s | first call wall s | compile s (first - second) | replay wall s | replay CPU s "
          "| calib.py | events | binds | nodes provisioned | idle accel h |")
    print("|---" * 11 + "|")
    for pods in (int(x) for x in args.sizes.split(",")):
        b0 = time.perf_counter()
        arrays = inputs(generate(pods, folder), indexed=not args.full_walk)
        build_s = time.perf_counter() - b0
        _, first_wall, _, _ = timed(arrays)  # compiles (or loads numba's cache) then runs
        result, wall, cpu, _ = timed(arrays)
        unit = calibration()
        print(f"| {pods:,} | {build_s:.1f} | {first_wall:.2f} | {first_wall - wall:.2f} | {wall:.2f} | {cpu:.2f} | "
              f"{unit} | {result['events']:,.0f} | {result['binds']:,.0f} | {result['nodes_provisioned']:,.0f} | "
              f"{result['idle_h']:,.0f} |", flush=True)
        if args.json:
            print(json.dumps({"pods": pods, "wall_s": wall, "cpu_s": cpu, "calib": unit, **result}), flush=True)
        if args.compare:
            compare(folder / f"scale_{pods}.parquet", result, len(arrays["job_first"]),
                    int((arrays["job_size"] > 1).sum()), args.real)


if __name__ == "__main__":
    main()
