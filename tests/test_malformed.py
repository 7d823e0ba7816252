"""The malformed-input corpus (tests/malformed, written by its build.py): every file gets a
clear error naming file, column, row and rule, or is handled as documented; so does every bad
setting of a replay (SETTINGS: Hydra overrides, refused by key, value and rule).

Documented handling: unsorted submit times are fine (the engine orders arrivals itself);
a pod no node type can hold, or that asks for a GPU model or partition profile the cluster
does not have, is refused at arrival and reported (`pods_refused`), never waited on; importers
drop rows that never ran (zero or negative duration, no machines) and count them by reason,
and read a null duration as "runs to the end of the replay"; columns an importer does not
use are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest
import yaml
from omegaconf import OmegaConf

from harness.cluster import Cluster
from harness.config import compose
from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.importers import philly
from harness.importers.acme import read_acme
from harness.importers.alibaba_spot import read_spot_jobs, read_spot_nodes
from harness.importers.dlrm import read_dlrm
from harness.importers.helios import read_helios
from harness.importers.openb import read_openb_nodes, read_openb_pods
from harness.importers.pai import read_pai, read_pai_machines
from harness.metrics import jobs_frame, nodes_frame
from harness.replay import build
from harness.settings import SettingError
from harness.trace import TraceMeta, read_trace, write_trace
from tests import scenarios as sc

CORPUS = Path(__file__).parent / "malformed"
FIX = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Err:
    """Refused: a LoopbenchError of this type naming the file, `column` and `row` (None = not
    applicable), whose rule contains `rule`."""

    column: str | None
    row: int | None
    rule: str
    kind: type = TraceError


@dataclass(frozen=True)
class Ok:
    """Accepted as documented; `check` names the handling asserted in its own test."""

    check: str


TRACES = {
    "missing_column.parquet": Err("memory_mib", None, "required column is missing"),
    "extra_column.parquet": Err("colour", None, "unknown column"),
    "duplicate_column.parquet": Err("gpu_count", None, "more than once"),
    "wrong_type_text_cpu.parquet": Err("cpu_milli", 2, "expected type int64, got string 'four'"),
    "wrong_type_fractional_cpu.parquet": Err("cpu_milli", 1, "expected type int64, got double 4000.5"),
    "wrong_type_models_text.parquet": Err("gpu_models", None, "expected type list<item: string>"),
    "wrong_type_timestamp_submit.parquet": Err("submit_s", None, "expected type double"),
    "wrong_type_flag_text.parquet": Err("nic_per_gpu", 0, "expected type bool, got string 'no'"),
    "null_submit.parquet": Err("submit_s", 1, "must not be null"),
    "null_pod_id.parquet": Err("pod_id", 3, "must not be null"),
    "empty.parquet": Err(None, None, "trace has no rows"),
    "schema_version_9.parquet": Err(None, None, "schema version 9 is not supported"),
    "priority_overflows_int32.parquet": Err("priority", 2, "expected type int32, got int64 1099511627776"),
    "null_gpu_model.parquet": Err("gpu_models", 1, "a GPU model name must not be null"),
    "metadata_not_utf8.parquet": Err(None, None, "footer metadata 'loopbench.source' is not UTF-8 text"),
    "foreign_binary_metadata.parquet": Ok("metadata of other tools is not read"),
    "negative_duration.parquet": Err("duration_s", 2, "null (runs to the end) or finite seconds"),
    "nan_duration.parquet": Err("duration_s", 1, "finite seconds"),
    "infinite_duration.parquet": Err("duration_s", 3, "finite seconds"),
    "negative_submit.parquet": Err("submit_s", 1, "finite number of seconds"),
    "nan_submit.parquet": Err("submit_s", 2, "finite number of seconds"),
    "duplicate_pod_id.parquet": Err("pod_id", 3, "pod ids must be unique"),
    "negative_cpu.parquet": Err("cpu_milli", 1, "must be in [0,"),
    "zero_min_member.parquet": Err("min_member", 1, "must be >= 1"),
    "gang_short.parquet": Err("min_member", 2, "fewer pods than its min_member"),
    "gang_disagree_min_member.parquet": Err("min_member", 3, "members of job 'g' disagree on min_member"),
    "gang_disagree_priority.parquet": Err("priority", 4, "disagree on priority"),
    "gang_disagree_queue.parquet": Err("queue", 3, "disagree on queue"),
    "gang_disagree_locality.parquet": Err("gang_locality", 4, "disagree on gang_locality"),
    "huge_submit.parquet": Err("submit_s", 1, "finite number of seconds in [0, 315360000]"),
    "huge_duration.parquet": Err("duration_s", 3, "finite seconds in [0, 315360000]"),
    "huge_cpu.parquet": Err("cpu_milli", 2, "must be in [0, 100000000]"),
    "huge_memory.parquet": Err("memory_mib", 0, "must be in [0,"),
    "huge_gpu_count.parquet": Err("gpu_count", 3, "must be in [0, 64]"),
    "huge_min_member.parquet": Err("min_member", 1, "fewer pods than its min_member"),
    "queue_escape.parquet": Err("queue", 2, "must not hold control characters"),
    "job_id_newline.parquet": Err("job_id", 1, "must not hold control characters"),
    "share_of_many_gpus.parquet": Err("gpu_milli", 1, "only allowed with gpu_count 1"),
    "truncated_half.parquet": Err(None, None, "not a readable Parquet file"),
    "truncated_footer.parquet": Err(None, None, "not a readable Parquet file"),
    "truncated_head.parquet": Err(None, None, "not a readable Parquet file"),
    "zero_bytes.parquet": Err(None, None, "not a readable Parquet file"),
    "magic_only.parquet": Err(None, None, "not a readable Parquet file"),
    "csv_not_parquet.parquet": Err(None, None, "not a readable Parquet file"),
    "unsorted_times.parquet": Ok("the engine sorts arrivals: same run as the sorted trace"),
    "larger_than_any_node.parquet": Ok("refused at arrival, reported, never waited on"),
    "unknown_gpu_model.parquet": Ok("refused at arrival, reported, never waited on"),
    "unknown_partition_profile.parquet": Ok("refused at arrival, reported, never waited on"),
    "huge_but_valid.parquet": Ok("the replay stops at its horizon"),
    "gang_arrives_apart.parquet": Ok("each pod arrives at its own submit_s; the gang waits for its quorum"),
}


def cfg_err(where: str, rule: str) -> Err:
    return Err(where, None, rule, ConfigError)


CLUSTERS = {
    "unknown_shortage.yaml": cfg_err("cluster.shortage", "must be one of error, silent, got 'quietly'"),
    "unknown_pool_shortage.yaml": cfg_err("pool 'gpu' at cluster.pools[0].shortage",
                                          "must be one of error, silent, got 'never'"),
    "stock_steps_not_from_zero.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock[0].at_s",
                                              "steps start at 0 and increase, got 600"),
    "stock_steps_not_increasing.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock[2].at_s",
                                               "steps start at 0 and increase, got 600 after 600"),
    "stock_step_negative.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock[0].stock",
                                        "must be in [0, 1,000,000], got -1"),
    "stock_step_huge.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock[1].stock",
                                    "must be in [0, 1,000,000], got 100000000000000000000"),
    "stock_step_unknown_key.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock[0]", "unknown key 'nodes'"),
    "stock_draws_low_above_high.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock",
                                               "need 0 <= low <= high, got 4 and 2"),
    "stock_draws_zero_period.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock.period_s",
                                            "must be at least 1 second, got 0"),
    "stock_draws_tiny_period.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock.period_s",
                                            "must be at least 1 second, got 1e-06"),
    "stock_draws_huge_high.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock.high",
                                          "must be at most 1,000,000, got 100000000000000000000"),
    "stock_text.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock", "got 'plenty'"),
    "stock_varies_written.yaml": cfg_err("pool 'gpu' at cluster.pools[0]", "unknown key 'stock_varies'"),
    "unknown_node_type_key.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0]", "unknown key 'gpu_count'"),
    "unknown_pool_key.yaml": cfg_err("pool 'cpu' at cluster.pools[1]", "unknown key 'size'"),
    "unknown_boot_delay_key.yaml": cfg_err("pool 'gpu' at cluster.pools[0].boot_delay", "unknown key 'mean_s'"),
    "unknown_top_level_key.yaml": cfg_err("cluster", "unexpected keyword argument 'autoscale'"),
    "negative_cpu.yaml": cfg_err("node type 'cpu' at cluster.node_types[1].cpu_milli",
                                 "must be > 0 and at most 100,000,000, got -64000"),
    "zero_memory.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].memory_mib",
                                "must be > 0 and at most 1,099,511,627,776, got 0"),
    "negative_max_size.yaml": cfg_err("pool 'gpu' at cluster.pools[0]", "need 0 <= min_size <= max_size, got 0 and -1"),
    "min_above_max.yaml": cfg_err("pool 'cpu' at cluster.pools[1]", "need 0 <= min_size <= max_size, got 3 and 2"),
    "absurd_max_size.yaml": cfg_err("pool 'gpu' at cluster.pools[0].max_size",
                                    "must be at most 1,000,000, got 1000000000000"),
    "committed_above_max.yaml": cfg_err("pool 'gpu' at cluster.pools[0].committed",
                                        "must be in [0, max_size] = [0, 4], got 5"),
    "negative_stock.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock",
                                   "must be null (unlimited) or in [0, 1,000,000], got -2"),
    "huge_stock.yaml": cfg_err("pool 'gpu' at cluster.pools[0].stock",
                               "must be null (unlimited) or in [0, 1,000,000], got 100000000000000000000"),
    "boot_min_above_max.yaml": cfg_err("pool 'gpu' at cluster.pools[0].boot_delay",
                                       "need 0 <= min_s <= max_s, got 500 and 400"),
    "negative_price.yaml": cfg_err("pool 'cpu' at cluster.pools[1].price_on_demand",
                                   "a price must be in [0, 1,000,000] (USD per node-hour), got -2.0"),
    "huge_price.yaml": cfg_err("pool 'cpu' at cluster.pools[1].price_on_demand",
                               "a price must be in [0, 1,000,000] (USD per node-hour), got 1e+308"),
    "huge_committed_price.yaml": cfg_err("pool 'gpu' at cluster.pools[0].price_committed",
                                         "a price must be in [0, 1,000,000] (USD per node-hour), got 1e+300"),
    "price_beyond_float.yaml": cfg_err("pool 'cpu' at cluster.pools[1].price_on_demand",
                                       f"expected finite float, got {2**1024}"),
    "huge_boot_delay.yaml": cfg_err("pool 'gpu' at cluster.pools[0].boot_delay.max_s",
                                    "must be at most 315,360,000 seconds (10 years), got 1e+300"),
    "spot_without_price.yaml": cfg_err("pool 'gpu' at cluster.pools[0].price_spot", "a spot pool needs price_spot"),
    "unknown_node_type.yaml": cfg_err("pool 'cpu' at cluster.pools[1].node_type", "unknown node type 'cpu-large'"),
    "duplicate_node_type.yaml": cfg_err("cluster.node_types", "names must be unique, got 'cpu' twice"),
    "duplicate_pool.yaml": cfg_err("cluster.pools", "names must be unique, got 'cpu' twice"),
    "no_pools.yaml": cfg_err("cluster.pools", "at least one pool"),
    "gpus_not_divisible.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].nvlink_domains",
                                       "divide gpus (8), got 3"),
    "too_many_gpus.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].gpus", "must be in [0, 64], got 128"),
    "gpus_without_model.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].gpu_model",
                                       "needs a gpu_model, got ''"),
    "undeclared_profile.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].partition_profiles",
                                       "profile '3g' is not in"),
    "profile_milli_zero.yaml": cfg_err("cluster.partition_profiles.1g", "milli must be in (0, 1000], got 0"),
    "profile_milli_text.yaml": cfg_err("cluster.partition_profiles.1g", "milli must be in (0, 1000], got 'a seventh'"),
    "text_cpu.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].cpu_milli", "expected int, got 'lots'"),
    "fractional_gpus.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].gpus", "expected int, got 2.5"),
    "text_max_size.yaml": cfg_err("pool 'gpu' at cluster.pools[0].max_size", "expected int, got '4'"),
    "boolean_max_size.yaml": cfg_err("pool 'gpu' at cluster.pools[0].max_size", "expected int, got True"),
    "node_type_not_mapping.yaml": cfg_err("cluster.node_types[2]", "expected a mapping"),
    "pool_not_mapping.yaml": cfg_err("cluster.pools[2]", "expected a mapping"),
    "pools_not_list.yaml": cfg_err("cluster.pools", "expected a list"),
    "boot_delay_not_mapping.yaml": cfg_err("pool 'gpu' at cluster.pools[0].boot_delay", "expected a mapping"),
    "nodes_per_rack_zero.yaml": cfg_err("pool 'gpu' at cluster.pools[0].nodes_per_rack",
                                        "must be >= 1 and at most 1,000,000, got 0"),
    "nan_price.yaml": cfg_err("pool 'cpu' at cluster.pools[1].price_on_demand", "expected finite float, got nan"),
    "infinite_spot_price.yaml": cfg_err("pool 'gpu' at cluster.pools[0].price_spot",
                                        "expected finite float or null, got inf"),
    "infinite_committed_price.yaml": cfg_err("pool 'gpu' at cluster.pools[0].price_committed",
                                             "expected finite float or null, got inf"),
    "infinite_boot_delay.yaml": cfg_err("pool 'gpu' at cluster.pools[0].boot_delay.max_s",
                                        "expected finite float, got inf"),
    "nan_boot_delay.yaml": cfg_err("pool 'gpu' at cluster.pools[0].boot_delay.min_s", "expected finite float, got nan"),
    "text_autoscaling.yaml": cfg_err("cluster.autoscaling", "expected bool, got 'maybe'"),
    "numeric_autoscaling.yaml": cfg_err("cluster.autoscaling", "expected bool, got 1"),
    "null_autoscaling.yaml": cfg_err("cluster.autoscaling", "expected bool, got None"),
    "text_atomic.yaml": cfg_err("pool 'gpu' at cluster.pools[0].atomic", "expected bool, got 'yes'"),
    "numeric_spot.yaml": cfg_err("pool 'gpu' at cluster.pools[0].spot", "expected bool, got 1"),
    "text_nic_per_gpu.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].nic_per_gpu",
                                     "expected bool, got 'false'"),
    "numeric_cluster_name.yaml": cfg_err("cluster.name", "expected str, got 2024"),
    "huge_cpu.yaml": cfg_err("node type 'cpu' at cluster.node_types[1].cpu_milli",
                             "must be > 0 and at most 100,000,000, got 10000000000000000000"),
    "huge_memory.yaml": cfg_err("node type 'h100x8' at cluster.node_types[0].memory_mib",
                                "must be > 0 and at most 1,099,511,627,776, got 9223372036854775808"),
    "huge_nodes_per_rack.yaml": cfg_err("pool 'gpu' at cluster.pools[0].nodes_per_rack",
                                        "must be >= 1 and at most 1,000,000, got 1000000000000000000000000000000"),
    "not_yaml_mapping.yaml": cfg_err("cluster", "expected a mapping"),
    "taint_bad_effect.yaml": cfg_err("pool 'gpu' at cluster.pools[0].taints[0]",
                                     "'nvidia.com/gpu=present:Sometimes': a taint must read key[=value]:effect"),
    "taint_without_effect.yaml": cfg_err("pool 'gpu' at cluster.pools[0].taints[0]",
                                         "'nvidia.com/gpu=present': a taint must read key[=value]:effect, e.g. "
                                         "nvidia.com/gpu=present:NoSchedule, with effect one of NoSchedule, "
                                         "PreferNoSchedule, NoExecute"),
    "taint_bad_key.yaml": cfg_err("pool 'gpu' at cluster.pools[0].taints[0]",
                                  "'nvidia gpu:NoSchedule': a taint must read"),
    "taints_not_list.yaml": cfg_err("pool 'gpu' at cluster.pools[0].taints",
                                    "expected a list of taints key[=value]:effect, got 'nvidia.com/gpu=present:"),
    "taint_not_text.yaml": cfg_err("pool 'cpu' at cluster.pools[1].taints[0]",
                                   "{'key': 'nvidia.com/gpu', 'effect': 'NoSchedule'}: a taint must read"),
    "kueue_huge_nominal.yaml": cfg_err("cluster.kueue.cluster_queues[0].flavors[0].nominal.gpu",
                                       "must be a number >= 0 and at most 1,000,000,000, got 1e+308"),
    "kueue_huge_borrowing_limit.yaml": cfg_err("cluster.kueue.cluster_queues[0].flavors[0].borrowing_limit.cpu",
                                               "must be a number >= 0 and at most 1,000,000,000, got 1e+300"),
    "kueue_huge_priority_threshold.yaml": cfg_err(
        "cluster.kueue.cluster_queues[0].preemption.borrow_within_cohort.max_priority_threshold",
        "must be an integer priority in [-2,147,483,648, 2,147,483,647], got 1099511627776"),
}

def setting_err(key: str, rule: str, value) -> Err:
    """A setting refused by harness/settings.py: its message reads `key = value: rule (why)`."""
    return Err(key, None, f"{key} = {value!r}: {rule}", SettingError)


#: Hydra overrides of a replay -> refused by build() before anything is built, naming key, value
#: and rule (harness/settings.py). Each of these hung the replay, crashed it, or ran with a meaning
#: the setting cannot have.
SETTINGS = {
    "timeline_interval_s=0": setting_err("timeline_interval_s", "must be a number >= 1 (seconds between", 0),
    "seed=abc": setting_err("seed", "must be an integer >= 0", "abc"),
    "seed=-1": setting_err("seed", "must be an integer >= 0", -1),
    "seed=1.5": setting_err("seed", "must be an integer >= 0", 1.5),
    "horizon_s=abc": setting_err("horizon_s", "must be null or a number in (0, 315,446,400]", "abc"),
    "horizon_s=1e300": setting_err("horizon_s", "must be null or a number in (0, 315,446,400]", 1e300),
    f"horizon_s={2**1024}": setting_err("horizon_s", "must be null or a number in (0, 315,446,400]", 2**1024),
    "loop.autoscaler.scan_interval_s=0": setting_err("loop.autoscaler.scan_interval_s", "must be a number >= 1", 0),
    "loop.autoscaler.scan_interval_s=-10": setting_err("loop.autoscaler.scan_interval_s", "must be a number >= 1", -10),
    "loop.autoscaler.scan_interval_s=inf":
        setting_err("loop.autoscaler.scan_interval_s", "must be a number >= 1", float("inf")),
    "loop.autoscaler.expander=cheapest":
        setting_err("loop.autoscaler.expander", "must be null or an instance of Expander or a config with a "
                    "_target_ that builds one (how the autoscaler picks a pool; null = least-waste; pick one with "
                    "loop/autoscaler/expander=NAME, NAME a file of conf/loop/autoscaler/expander)", "cheapest"),
    "loop.autoscaler.booking_s=-1": setting_err("loop.autoscaler.booking_s", "must be a number >= 0", -1),
    "loop.autoscaler.backoff_s=-1": setting_err("loop.autoscaler.backoff_s", "must be a number >= 0", -1),
    "loop.autoscaler.provisioning_class=queued-provisioning":
        setting_err("loop.autoscaler.provisioning_class",
                    "must be one of best-effort-atomic-scale-up, check-capacity", "queued-provisioning"),
    "loop.autoscaler.max_backoff_s=-1": setting_err("loop.autoscaler.max_backoff_s", "must be a number >= 0", -1),
    "loop.autoscaler.max_nodes_total=-1": setting_err("loop.autoscaler.max_nodes_total", "must be an integer >= 0", -1),
    "loop.autoscaler.max_nodes_total=2.5":
        setting_err("loop.autoscaler.max_nodes_total", "must be an integer >= 0", 2.5),
    "loop.autoscaler.max_cores_total=-8": setting_err("loop.autoscaler.max_cores_total", "must be a number >= 0", -8),
    "loop.autoscaler.max_memory_total_gib=lots":
        setting_err("loop.autoscaler.max_memory_total_gib", "must be a number >= 0", "lots"),
    "loop.autoscaler.gang_aware=yes": setting_err("loop.autoscaler.gang_aware", "must be true or false", "yes"),
    "loop.autoscaler.scale_down.unneeded_time_s=-600":
        setting_err("loop.autoscaler.scale_down.unneeded_time_s", "must be a number >= 0", -600),
    "loop.autoscaler.scale_down.delay_after_add_s=-1":
        setting_err("loop.autoscaler.scale_down.delay_after_add_s", "must be a number >= 0", -1),
    "loop.autoscaler.scale_down.utilization_threshold=1.5":
        setting_err("loop.autoscaler.scale_down.utilization_threshold", "must be a number in [0, 1]", 1.5),
    "loop.autoscaler.scale_down.utilization_threshold=-0.5":
        setting_err("loop.autoscaler.scale_down.utilization_threshold", "must be a number in [0, 1]", -0.5),
    "loop.autoscaler.scale_down.max_scale_down_parallelism=0":
        setting_err("loop.autoscaler.scale_down.max_scale_down_parallelism", "must be an integer >= 1", 0),
    "loop.autoscaler.scale_down.max_drain_parallelism=1.5":
        setting_err("loop.autoscaler.scale_down.max_drain_parallelism", "must be an integer >= 0", 1.5),
    "loop.autoscaler.scale_down.count_gpu_shares=yes":
        setting_err("loop.autoscaler.scale_down.count_gpu_shares", "must be true or false", "yes"),
    "loop.scheduler.gang.timeout_s=-60": setting_err("loop.scheduler.gang.timeout_s", "must be a number >= 1", -60),
    "loop.scheduler.gang.timeout_s=0": setting_err("loop.scheduler.gang.timeout_s", "must be a number >= 1", 0),
    "loop.scheduler.gang=yes":
        setting_err("loop.scheduler.gang", "must be null or an instance of Plugin or a config with a _target_ that "
                    "builds one", "yes"),
    "loop=merged loop.scan_interval_s=0": setting_err("loop.scan_interval_s", "must be a number >= 1", 0),
    "loop=merged loop.scale_down.utilization_threshold=2":
        setting_err("loop.scale_down.utilization_threshold", "must be a number in [0, 1]", 2),
    "loop=separate_karpenter loop.autoscaler.poll_s=0":
        setting_err("loop.autoscaler.poll_s", "must be a number >= 1", 0),
    "loop=separate_karpenter loop.autoscaler.poll_s=-5":
        setting_err("loop.autoscaler.poll_s", "must be a number >= 1", -5),
    "loop=separate_karpenter loop.autoscaler.requeue_s=0":
        setting_err("loop.autoscaler.requeue_s", "must be a number >= 1", 0),
    "loop=separate_karpenter loop.autoscaler.batch_idle_s=-1":
        setting_err("loop.autoscaler.batch_idle_s", "must be a number >= 0", -1),
    "loop=separate_karpenter loop.autoscaler.batch_max_s=-1":
        setting_err("loop.autoscaler.batch_max_s", "must be a number >= 0", -1),
    "loop=separate_karpenter loop.autoscaler.consolidate_after_s=-1":
        setting_err("loop.autoscaler.consolidate_after_s", "must be a number >= 0", -1),
    "loop=separate_karpenter loop.autoscaler.budget_nodes=1.5":
        setting_err("loop.autoscaler.budget_nodes", "must be a number in [0, 1]", 1.5),
    "loop=separate_karpenter loop.autoscaler.max_candidates=-1":
        setting_err("loop.autoscaler.max_candidates", "must be an integer >= 0", -1),
    "loop=separate_karpenter loop.autoscaler.max_candidates=2.5":
        setting_err("loop.autoscaler.max_candidates", "must be an integer >= 0", 2.5),
    "loop=separate_karpenter loop.autoscaler.validation_s=-1":
        setting_err("loop.autoscaler.validation_s", "must be a number >= 0", -1),
    "loop=separate_karpenter loop.autoscaler.consolidate_underutilized=Always":
        setting_err("loop.autoscaler.consolidate_underutilized", "must be true or false",
                    "Always"),
    "loop=separate_karpenter loop.autoscaler.unavailable_ttl_s=-1":
        setting_err("loop.autoscaler.unavailable_ttl_s", "must be a number >= 0", -1),
    "loop=separate_karpenter loop.autoscaler.registration_ttl_s=0":
        setting_err("loop.autoscaler.registration_ttl_s", "must be a number > 0", 0),
    "consolidation=maybe":  # the global switch, refused by its own key, not the loop's leaf reading it
        setting_err("consolidation", "must be true or false", "maybe"),
    "loop=merged consolidation=1":
        setting_err("consolidation", "must be true or false", 1),
    "policy.weight=0": setting_err("policy.weight", "must be a number > 0", 0),
    "policy=least_allocated policy.resources.cpu=0":
        setting_err("policy.resources.cpu", "must be an integer in [1, 100]", 0),
    "policy.plugins.1.resources.memory=1.5":
        setting_err("policy.plugins[1].resources.memory", "must be an integer in [1, 100]", 1.5),
    "policy=fgd policy.coverage=0": setting_err("policy.coverage", "must be a number in (0, 1]", 0),
    "policy=fgd_most_allocated policy.plugins.1.weight=-1":
        setting_err("policy.plugins[1].weight", "must be a number > 0", -1),
    "experiment=openb_packing runner.target_ratio=0":
        setting_err("runner.target_ratio", "must be a number in (0, 10]", 0),
    "+runner.progress_interval_s=abc": setting_err("runner.progress_interval_s", "must be null or a number >= 0", "abc"),
    "experiment=openb_packing runner.coverage=1.5": setting_err("runner.coverage", "must be a number in (0, 1]", 1.5),
}

#: importer source folder -> reader; a trace reader's table is then written (and validated)
#: as `loopbench import` does, a node list is loaded as a cluster.
SOURCES = {
    "helios/missing_column.csv": Err("node_num", None, "required column is missing"),
    "helios/bad_number.csv": Err("gpu_num", 2, "not a number: 'zero'"),
    "helios/bad_datetime.csv": Err("submit_time", 4, "not a datetime"),
    "helios/truncated_line.csv": Err(None, 6, "malformed CSV line (Expected 12 columns, got 9"),
    "helios/ragged_line.csv": Err(None, 1, "malformed CSV line (Expected 12 columns, got 11"),
    "helios/header_only.csv": Err(None, None, "no rows left to import"),
    "helios/empty.csv": Err("job_id", None, "required column is missing"),
    "helios/unbalanced_quote.csv": Err(None, 3, "malformed CSV line"),
    "helios/huge_cpu.csv": Err("cpu_milli", 0, "must be in [0, 100000000]"),
    "helios/huge_gpus.csv": Ok("dropped: more than 64 GPUs per pod"),
    "helios/infinite_duration.csv": Err("duration_s", 0, "finite seconds"),
    "helios/negative_duration.csv": Ok("dropped: negative duration"),
    "helios/nan_node_num.csv": Ok("dropped: node_num missing or < 1"),
    "helios/unsorted_times.csv": Ok("same pods as the sorted file"),
    "helios/extra_column.csv": Ok("unused columns are ignored"),
    "helios/not_utf8.csv": Err(None, None, "malformed CSV line"),
    "acme/missing_offset.csv": Err("submit_time", 1, "not a datetime YYYY-MM-DD HH:MM:SS+HH:MM"),
    "acme/kalos_bad_memory.csv": Err("mem_per_pod_GB", 2, "not a number: '500.5GB'"),
    "pai/pai_task_table.short_line.csv": Err(None, 2, "malformed CSV line (Expected 10 columns, got 9"),
    "pai/pai_task_table.bad_number.csv": Err("plan_gpu", 0, "not a number: 'one'"),
    "pai/seven_columns.csv": Err(None, None, "not a PAI task table (10 columns) or job table (6 columns)"),
    "pai/pai_task_table.fractional_instances.csv": Err("inst_num", 0, "must be a whole number of machines"),
    "pai/pai_machine_spec.bad_gpus.csv": Err("cap_gpu", 1, "must be a whole number in [0, 64]"),
    "alibaba_spot/unknown_job_type.csv": Err("job_type", 1, "must be one of HP, Spot"),
    "alibaba_spot/bad_submit.csv": Err("submit_time", 2, "not a number: 'soon'"),
    "alibaba_spot/node_info_df.zero_cpu.csv": Err("cpu_num", 1, "must be in (0, 100000]"),
    "dlrm/unknown_role.csv": Err("role", 2, "must be one of CN, HN"),
    "dlrm/negative_request.csv": Err("cpu_milli", 0, "must be in [0,"),
    "openb/pods_duplicate_name.csv": Err("name", 3, "pod names must be unique"),
    "openb/pods_negative_cpu.csv": Err("cpu_milli", 1, "must be a non-negative integer"),
    "openb/pods_share_without_gpu_milli.csv": Err("gpu_milli", 2, "must be > 0 when num_gpu > 0"),
    "openb/pods_deleted_before_created.csv": Err("deletion_time", 1, "must not be before creation_time"),
    "openb/pods_header_only.csv": Err(None, None, "pod list has no rows"),
    "openb/pods_ragged.csv": Err(None, 4, "expected 11 fields, got 10"),
    "openb/pods_huge_gpus.csv": Err("num_gpu", 5, "must be in [0, 64]"),
    "openb/nodes_gpu_without_model.csv": Err("model", 1, "a node with GPUs needs a GPU model"),
    "openb/nodes_missing_column.csv": Err("model", None, "required column is missing"),
    "philly/cluster_machine_list.bad_memory.csv": Err("single GPU mem", 2, "must look like '24GB'"),
    "philly/truncated.json": Err(None, 2, "malformed JSON"),
    "philly/not_an_array.json": Err(None, None, "one JSON array: expected '['"),
    "philly/job_not_object.json": Err(None, 0, "each job must be a JSON object"),
    "philly/missing_jobid.json": Err("jobid", 2, "must be a non-empty string"),
    "philly/bad_datetime.json": Err("start_time", 0, "not a datetime"),
    "philly/empty_array.json": Err(None, None, "no jobs left to import"),
}

META = TraceMeta(source="test", licence="CC0-1.0", time_origin="trace start")


def _cluster(config: dict) -> Cluster:
    return Cluster(**{k: v for k, v in config.items() if k != "_target_"})


def reader(rel: str):
    """The loader for a corpus source, by folder and file name."""
    folder, name = rel.split("/")
    if folder == "openb":
        return (lambda p: _cluster(read_openb_nodes(p))) if name.startswith("nodes") else read_openb_pods
    if "machine" in name:
        return lambda p: _cluster(read_pai_machines(p) if folder == "pai" else philly.read_philly_machines(p))
    if "node_info" in name:
        return lambda p: _cluster(read_spot_nodes(p))
    return {"helios": read_helios, "acme": read_acme, "pai": lambda p: read_pai([p]),
            "alibaba_spot": read_spot_jobs, "dlrm": read_dlrm, "philly": lambda p: philly.read_philly([p])}[folder]


def import_source(rel: str, out: Path):
    """Read a source as `loopbench import` does: an importer result is written as a trace."""
    result = reader(rel)(CORPUS / "sources" / rel)
    if hasattr(result, "table"):
        write_trace(result.table, out, result.meta)
    return result


def load_cluster_yaml(path: Path, trace: Path):
    """A cluster YAML through the replay's own path (Hydra instantiation in `build`)."""
    cfg = compose("config", [f"trace.path={trace}", "loop=merged"])
    OmegaConf.set_struct(cfg, False)
    loaded = yaml.safe_load(path.read_text())
    if not isinstance(loaded, dict):
        raise ConfigError("cluster", f"expected a mapping of keys to values, got {loaded!r}")
    cfg.cluster = loaded
    return build(cfg)


