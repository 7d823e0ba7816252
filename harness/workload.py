"""A trace compiled against a cluster: struct-of-arrays pods and jobs the loops index by integer.

Compiling resolves what only the cluster knows (GPU model names to bits, partition profiles
to milli of one GPU), groups identical pod shapes into equivalence classes (one filter scan
serves every pod of a class, as Cluster Autoscaler does), and marks the pods that no node
type could ever hold, so no loop waits on them forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.cluster import Cluster
from harness.dra.translate import claim_of
from harness.errors import TraceError

LOCALITY_CODE = {"none": 0, "rack": 1, "block": 2}


@dataclass
class Services:
    """A trace's inference services (compiled with it by harness/services/workload.py): one entry
    per service (trace order), with its replica slots and demand windows as flat arrays cut by
    bounds (service s's are [bounds[s], bounds[s + 1]))."""

    name: np.ndarray  # str
    capacity: np.ndarray  # float64: demand units per second one ready replica serves
    cold_start: np.ndarray  # float64 s from a replica's start on a ready node to its readiness
    min_replicas: np.ndarray  # int64
    max_replicas: np.ndarray  # int64
    gpus_per_replica: np.ndarray  # float64 accelerators a replica holds (a share or partition: its fraction)
    slot_bounds: np.ndarray  # int64
    slot_job: np.ndarray  # int64 job index of each replica slot, k = 0, 1, ... of each service
    demand_bounds: np.ndarray  # int64
    demand_start: np.ndarray  # float64 s: a window's start (it lasts until the service's next one)
    demand_value: np.ndarray  # float64 demand units per second over the window
    unit: str = ""  # what a demand unit is (e.g. "tokens/s")

    @property
    def n(self) -> int:
        return len(self.name)

    def slots(self, s: int) -> np.ndarray:
        """Job indices of service s's replica slots, k = 0, 1, ..."""
        return self.slot_job[self.slot_bounds[s]:self.slot_bounds[s + 1]]

    def sealed(self, sealed) -> Services:
        """These services with their demand series replaced by `sealed` (what loops get)."""
        return replace(self, demand_start=sealed, demand_value=sealed)

    @property
    def last_window_start(self) -> float:
        return float(self.demand_start.max())


@dataclass
class Workload:
    # per pod
    pod_id: np.ndarray
    job: np.ndarray  # int32 job index
    submit: np.ndarray  # float64 s
    duration: np.ndarray  # float64 s, inf = runs to the end
    cpu: np.ndarray  # int64 milli
    mem: np.ndarray  # int64 MiB
    gpus: np.ndarray  # int32 GPUs touched
    milli: np.ndarray  # int32 milli per GPU touched (1000 = whole device)
    profile_bit: np.ndarray  # int64, bit of the partition profile, 0 = none
    model_mask: np.ndarray  # int64 allowed-model bits, 0 = any model
    nvlink: np.ndarray  # bool: all GPUs in one NVLink domain
    numa: np.ndarray  # bool: all GPUs in one NUMA domain
    nic: np.ndarray  # bool: a NIC paired with each GPU
    shape: np.ndarray  # int32 equivalence class
    never_fits: np.ndarray  # bool: no node type in the cluster can ever hold it
    #: int32: the nodes it may use (a `ClusterState.placement`, 0 = any): an admission layer's
    #: nodeSelector, set when it lets the job through (`Gate.admit`)
    placement: np.ndarray
    # per job
    job_id: np.ndarray
    job_pods: list  # list of int arrays, pod indices of each job (views of pods_by_job)
    pods_by_job: np.ndarray  # every pod index, job after job: job j's are [job_bounds[j], job_bounds[j + 1])
    job_bounds: np.ndarray
    job_min_member: np.ndarray
    job_submit: np.ndarray  # float64 s: the job's arrival, its first pod's
    job_priority: np.ndarray
    job_locality: np.ndarray  # int8 LOCALITY_CODE
    job_queue: np.ndarray
    #: int32: the service whose replica slot the job is (-1: a job of the trace)
    job_service: np.ndarray
    #: bool: an overprovisioning placeholder (a pause pod holding room, harness/services/buffers.py): no work
    job_placeholder: np.ndarray
    #: the trace's services, their slots and demand (None: a trace without services)
    services: Services | None = None
    #: per shape, the filter's rule for its pods (`filters.pod_rule`), filled on first use; a
    #: view made with `dataclasses.replace` (other requests, one shape) starts a cache of its own
    rules: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    #: int32 per pod: its claims, an index into `claim_sets` (-1: none, it runs by its device
    #: columns); None outside a DRA cluster, or in a view that forgets claims (`whatif.view_of`)
    claim: np.ndarray | None = None
    #: the distinct claims pods make, each a tuple of harness.dra.resources.Claim
    claim_sets: tuple = ()

    @property
    def n_pods(self) -> int:
        return len(self.pod_id)

    @property
    def job_of_trace(self) -> np.ndarray:
        """bool per job: the trace's own, neither a service's replica slot nor a placeholder."""
        return (self.job_service < 0) & ~self.job_placeholder

    @property
    def n_jobs(self) -> int:
        return len(self.job_id)

    def pods_of(self, jobs: np.ndarray) -> np.ndarray:
        """The pods of these jobs, job after job (each job's in `job_pods` order), in a few
        array steps however many jobs there are."""
        starts = self.job_bounds[jobs]
        sizes = self.job_bounds[jobs + 1] - starts
        return self.pods_by_job[np.arange(int(sizes.sum())) + np.repeat(starts - (np.cumsum(sizes) - sizes), sizes)]

    @cached_property
    def gpu_milli_total(self) -> np.ndarray:
        """GPU milli each pod occupies in all (share x GPUs); a view made with `dataclasses.replace`
        computes its own."""
        return self.gpus.astype(np.int64) * self.milli


def unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`np.unique(key, axis=0, return_inverse=True, return_counts=True)` for an integer matrix:
    the distinct rows in lexicographic order, each row's index among them and their counts, by
    one lexsort of the columns (numpy's row-wise unique sorts rows as records, ~2x slower on
    a million pods)."""
    order = np.lexsort(key.T[::-1])  # the first column sorts first
    rows = key[order]
    first = np.r_[True, (rows[1:] != rows[:-1]).any(axis=1)][:len(key)]
    inverse = np.empty(len(key), np.int64)
    inverse[order] = np.cumsum(first) - 1
    return rows[first], inverse, np.diff(np.r_[np.flatnonzero(first), len(key)])


def compile_workload(table: pa.Table, cluster: Cluster, file: str = "trace") -> Workload:
    """Turn a validated canonical trace table into arrays indexed by pod and job number."""
    col = lambda name: table.column(name).to_numpy(zero_copy_only=False)  # noqa: E731
    n = table.num_rows
    submit = col("submit_s").astype(np.float64)
    duration = table.column("duration_s").fill_null(np.inf).to_numpy(zero_copy_only=False).astype(np.float64)
    gpus = col("gpu_count").astype(np.int32)
    milli = col("gpu_milli").astype(np.int32)
    # partition profiles: a dictionary lookup per distinct name, not per pod
    profile_col = table.column("gpu_partition").combine_chunks().dictionary_encode()
    names = profile_col.dictionary.to_pylist()
    codes = profile_col.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    bit_of = np.array([1 << cluster.profiles.index(x) if x in cluster.partition_profiles else 0 for x in names] + [0],
                      np.int64)
    milli_of = np.array([cluster.partition_profiles.get(x, 0) for x in names] + [0], np.int32)
    profile_bit = bit_of[codes]  # code -1 picks the trailing 0: no profile
    partitioned = codes >= 0
    milli = np.where(partitioned, milli_of[codes], milli).astype(np.int32)
    never = partitioned & (profile_bit == 0)  # a profile no node type offers
    # allowed models: OR of the cluster's bits over each pod's list (0 = any model)
    models = table.column("gpu_models").combine_chunks()
    flat = pc.list_flatten(models).dictionary_encode()
    model_bits = np.array([cluster.model_bit(m) for m in flat.dictionary.to_pylist()] + [0], np.int64)
    lengths = pc.list_value_length(models).fill_null(0).to_numpy(zero_copy_only=False)
    listed = lengths > 0
    model_mask = np.zeros(n, np.int64)
    if listed.any():
        starts = np.r_[0, np.cumsum(lengths)[:-1]][listed]
        bits = model_bits[flat.indices.to_numpy(zero_copy_only=False)]
        model_mask[listed] = np.bitwise_or.reduceat(bits, starts)
    never |= listed & (model_mask == 0)  # only models the cluster does not have
    cpu = col("cpu_milli").astype(np.int64)
    mem = col("memory_mib").astype(np.int64)
    nvl = col("gpus_same_nvlink").astype(bool)
    numa = col("gpus_same_numa").astype(bool)
    nic = col("nic_per_gpu").astype(bool)
    key = np.stack([cpu, mem, gpus, milli, profile_bit, model_mask, nvl, numa, nic], axis=1)
    _, shape, _ = unique_rows(key)
    claim, claim_sets = (None, ()) if cluster.devices is None else _claims(table, cluster, shape.ravel(), key, file)
    if claim is None:
        never |= ~_fits_some_type(cluster, cpu, mem, gpus, milli, profile_bit, model_mask, nvl, numa, nic)
    else:
        never |= ~_claims_fit_some_type(cluster, cpu, mem, claim, claim_sets)
        _, shape, _ = unique_rows(np.c_[key, claim])

    job_ids, job = np.unique(col("job_id"), return_inverse=True)
    order = np.argsort(job, kind="stable")
    bounds = np.r_[0, np.flatnonzero(np.diff(job[order])) + 1, n]
    job_pods = [order[bounds[j]:bounds[j + 1]] for j in range(len(job_ids))]
    first = order[bounds[:-1]]
    return Workload(
        pod_id=col("pod_id"), job=job.astype(np.int32), submit=submit, duration=duration,
        cpu=cpu, mem=mem, gpus=gpus, milli=milli, profile_bit=profile_bit, model_mask=model_mask,
        nvlink=nvl, numa=numa, nic=nic,
        shape=shape.astype(np.int32).ravel(), never_fits=never, placement=np.zeros(n, np.int32),
        job_id=job_ids, job_pods=job_pods, pods_by_job=order, job_bounds=bounds.astype(np.int64),
        job_min_member=col("min_member")[first].astype(np.int32),
        job_submit=np.minimum.reduceat(submit[order], bounds[:-1]) if n else submit[first],
        job_priority=col("priority")[first].astype(np.int32),
        job_locality=_locality_codes(col("gang_locality")[first]),
        job_queue=col("queue")[first], job_service=np.full(len(job_ids), -1, np.int32),
        job_placeholder=np.zeros(len(job_ids), bool), claim=claim, claim_sets=claim_sets,
    )


def _claims(table: pa.Table, cluster: Cluster, shape: np.ndarray, key: np.ndarray,
            file: str) -> tuple[np.ndarray, tuple]:
    """Per pod its claims in a DRA cluster: the template its `claim` names, else (a pod with
    GPUs) the claim its device columns make; and the distinct claim sets. A template's share of
    each GPU must be the row's (`gpu_milli`, or its partition's): the GPU matrix mirrors it."""
    layer = cluster.devices
    assert layer is not None, "claims are compiled only in a DRA cluster"
    names = table.column("claim").combine_chunks().dictionary_encode()
    codes = names.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    sets: list[tuple] = []
    out = np.full(len(shape), -1, np.int32)
    for c, name in enumerate(names.dictionary.to_pylist()):
        rows = np.flatnonzero(codes == c)
        if name not in layer.claims:
            known = ", ".join(sorted(layer.claims)) or "none"
            raise TraceError(file, f"no claim template {name!r} in the cluster's dra.claims (known: {known})",
                             column="claim", row=int(rows[0]))
        claims = (layer.claims[name],)
        milli = layer.gpu_milli(claims, f"cluster.dra.claims.{name}")
        wrong = rows[key[rows, 3] != milli]
        if len(wrong):
            raise TraceError(file, f"claim {name!r} takes {milli} milli of each GPU it allocates, the row's "
                             f"gpu_milli (or partition) {int(key[wrong[0], 3])}: give the row its claim's share",
                             column="claim", row=int(wrong[0]))
        out[rows] = len(sets)
        sets.append(claims)
    columns = np.flatnonzero((codes < 0) & (key[:, 2] > 0))
    _, first, inverse = np.unique(shape[columns], return_index=True, return_inverse=True)
    made: dict[tuple, tuple] = {}  # shapes differing only in CPU or memory share one claims object
    for i, row in enumerate(columns[first].tolist()):
        devices = tuple(int(v) for v in key[row, 2:])
        if devices not in made:
            gpus, milli, profile_bit, model_mask, nvl, numa, nic = devices
            made[devices] = (claim_of(cluster.models, cluster.profiles, gpus, milli, profile_bit, model_mask,
                                      bool(nvl), bool(numa), bool(nic)),)
        sets.append(made[devices])
        out[columns[inverse.ravel() == i]] = len(sets) - 1
    return out, tuple(sets)


def _claims_fit_some_type(cluster: Cluster, cpu: np.ndarray, mem: np.ndarray, claim: np.ndarray,
                          claim_sets: tuple) -> np.ndarray:
    """Pods whose CPU, memory and claims an empty node of some type holds."""
    types = cluster.node_types
    room = np.stack([(cpu <= t.cpu_milli) & (mem <= t.memory_mib) for t in types], axis=1)  # pods x types
    allocatable = np.ones((len(claim_sets) + 1, len(types)), bool)  # the last row: no claim
    layer = cluster.devices
    assert layer is not None, "claims are compiled only in a DRA cluster"
    for c, claims in enumerate(claim_sets):
        allocatable[c] = layer.fits_empty(claims)
    return (room & allocatable[claim]).any(axis=1)


def _locality_codes(names: np.ndarray) -> np.ndarray:
    codes = np.zeros(len(names), np.int8)
    for name, code in LOCALITY_CODE.items():
        codes[names == name] = code
    return codes


def type_fits(nt, cluster: Cluster, cpu, mem, gpus, milli, profile_bit, model_mask, nvl, numa, nic) -> np.ndarray:
    """Mask of pods an empty node of type `nt` could hold (vectorized over pods)."""
    per_nvl = nt.gpus // nt.nvlink_domains if nt.gpus else 0
    per_numa = nt.gpus // nt.numa_domains if nt.gpus else 0
    prof_bits = sum(1 << cluster.profiles.index(p) for p in nt.partition_profiles)
    model_ok = (model_mask == 0) | ((model_mask & cluster.model_bit(nt.gpu_model)) != 0)
    ok = (cpu <= nt.cpu_milli) & (mem <= nt.memory_mib)
    gpu_ok = (gpus <= nt.gpus) & model_ok
    gpu_ok &= ~nvl | (gpus <= per_nvl)
    gpu_ok &= ~numa | (gpus <= per_numa)
    gpu_ok &= ~nic | nt.nic_per_gpu
    gpu_ok &= (profile_bit == 0) | ((profile_bit & prof_bits) != 0)
    return ok & ((gpus == 0) | gpu_ok)


def pools_fit(cluster: Cluster, w: Workload, devices: np.ndarray | None = None) -> np.ndarray:
    """pools x pods: could an empty node of the pool hold the pod (and does the pod tolerate
    the pool's taints)? `devices`: per pool, the device type its node is taken to publish (a
    node-group template, harness/dra/layer.py; None: its type's own)."""
    pods = (w.cpu, w.mem, w.gpus, w.milli, w.profile_bit, w.model_mask, w.nvlink, w.numa, w.nic)
    fit = np.stack([type_fits(cluster.node_types[cluster.type_index(pool.node_type)], cluster, *pods)
                    for pool in cluster.pools])
    claimed = np.zeros(w.n_pods, bool) if w.claim is None else w.claim >= 0
    if w.claim is not None and cluster.devices is not None and claimed.any():  # by their claims, not columns
        types = np.array([cluster.type_index(pool.node_type) for pool in cluster.pools])
        room = np.stack([(w.cpu <= t.cpu_milli) & (w.mem <= t.memory_mib) for t in cluster.node_types])[types]
        kinds, of_pool = np.unique(types if devices is None else devices, return_inverse=True)
        allocatable = np.stack([cluster.devices.fits_empty(claims, kinds) for claims in w.claim_sets])  # sets x kinds
        fit[:, claimed] = room[:, claimed] & allocatable[w.claim[claimed]][:, of_pool.ravel()].T
    if cluster.untolerated is not None:
        fit &= ~cluster.untolerated[(w.gpus > 0).astype(np.int64)].T
    return fit


def _fits_some_type(cluster, *pod_arrays) -> np.ndarray:
    fits = np.zeros(len(pod_arrays[0]), bool)
    for nt in cluster.node_types:
        fits |= type_fits(nt, cluster, *pod_arrays)
    return fits
