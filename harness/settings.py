"""Every setting of a run and the rule it must meet: one table, checked before anything is built.

A bad setting must not hang a replay (a period of 0 never moves the clock), crash it deep
inside (a seed of 'abc'), or quietly mean something else (a threshold of 2). So each setting
has a rule here, beside its reason, and a run is refused by key, value and rule:

    loop.autoscaler.scan_interval_s = 0: must be a number >= 1 (seconds between autoscaler scans)

`check_config` walks a composed Hydra config before instantiation (`loopbench replay`, every
runner, `loopbench generate`); the constructors call `check` on what they are given, so a
loop built from Python meets the same rules. Rules are keyed by component, the `_target_` of
a config node ("" for the top level), then by the setting's path inside it, `*` standing for
any one key (a queue's name, say); a component also has the rules of its base classes. A
cluster is validated by harness/cluster.py, against its own node types and pools.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import cast

from omegaconf import Container, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.errors import ConfigError
from harness.services.trace import MAX_REPLICAS
from harness.trace import MAX_CPU_MILLI, MAX_GPUS_PER_POD, MAX_MEMORY_MIB, MAX_TIME_S

#: Components validated elsewhere (walked past here): the cluster checks itself.
ELSEWHERE = {"harness.cluster.Cluster": "harness/cluster.py"}


@dataclass(frozen=True)
class Rule:
    """What one setting may be: a number or integer within bounds, a flag, one of a set of
    words, an integer grid [lo, hi, step], or a component (a part with its own `_target_`,
    an instance of class `base` from Python); `why` says what the setting means."""

    kind: str  # "number" | "integer" | "flag" | "choice" | "grid" | "component"
    why: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    null: bool = False
    choices: tuple[str, ...] = ()
    base: str = ""

    def allows(self, value) -> bool:
        if value is None:
            return self.null
        if self.kind == "flag":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "component":
            if isinstance(value, Mapping):
                return "_target_" in value
            module, _, name = self.base.rpartition(".")
            return isinstance(value, getattr(import_module(module), name))
        if self.kind == "grid":
            return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) in (2, 3)
                    and all(self._in_bounds(v, integer=True) for v in value)
                    and value[0] <= value[1] and (len(value) == 2 or value[2] > 0))
        return self._in_bounds(value, integer=self.kind == "integer")

    def _in_bounds(self, value, integer: bool) -> bool:
        kind = numbers.Integral if integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
            return False
        value = cast(float, value)  # a real number: compares with the float bounds
        lo_ok = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
        hi_ok = self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)
        return lo_ok and hi_ok

    def __str__(self) -> str:
        if self.kind == "flag":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(self.choices)
        elif self.kind == "component":
            text = f"an instance of {self.base.rpartition('.')[2]} or a config with a _target_ that builds one"
        elif self.kind == "grid":
            assert self.lo is not None, "a grid's lower bound is part of its rule"
            text = (f"[lo, hi] or [lo, hi, step] of integers with {_num(self.lo)} <= lo <= hi"
                    f"{'' if self.hi is None else f' <= {_num(self.hi)}'} and step > 0")
        else:
            text = f"{'an integer' if self.kind == 'integer' else 'a number'}{self._bounds()}"
        return f"must be {'null or ' if self.null else ''}{text}"

    def _bounds(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f" in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f" {'>' if self.lo_open else '>='} {_num(self.lo)}"
        if self.hi is not None:
            return f" {'<' if self.hi_open else '<='} {_num(self.hi)}"
        return ""


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def number(why: str, *, gt=None, ge=None, le=None, lt=None, null=False) -> Rule:
    return Rule("number", why, lo=ge if gt is None else gt, hi=le if lt is None else lt,
                lo_open=gt is not None, hi_open=lt is not None, null=null)


def integer(why: str, *, ge=None, le=None, null=False) -> Rule:
    return Rule("integer", why, lo=ge, hi=le, null=null)


def flag(why: str) -> Rule:
    return Rule("flag", why)


def one_of(choices: tuple[str, ...], why: str) -> Rule:
    return Rule("choice", why, choices=choices)


def component(base: str, why: str, null: bool = False) -> Rule:
    """A part configured by its own `_target_` node, whose settings have rules of their own."""
    return Rule("component", why, null=null, base=base)


def grid(why: str, hi: int) -> Rule:
    return Rule("grid", why, lo=0, hi=hi)


def fraction(why: str) -> Rule:
    return number(why, ge=0, le=1)


def period(why: str) -> Rule:
    """A period the replay wakes on: from 1 s, as finer ones only multiply its steps (and 0
    would never move the clock)."""
    return number(why, ge=1)


def duration(why: str) -> Rule:
    return number(why, ge=0)


def weight(why: str) -> Rule:
    return number(why, ge=0)


#: a replay ends at most a day after the latest submission a trace may hold
MAX_HORIZON_S = MAX_TIME_S + 86400.0
#: how many jobs `loopbench generate` may draw: 100x the scale preset
MAX_JOBS = 100_000_000

RULES: dict[str, dict[str, Rule]] = {
    "": {  # top level of conf/config.yaml and conf/generate.yaml
        "seed": integer("seeds the random streams: boot delays, tie-breaks, the generator", ge=0),
        "horizon_s": number("seconds from trace start at which the replay ends; null = last submission + 24 h",
                            gt=0, le=MAX_HORIZON_S, null=True),
        "timeline_interval_s": period("seconds between timeline samples; metrics integrate exactly regardless"),
        "check_fits": flag("check that every generated pod fits some node type of the cluster"),
        "consolidation": flag("every loop that scales down also removes under-used nodes, moving their pods "
                              "(false: only empty nodes are removed)"),
    },
    "harness.replay.Replay": {
        "progress_interval_s": number("wall seconds between two progress lines off a terminal (0: every "
                                      "update); null = 10 s", ge=0, null=True),
    },
    "harness.scheduler.framework.Scheduler": {  # also `harness.scheduler.Scheduler`, its public name
        "percentage_of_nodes_to_score": integer("percentage of the nodes a cycle looks for feasible ones "
                                                "among before scoring them (0: kube-scheduler's adaptive "
                                                "default)", ge=0, le=100),
        "policy": component("harness.scores.ScorePlugin", "the Score plugin (policy=NAME)"),
        "queue_sort": component("harness.scheduler.queue_sort.QueueSort", "the QueueSort plugin (null: PrioritySort)",
                                null=True),
        "*": component("harness.scheduler.plugin.Plugin", "a plugin of the profile, at every extension point it "
                       "implements (null: none of that name), e.g. loop/scheduler/gang=NAME, "
                       "loop/scheduler/pre_filter=waits_for_capacity", null=True),
    },
    "harness.scheduler.preemption.DefaultPreemption": {
        "min_candidate_nodes_percentage": integer("percentage of the potential nodes preemption dry-runs for "
                                                  "candidates (upstream minCandidateNodesPercentage)", ge=0, le=100),
        "min_candidate_nodes_absolute": integer("fewest candidate nodes preemption looks for (upstream "
                                                "minCandidateNodesAbsolute)", ge=0),
    },
    "harness.scheduler.gang.Coscheduling": {
        "timeout_s": period("seconds a partly placed gang holds its nodes before releasing them"),
        "reject_percentage": integer("PostFilter releases a partly placed gang at once when a member fits "
                                     "nowhere and more than this percentage of min_member is unassigned",
                                     ge=0, le=100),
        "backoff_s": duration("seconds PreFilter refuses a gang after PostFilter released it (0: no backoff)"),
    },
    "harness.autoscalers.cluster_autoscaler.ClusterAutoscaler": {
        "scan_interval_s": period("seconds between autoscaler scans"),
        "expander": component("harness.autoscalers.expanders.Expander",
                              "how the autoscaler picks a pool; null = least-waste; pick one with "
                              "loop/autoscaler/expander=NAME, NAME a file of conf/loop/autoscaler/expander",
                              null=True),
        "topology_aware": flag("the autoscaler sees NVLink/NUMA/NIC claims"),
        "sharing_aware": flag("the autoscaler packs GPU shares per device instead of whole GPUs"),
        "gang_aware": flag("the autoscaler sizes a gang's pods together, all or nothing"),
        "reservation_aware": flag("the autoscaler prefers pools with free committed slots"),
        "provisioning_request": flag("gangs become ProvisioningRequests"),
        "scheduler_sees": flag("the autoscaler simulates with the scheduler's full view of a pod"),
        "scheduler_prefers": flag("the autoscaler asks for the capacity the scheduler prefers"),
        "booking_s": duration("seconds a ProvisioningRequest's capacity stays booked in the autoscaler's "
                              "snapshot, unless its pods are scheduled first"),
        "provisioning_class": one_of(("best-effort-atomic-scale-up", "check-capacity"),
                                     "what a ProvisioningRequest does: scale up for the whole gang "
                                     "at once, or only check the capacity that exists"),
        "backoff_s": duration("seconds a pool whose request came back short is first skipped (then doubled)"),
        "max_backoff_s": duration("the longest a pool's backoff grows to by doubling"),
        "backoff_reset_s": duration("seconds after its last failure a pool's backoff is forgotten"),
        "max_nodes_total": integer("nodes the cluster may hold in all; 0 = no limit", ge=0),
        "max_cores_total": number("cores the cluster may hold in all", ge=0),
        "max_memory_total_gib": number("GiB of memory the cluster may hold in all", ge=0),
        "max_node_provision_time_s": period("seconds a node may boot before the autoscaler deletes it and backs "
                                            "its pool off (--max-node-provision-time)"),
    },
    "harness.autoscalers.scale_down.ScaleDown": {
        "utilization_threshold": fraction("a node below this accelerator utilisation is unneeded"),
        "unneeded_time_s": duration("seconds a node stays unneeded before it is removed"),
        "delay_after_add_s": duration("seconds after a scale-up before scale-down resumes"),
        "max_scale_down_parallelism": integer("nodes deleted at most per pass, empty and drained", ge=1),
        "max_drain_parallelism": integer("non-empty nodes drained at most per pass", ge=0),
        "unremovable_recheck_s": duration("seconds before a node found unremovable is simulated again"),
        "count_gpu_shares": flag("a GPU node's utilisation counts GPU shares and partitions, not only whole GPUs"),
        "simulate_every_scan": flag("simulate every candidate's removal at every pass (upstream's planner, "
                                    "slow), not only before a drain"),
        "drain_underutilized": flag("under-used nodes are drained and removed too (false: only empty nodes); "
                                    "conf/loop/*.yaml set it from the global `consolidation`"),
    },
    "harness.loops.merged.MergedLoop": {
        "scan_interval_s": period("seconds between the merged loop's scans"),
        "max_node_provision_time_s": number("seconds a node asked for may stay booting before it is given "
                                            "up and its pool backed off", gt=0),
        "backoff_s": duration("seconds a pool whose request came back short is first skipped (then doubled)"),
        "max_backoff_s": duration("the longest a pool's backoff grows to by doubling"),
        "backoff_reset_s": duration("seconds after its last failure a pool's backoff is forgotten"),
        "demand_window_s": duration("seconds of past arrivals a plan counts as demand for the free GPUs of "
                                    "the nodes it buys (0: the queue only)"),
    },
    "harness.kueue.loop.KueueLoop": {
        "wait_for_pods_ready": flag("Kueue's waitForPodsReady: a job admitted but not started within "
                                    "pods_ready_timeout_s is evicted and queued again (upstream: off)"),
        "pods_ready_timeout_s": number("seconds an admitted job may take to start before waitForPodsReady "
                                       "evicts it (upstream: 300)", gt=0),
        "block_admission": flag("with waitForPodsReady, nothing is admitted while an admitted job has not "
                                "started (upstream: true)"),
        "backoff_base_s": duration("seconds before an evicted job is queued again, doubled at each eviction "
                                   "(upstream: 60)"),
        "backoff_max_s": duration("the longest requeue backoff (upstream: 3600)"),
        "backoff_limit_count": integer("evictions after which a job is deactivated; null = never (upstream)",
                                       ge=0, null=True),
        "tas": flag("Kueue's Topology Aware Scheduling: a job's gang locality claim (rack, block) is a required "
                    "topology request, admitted only with a domain of its flavor's topology (default false)"),
        "admission_check": component("harness.kueue.provisioning.ProvisioningCheck",
                                     "the ClusterQueues' ProvisioningRequest admission check: a job with "
                                     "quota reserved is admitted once its request is Provisioned; null = none",
                                     null=True),
    },
    "harness.kueue.provisioning.ProvisioningCheck": {
        "provisioning_class": one_of(("best-effort-atomic-scale-up", "check-capacity"),
                                     "the ProvisioningRequestConfig's class: scale up for the whole workload "
                                     "at once, or only check the capacity that exists"),
        "no_retry": flag("the config's noRetry parameter: a check-capacity request that does not fit is "
                         "Failed at once instead of retried by the autoscaler"),
        "backoff_limit_count": integer("retries (requests Failed) before the workload is deactivated "
                                       "(upstream: 3)", ge=0),
        "backoff_base_s": duration("seconds before a workload whose request Failed is queued again, doubled "
                                   "at each requeue (upstream: 60)"),
        "backoff_max_s": duration("the longest such backoff (upstream: 1800)"),
    },
    "harness.autoscalers.karpenter.KarpenterAutoscaler": {
        "batch_idle_s": duration("seconds without a new pending pod that close a batch window"),
        "batch_max_s": duration("seconds after which a batch window closes anyway"),
        "requeue_s": period("seconds after which a still-pending pod re-triggers provisioning"),
        "poll_s": period("seconds between consolidation polls"),
        "consolidate_underutilized": flag("consolidationPolicy WhenEmptyOrUnderutilized (true) or WhenEmpty "
                                          "(false: only empty nodes are removed); conf/loop/separate_karpenter.yaml "
                                          "sets it from the global `consolidation`"),
        "consolidate_after_s": duration("seconds a node's pods stay unchanged before it may be consolidated"),
        "budget_nodes": fraction("share of the NodePool's nodes disrupted at once"),
        "max_candidates": integer("nodes multi-node consolidation considers at most", ge=0),
        "validation_s": duration("seconds a consolidation command waits before it is re-validated and executed"),
        "unavailable_ttl_s": duration("seconds an offering that answered with an insufficient-capacity error "
                                      "stays in the unavailable-offerings cache (0: never cached)"),
        "registration_ttl_s": number("seconds a node may boot before its NodeClaim is deleted as never "
                                     "registered", gt=0),
        "topology_aware": flag("read DRA-style claims (NVLink/NUMA/NIC)"),
        "sharing_aware": flag("pack GPU shares per device instead of whole GPUs"),
    },
    "harness.services.replicas.HorizontalPodAutoscaler": {
        "sync_period_s": period("seconds between two HPA syncs (--horizontal-pod-autoscaler-sync-period, 15)"),
        "tolerance": number("a usage ratio within 1 +- this leaves the replicas as they are "
                            "(--horizontal-pod-autoscaler-tolerance, 0.1)", ge=0, lt=1),
        "scale_up_stabilization_s": number("seconds of past proposals whose lowest caps a scale-up "
                                           "(behavior.scaleUp.stabilizationWindowSeconds, 0)", ge=0, le=3600),
        "scale_down_stabilization_s": number("seconds of past proposals whose highest holds a scale-down "
                                             "(behavior.scaleDown.stabilizationWindowSeconds, 300)", ge=0, le=3600),
        "scale_up_select": one_of(("Max", "Min", "Disabled"), "which scale-up policy applies: the largest change, "
                                  "the smallest, or none (behavior.scaleUp.selectPolicy, Max)"),
        "scale_down_select": one_of(("Max", "Min", "Disabled"), "which scale-down policy applies: the largest "
                                    "change, the smallest, or none (behavior.scaleDown.selectPolicy, Max)"),
        **{f"scale_{d}_policies.*.{i}": rule for d in ("up", "down") for i, rule in enumerate((
            one_of(("Pods", "Percent"), f"a scale-{d} policy's type (behavior.scale{d.title()}.policies[].type)"),
            integer(f"replicas, or percent of those at the period's start, a scale-{d} policy allows per "
                    "period (policies[].value)", ge=1),
            number(f"seconds of a scale-{d} policy's sliding period (policies[].periodSeconds)", gt=0, le=1800)))},
        "target_utilization": number("share of capacity_per_replica each replica is sized to serve: the "
                                     "external metric's AverageValue target", gt=0, le=1),
    },
    "harness.services.replicas.KedaScaledObject": {
        "polling_interval_s": period("seconds between two KEDA polls of the triggers (pollingInterval, 30)"),
        "cooldown_period_s": duration("seconds after the last active poll before a service goes to zero "
                                      "(cooldownPeriod, 300)"),
        "activation_threshold": number("a service is active, and leaves zero, when its demand is above this "
                                       "(activationThreshold, 0)", ge=0),
        "min_replica_count": integer("minReplicaCount of every service, raised to the service's own "
                                     "min_replicas (0: scale to zero allowed)", ge=0),
    },
    "harness.services.buffers.Overprovisioning": {
        "placeholders": integer("pause pods per service, each of its replica's shape (the Deployment's "
                                "spec.replicas)", ge=1, le=MAX_REPLICAS),
        "priority": integer("the pause pods' PriorityClass value: below every service's, and not below Cluster "
                            "Autoscaler's --expendable-pods-priority-cutoff (-10), under which no node is bought "
                            "for them", ge=-10, le=2**31 - 1),
    },
    "harness.services.buffers.CapacityBuffer": {
        "replicas": integer("fake pods of the service's replica shape the buffer keeps room for, at least "
                            "(spec.replicas; null: none)", ge=0, le=MAX_REPLICAS, null=True),
        "percentage": integer("... or this percent of the service's replicas now, if more (spec.percentage, "
                              "of its scalableRef; null: none)", ge=0, le=10_000, null=True),
        "limit_gpus": number("at most this many GPUs of fake pods (spec.limits of nvidia.com/gpu; null: no limit)",
                             ge=0, null=True),
    },
    "harness.scores.ScorePlugin": {
        "weight": number("multiplies the plugin's scores in a weighted sum", gt=0),
    },
    "harness.scores.ResourceAllocation": {
        "resources.*": integer("weight of a resource (cpu, memory, nvidia.com/gpu) in the node's resource score, "
                               "as kube-scheduler's scoringStrategy.resources", ge=1, le=100),
    },
    "harness.scores.DotProd": {
        "cpu_scale": number("CPU milli that normalises a node's free CPU", gt=0),
        "gpu_scale": number("GPU milli that normalises a node's free GPUs", gt=0),
    },
    "harness.scores.BestFit": {
        "cpu_scale": number("CPU milli that normalises a node's free CPU", gt=0),
        "gpu_scale": number("GPU milli that normalises a node's free GPUs", gt=0),
    },
    "harness.scores.GpuClustering": {
        "gpu_scale": integer("GPU milli that normalises a node's free GPUs", ge=1),
    },
    "harness.scores.FGD": {
        "coverage": number("share of pods the typical pod shapes cover", gt=0, le=1),
    },
    "harness.openb_packing.OpenbPacking": {
        "target_ratio": number("arrived GPU requests as a multiple of the cluster's GPUs, 1.3 in the paper",
                               gt=0, le=10),
        "coverage": number("share of pods the typical pod shapes cover", gt=0, le=1),
    },
    "harness.results.openb_cluster": {
        "autoscaled": flag("pools from 0 to the node list's count instead of the static inventory"),
        "stock_low": number("each pool's stock is drawn between this share of its max_size and all of it; "
                            "null = unlimited stock", ge=0, le=1, null=True),
        "stock_period_s": number("seconds between two draws of a pool's stock", gt=0, le=MAX_TIME_S),
    },
    "harness.generate.SyntheticWorkload": {
        "span_s": number("seconds over which jobs arrive", gt=0, le=MAX_TIME_S),
        "n_jobs": integer("jobs in total, split over the classes by rate; null = drawn from the rates",
                          ge=0, le=MAX_JOBS, null=True),
        "*.rate_per_h": number("mean jobs per hour of the class; 0 disables it", ge=0),
        "*.diurnal_amplitude": fraction("depth of the daily cycle of arrivals"),
        "*.peak_hour": number("hour of the day at which arrivals peak", ge=0, le=24),
        "*.bursts_per_day": number("mean burst windows per day", ge=0),
        "*.burst_len_s": number("mean seconds a burst window lasts", gt=0),
        "*.burst_factor": number("arrival rate multiplier within a burst", ge=1),
        "*.duration_median_s": number("median seconds a job runs", gt=0, le=MAX_TIME_S),
        "*.duration_sigma": number("spread of the lognormal job duration", ge=0),
        "*.duration_min_s": number("shortest job, seconds", gt=0, le=MAX_TIME_S),
        "*.duration_max_s": number("longest job, seconds", gt=0, le=MAX_TIME_S),
        "*.queues.*.weight": weight("share of the class's jobs in this queue"),
        "*.queues.*.priority": integer("priority of the queue's pods", ge=-2**31, le=2**31 - 1),
        "*.share_milli.*": weight("weight of this GPU share among the class's share pods"),
        "*.p_any_model": fraction("probability that a share pod accepts any GPU model"),
        "*.p_partition": fraction("probability that a pod asks for a partition profile"),
        "*.partitions.*": weight("weight of this partition profile"),
        "*.cpu_milli": grid("per-pod CPU milli drawn on this grid", MAX_CPU_MILLI),
        "*.memory_mib": grid("per-pod memory MiB drawn on this grid", MAX_MEMORY_MIB),
        "*.gpu_counts.*": weight("weight of this GPU count per pod"),
        "*.p_topology.*": fraction("probability that a pod of this GPU count claims topology"),
        "*.numa_max_gpus": integer("largest pod that also claims one NUMA domain", ge=0, le=MAX_GPUS_PER_POD),
        "*.nic_min_gpus": integer("smallest pod that also claims a NIC per GPU", ge=0, le=MAX_GPUS_PER_POD),
        "*.cpu_milli_per_gpu": integer("CPU milli per GPU of a pod", ge=0, le=MAX_CPU_MILLI),
        "*.memory_mib_per_gpu": integer("memory MiB per GPU of a pod", ge=0, le=MAX_MEMORY_MIB),
        "*.gpus_per_pod": integer("GPUs of each gang pod", ge=0, le=MAX_GPUS_PER_POD),
        "*.locality.*": weight("weight of this gang locality"),
        "*.min_members": integer("fewest pods of a gang", ge=1),
        "*.max_members.*": integer("most pods of a gang of this locality", ge=1),
        "*.nvlink": flag("gang pods claim one NVLink domain"),
        "*.nic_per_gpu": flag("gang pods claim a NIC per GPU"),
        "*.cpu_milli_per_pod": integer("CPU milli of each gang pod", ge=0, le=MAX_CPU_MILLI),
        "*.memory_mib_per_pod": integer("memory MiB of each gang pod", ge=0, le=MAX_MEMORY_MIB),
        # a service's replica and demand (harness/services/trace.py checks how they relate)
        "services.*.cpu_milli": integer("CPU milli of each replica", ge=0, le=MAX_CPU_MILLI),
        "services.*.memory_mib": integer("memory MiB of each replica", ge=0, le=MAX_MEMORY_MIB),
        "services.*.gpu_count": integer("GPUs of each replica", ge=0, le=MAX_GPUS_PER_POD),
        "services.*.gpu_milli": integer("share of each GPU a replica takes (1000 = whole)", ge=0, le=1000),
        "services.*.gpus_same_nvlink": flag("a replica's GPUs in one NVLink domain"),
        "services.*.capacity_per_replica": number("tokens/s one ready replica serves", gt=0),
        "services.*.cold_start_s": number("seconds of image pull and model load before a replica is ready",
                                          ge=0, le=MAX_TIME_S),
        "services.*.min_replicas": integer("fewest replicas of the service", ge=0, le=MAX_REPLICAS),
        "services.*.max_replicas": integer("most replicas of the service", ge=1, le=MAX_REPLICAS),
        "services.*.priority": integer("priority of the service's replica pods", ge=-2**31, le=2**31 - 1),
        "services.*.mean_demand": number("mean tokens/s of the service's demand (before cycle and bursts)", ge=0),
        "services.*.diurnal_amplitude": fraction("depth of the daily cycle of demand"),
        "services.*.peak_hour": number("hour of the day at which demand peaks", ge=0, le=24),
        "services.*.bursts_per_day": number("mean demand bursts per day", ge=0),
        "services.*.burst_len_s": number("mean seconds a demand burst lasts", gt=0),
        "services.*.burst_factor": number("demand multiplier within a burst", ge=1),
        "services.*.window_s": number("seconds of each demand window", ge=1, le=MAX_TIME_S),
    },
}


class SettingError(ConfigError):
    """A setting that breaks its rule: names the full key, the value and the rule."""

    def __init__(self, key: str, value, rule: str):
        super().__init__(key, rule)
        self.value = value
        self.args = (f"{key} = {value!r}: {rule}",)


@cache
def rules_of(component: str) -> dict[str, Rule]:
    """The rules of a component and of its base classes (a plugin's `weight` is ScorePlugin's)."""
    module, _, name = component.rpartition(".")
    try:
        target = getattr(import_module(module), name) if module else None
    except (ImportError, AttributeError):  # Hydra's instantiate names a bad _target_
        target = None
    bases = reversed(target.__mro__) if isinstance(target, type) else ()
    rules: dict[str, Rule] = {}
    for base in [*(f"{c.__module__}.{c.__qualname__}" for c in bases), component]:
        rules.update(RULES.get(base, {}))
    return rules


def rule_for(component: str, path: tuple[str, ...]) -> Rule | None:
    """The rule of the setting at `path` inside `component`, None if it has none."""
    for pattern, rule in rules_of(component).items():
        parts = pattern.split(".")
        if len(parts) == len(path) and all(p in ("*", k) for p, k in zip(parts, path, strict=True)):
            return rule
    return None


def check(component: str, where: str, **settings) -> None:
    """A constructor's settings, given from Python: `where` is where a config puts them
    (e.g. "loop.autoscaler"); raises SettingError on the first that breaks its rule."""
    _check(walk(settings, component, where))


def check_config(cfg) -> None:
    """Every setting of a composed config (DictConfig or plain mapping) against its rule."""
    _check(walk(cfg))


def _check(settings) -> None:
    """The top level's settings first: a component's leaf interpolated from one of them
    (`drain_underutilized: ${consolidation}`) is refused by the key the user set."""
    settings = sorted(settings, key=lambda s: s.component != "")
    for s in settings:
        if s.rule is not None and not s.rule.allows(s.value):
            raise SettingError(s.key, s.value, f"{s.rule} ({s.rule.why})")


@dataclass(frozen=True)
class Setting:
    """One setting met in a config: its component, path inside it, full key, value and rule
    (None: a leaf no rule covers)."""

    component: str
    path: tuple[str, ...]
    key: str
    value: object
    rule: Rule | None


def walk(node, component: str = "", key: str = "", path: tuple[str, ...] = ()):
    """The settings under `node`: each one a rule covers (a whole list, for a grid), and each
    leaf none covers; a cluster is left to harness/cluster.py."""
    if isinstance(node, Mapping):
        if path and "_target_" in node:
            component, path = str(node["_target_"]), ()
        if component in ELSEWHERE:
            return
        items = [k for k in node if not (str(k).startswith("_") and str(k).endswith("_"))
                 and not (k == "hydra" and not key)]  # Hydra's own settings are Hydra's to check
    elif isinstance(node, Sequence) and not isinstance(node, str):
        items = list(range(len(node)))
    else:
        yield Setting(component, path, key, node, None)
        return
    for k in items:
        child = f"{key}[{k}]" if isinstance(node, Sequence) else (f"{key}.{k}" if key else str(k))
        value = _read(node, k, child)
        if value is _DEFINED_ELSEWHERE:
            continue
        rule = rule_for(component, (*path, str(k)))
        if rule is None or rule.kind == "component" and isinstance(value, Mapping) and rule.allows(value):
            yield from walk(value, component, child, (*path, str(k)))
        else:
            yield Setting(component, (*path, str(k)), child, value, rule)


_DEFINED_ELSEWHERE = object()


def _read(node, k, key: str):
    """node[k], resolved; a container interpolated from elsewhere (`policy: ${policy}`)
    is checked where it is defined."""
    if not isinstance(node, Container):
        return node[k]
    try:
        value = node[k]
    except OmegaConfBaseException as exc:
        raise ConfigError(key, f"cannot be read: {str(exc).splitlines()[0]}") from None
    if isinstance(value, Container):
        return _DEFINED_ELSEWHERE if OmegaConf.is_interpolation(node, k) else value
    return value