def check_error(exc: LoopbenchError, expect: Err, file: Path | None) -> None:
    assert isinstance(exc, expect.kind), repr(exc)
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    assert expect.rule in text, text
    if expect.kind is TraceError:
        assert exc.file == str(file) and text.startswith(str(file))
        assert (exc.column, exc.row) == (expect.column, expect.row), text
        if expect.column is not None:
            assert f"column '{expect.column}'" in text
        if expect.row is not None:
            assert f"row {expect.row}" in text
    else:
        assert exc.where == expect.column, text


# ---- the corpus is what the tables say ------------------------------------------------------

def test_every_corpus_file_has_an_expectation():
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file() and p.name != "build.py"}
    listed = {f"trace/{k}" for k in TRACES} | {f"cluster/{k}" for k in CLUSTERS} | {f"sources/{k}" for k in SOURCES}
    assert on_disk == listed


@pytest.mark.parametrize("name", sorted(k for k, v in TRACES.items() if isinstance(v, Err)))
def test_malformed_trace_is_refused_with_file_column_row_rule(name):
    path = CORPUS / "trace" / name
    with pytest.raises(LoopbenchError) as err:
        read_trace(path)
    check_error(err.value, TRACES[name], path)


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / "tiny.parquet"
    write_trace(sc.trace([{"gpu_milli": 500}, {"gpu_count": 8}]), path, META)
    return path


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_malformed_cluster_gives_config_error_naming_the_key(name, tiny_trace):
    with pytest.raises(LoopbenchError) as err:
        load_cluster_yaml(CORPUS / "cluster" / name, tiny_trace)
    check_error(err.value, CLUSTERS[name], None)


@pytest.mark.parametrize("overrides", sorted(SETTINGS))
def test_malformed_setting_is_refused_by_key_value_and_rule(overrides, tiny_trace):
    cfg = compose("config", [f"trace.path={tiny_trace}", *overrides.split()])
    with pytest.raises(LoopbenchError) as err:
        build(cfg)
    check_error(err.value, SETTINGS[overrides], None)


def test_the_corpus_cluster_itself_is_valid(tiny_trace, tmp_path):
    import tests.malformed.build as corpus  # noqa: F401  (the base config every broken one edits)

    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump({**corpus.CLUSTER, "kueue": corpus.KUEUE}))
    sim, loop = load_cluster_yaml(path, tiny_trace)
    assert sim.cluster.n_slots == 6 and loop.name == "merged"
    assert sim.cluster.kueue is not None and len(sim.cluster.kueue.cluster_queues) == 2


@pytest.mark.parametrize("name", sorted(k for k, v in SOURCES.items() if isinstance(v, Err)))
def test_malformed_importer_source_is_refused_with_location(name, tmp_path):
    out = tmp_path / "out.parquet"
    with pytest.raises(LoopbenchError) as err:
        import_source(name, out)
    e = err.value
    # validation of the importer's output names the trace being written, the rest the source
    check_error(e, SOURCES[name], out if e.file == str(out) else CORPUS / "sources" / name)
    assert not out.exists()


# ---- handled as documented -------------------------------------------------------------------

def corpus_cluster() -> Cluster:
    import tests.malformed.build as corpus

    return _cluster(corpus.CLUSTER)


LOOPS = {"separate": lambda: sc.separate(), "merged": lambda: sc.merged()}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_unsorted_times_replay_as_if_sorted(loop):
    table, _ = read_trace(CORPUS / "trace" / "unsorted_times.parquet")
    order = pa.compute.sort_indices(table, [("submit_s", "ascending"), ("pod_id", "ascending")])
    a, sim_a = sc.run(table, corpus_cluster(), LOOPS[loop](), horizon_s=6 * 3600.0)
    b, sim_b = sc.run(table.take(order), corpus_cluster(), LOOPS[loop](), horizon_s=6 * 3600.0)
    assert a == pytest.approx(b, nan_ok=True)
    assert a["pods_done"] == 8
    ja, jb = jobs_frame(sim_a).sort("job_id"), jobs_frame(sim_b).sort("job_id")
    assert ja.equals(jb)


@pytest.mark.parametrize("name, refused", [("larger_than_any_node.parquet", ["p1", "p3"]),
                                           ("unknown_gpu_model.parquet", ["p1"]),
                                           ("unknown_partition_profile.parquet", ["p2"])])
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_pods_no_node_can_hold_are_refused_not_waited_on(name, refused, loop):
    table, _ = read_trace(CORPUS / "trace" / name)
    row, sim = sc.run(table, corpus_cluster(), LOOPS[loop](), horizon_s=3 * 3600.0)
    assert row["pods_refused"] == len(refused)
    assert row["pods_done"] == 4 - len(refused) and row["pods_pending"] == 0
    jobs = jobs_frame(sim)
    assert sorted(jobs.filter(pl.col("refused"))["job_id"].to_list()) == sorted(r.replace("p", "j") for r in refused)
    assert row["pending_s_shortage"] == 0.0  # never counted as waiting
    # refused pods ask for nothing: only one GPU node (the three one-GPU pods) is ever bought
    nodes = nodes_frame(sim)
    assert nodes.filter(pl.col("gpus") > 0).height <= 1


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_gang_whose_pods_arrive_apart_replays(loop):
    """Gang g's pods arrive at 20, 20 and 21 s: the job's submission is its first pod's, and the
    gang starts whole once its last pod exists."""
    table, _ = read_trace(CORPUS / "trace" / "gang_arrives_apart.parquet")
    row, sim = sc.run(table, corpus_cluster(), LOOPS[loop](), horizon_s=3 * 3600.0)
    g = jobs_frame(sim).filter(pl.col("job_id") == "g").row(0, named=True)
    assert g["submit_s"] == 20.0 and g["start_s"] > 21.0 and row["pods_done"] == 5


def test_huge_but_valid_values_replay_to_the_horizon():
    table, _ = read_trace(CORPUS / "trace" / "huge_but_valid.parquet")
    row, sim = sc.run(table, corpus_cluster(), sc.merged(), horizon_s=2 * 3600.0)
    assert sim.now == 2 * 3600.0
    assert (row["pods_done"], row["pods_running"], row["pods_not_arrived"]) == (1, 2, 1)


def test_metadata_of_other_tools_is_not_read():
    table, meta = read_trace(CORPUS / "trace" / "foreign_binary_metadata.parquet")
    assert table.num_rows == 4 and meta.source == "unknown"


def test_importer_drops_are_counted_and_unused_columns_ignored():
    helios = read_helios(FIX / "helios" / "cluster_log.csv")
    src = CORPUS / "sources" / "helios"
    for name, reason in [("huge_gpus.csv", "more than 64 GPUs per pod"), ("negative_duration.csv", "negative duration"),
                         ("nan_node_num.csv", "node_num missing or < 1")]:
        r = read_helios(src / name)
        assert r.dropped[reason] == 1 + helios.dropped[reason], name
        assert r.rows_read == helios.rows_read
    assert read_helios(src / "extra_column.csv").table.equals(helios.table)
    shuffled = read_helios(src / "unsorted_times.csv").table
    key = [("pod_id", "ascending")]
    assert shuffled.sort_by(key).equals(helios.table.sort_by(key))
