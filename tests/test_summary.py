"""The text every command prints from a run's metrics: the table (units, which way is better,
whole numbers as whole numbers), the wall time apart, and the verdict's arithmetic."""

from __future__ import annotations

import math
import re

import polars as pl

from harness.progress import duration
from harness.summary import readout, verdict
from tests.test_cli import loopbench
from tests.test_progress import tiny_trace

#: Two loops' metrics rows as Replay writes them (a subset of the columns), numbers by hand.
TWO_LOOPS = pl.DataFrame([
    {"loop": "separate", "seed": 0, "wall_s": 3.21, "idle_accel_hours": 7484.4, "idle_accel_hours_booting": 12.5,
     "accel_utilization": 0.3312, "gang_latency_p99_s": 61641.0, "gangs_never_started": 0, "cost_usd": 89510.2,
     "nodes_provisioned": 1670, "pods": 3405},
    {"loop": "merged", "seed": 0, "wall_s": 95.0, "idle_accel_hours": 1866.0, "idle_accel_hours_booting": 0.0,
     "accel_utilization": 0.6021, "gang_latency_p99_s": 11095.4, "gangs_never_started": 0, "cost_usd": 47440.4,
     "nodes_provisioned": 183, "pods": 3405},
])

GOLDEN = """\
metric                   unit  better  separate  merged
-----------------------  ----  ------  --------  ------
idle accelerator hours   h     lower      7,484   1,866
idle: booting            h     lower         12       0
accelerator utilisation        higher     0.331   0.602
gang start p99           h     lower       17.1     3.1
gangs never started            lower          0       0
cost                     USD   lower     89,510  47,440
nodes provisioned                         1,670     183

wall time: separate 3.2 s, merged 1 min 35 s
merged saves 75% of idle accelerator hours over separate (7,484 -> 1,866); cost -47%, gang start p99 -82%"""


def test_two_loops_read_as_a_table_with_units_wall_time_apart_and_a_verdict():
    assert readout(TWO_LOOPS) == GOLDEN


def test_the_same_in_markdown_for_comparison_md():
    md = readout(TWO_LOOPS, markdown=True)
    assert md.startswith("| metric | unit | better | separate | merged |\n|---|---|---|---:|---:|\n"
                         "| idle accelerator hours | h | lower | 7,484 | 1,866 |\n")
    assert md.endswith("\n\nwall time: separate 3.2 s, merged 1 min 35 s\n\n" + GOLDEN.splitlines()[-1] + "\n")


def test_one_run_prints_no_verdict_and_its_wall_time_alone():
    text = readout(TWO_LOOPS.head(1))
    assert text.splitlines()[-1] == "wall time: 3.2 s"
    assert " vs " not in text and "wall_s" not in text


def test_verdict_arithmetic_by_hand():
    base = {"idle_accel_hours": 200.0, "cost_usd": 1000.0, "gang_latency_p99_s": 0.0, "gangs_never_started": 0}
    new = {"idle_accel_hours": 150.0, "cost_usd": 1004.0, "gang_latency_p99_s": 30.0, "gangs_never_started": 2}
    # (150 - 200) / 200 = -25%; (1004 - 1000) / 1000 = +0.4%; a zero baseline shows both values;
    # gangs never started join the verdict as one side has some
    assert verdict("b", "a", new, base) == (
        "b saves 25% of idle accelerator hours over a (200 -> 150); cost +0.4%, gang start p99 0 -> 30, "
        "gangs never started 0 -> 2")
    # a missing metric (absent, or NaN as a run without gangs writes it) says so
    assert verdict("b", "a", {"idle_accel_hours": 200.0, "gang_latency_p99_s": math.nan},
                   {"idle_accel_hours": 200.0, "cost_usd": 3.0, "gang_latency_p99_s": math.nan}) == (
        "b saves ±0% of idle accelerator hours over a (200 -> 200); cost n/a, gang start p99 n/a")
    # a zero baseline: no share, both values; a missing one: n/a
    assert verdict("b", "a", {"idle_accel_hours": 5.0}, {"idle_accel_hours": 0.0}).startswith(
        "b vs a: idle accelerator hours 0 -> 5; ")
    assert verdict("b", "a", {}, {"idle_accel_hours": 1.0}).startswith("b vs a: idle accelerator hours n/a; ")
    # runs with services: the demand left unserved joins (0.04 -> 0.03: -25%)
    assert verdict("b", "a", {"idle_accel_hours": 1.0, "demand_unserved_share": 0.03},
                   {"idle_accel_hours": 1.0, "demand_unserved_share": 0.04}).endswith(
        "gang start p99 n/a, demand not served (share) -25%")
    # doubling burns 100% more, a 1/3 cut rounds to -33%
    assert verdict("b", "a", {"idle_accel_hours": 2.0, "cost_usd": 2.0}, {"idle_accel_hours": 1.0, "cost_usd": 3.0}
                   ).startswith("b burns 100% more idle accelerator hours than a (1 -> 2); cost -33%")


def test_a_single_setting_verdict_names_its_scoring_and_provider():
    """The ranges form of the grid degrades, for one run per loop, to one share and the setting
    it was measured in (the first loop's policy and provider)."""
    rows = TWO_LOOPS.with_columns(policy=pl.lit("kube_default"), shortage=pl.lit("silent"))
    assert readout(rows).splitlines()[-1] == (
        "merged saves 75% of idle accelerator hours over separate (7,484 -> 1,866) in one setting "
        "(scoring kube_default, provider fails silently); cost -47%, gang start p99 -82%")
    # `error` is how the provider answers, not a failure of the run
    assert "(scoring kube_default, provider refuses at once)" in readout(rows.with_columns(shortage=pl.lit("error")))


def test_compare_names_the_provider_its_loops_ran_under():
    from omegaconf import OmegaConf

    from harness.compare import with_provider

    configs = {n: OmegaConf.create({"cluster": {"shortage": "silent"}}) for n in ("separate", "merged")}
    assert with_provider(TWO_LOOPS, configs)["shortage"].to_list() == ["silent", "silent"]
    bare = {n: OmegaConf.create({"cluster": {}}) for n in ("separate", "merged")}
    assert "shortage" not in with_provider(TWO_LOOPS, bare).columns


def test_idle_cost_and_its_split_by_gpu_model_print_after_the_idle_hours():
    rows = TWO_LOOPS.with_columns(idle_accel_usd=pl.Series([30_000.0, 9_000.0]),
                                  idle_accel_usd_model_T4=pl.Series([1_000.0, 2_000.0]),
                                  idle_accel_hours_model_T4=pl.Series([2_000.0, 1_500.0]),
                                  idle_accel_usd_model_A100=pl.Series([29_000.0, 7_000.0]),
                                  idle_accel_hours_model_A100=pl.Series([5_484.4, 366.0]))
    lines = readout(rows).splitlines()
    assert [x.split("  ")[0] for x in lines[3:9]] == [
        "idle: booting", "idle accelerator cost", "idle: A100", "idle: T4", "idle cost: A100", "idle cost: T4"]
    assert re.fullmatch(r"idle cost: T4 +USD +lower +1,000 +2,000", lines[8])


def test_a_trace_with_services_reads_its_service_metrics_after_the_gangs():
    """A run with services prints demand not served (its share), time to capacity, cold starts
    and the warm replicas' idle hours after the gang rows; a run without them prints none."""
    rows = TWO_LOOPS.with_columns(demand_unserved_share=pl.Series([0.0244, 0.0006]),
                                  time_to_capacity_p99_s=pl.Series([536.9, 61.0]),
                                  cold_starts=pl.Series([83, 64]), warm_idle_accel_hours=pl.Series([123.7, 40.2]))
    lines = readout(rows).splitlines()
    at = [x.split("  ")[0] for x in lines].index("gangs never started")
    assert [re.sub(" +", " ", x) for x in lines[at + 1:at + 5]] == [
        "demand not served (share) lower 0.0244 0.0006", "time to capacity p99 s lower 537 61",
        "cold starts lower 83 64", "warm idle accelerator hours h lower 124 40"]
    assert "demand not served" not in readout(TWO_LOOPS)


def test_counts_print_as_whole_numbers_with_separators():
    table = readout(TWO_LOOPS.with_columns(pl.col("nodes_provisioned").cast(pl.Float64)))
    assert "nodes provisioned                         1,670     183" in table
    assert "1670" not in table and "183.0" not in table
    # a mean over seeds of a count keeps its decimal: 0.4 gangs never started is not 0
    assert verdict("b", "a", {"gangs_never_started": 0.4}, {"gangs_never_started": 0.0}).endswith(
        "gangs never started 0 -> 0.4")


def test_a_few_gangs_change_as_counts_not_shares():
    """1 -> 2 gangs never started is +100%, which reads like a disaster; below ten a count
    changes as its two values, above as a share."""
    base = {"idle_accel_hours": 10.0, "gangs_never_started": 1, "nodes_never_used": 3}
    assert verdict("b", "a", {"idle_accel_hours": 10.0, "gangs_never_started": 2}, base).endswith(
        "gangs never started 1 -> 2")
    assert verdict("b", "a", {"idle_accel_hours": 10.0, "gangs_never_started": 13},
                   {**base, "gangs_never_started": 12}).endswith("gangs never started +8%")


def test_five_digit_seconds_read_as_hours_and_short_ones_stay_seconds():
    """47,726 s is hard to picture: a row of seconds that reaches 10,000 is shown in hours,
    one decimal; a row below stays in seconds."""
    rows = TWO_LOOPS.with_columns(gang_latency_p50_s=pl.Series([47_726.0, 2_580.0]),
                                  time_to_capacity_p99_s=pl.Series([536.9, 61.0]))
    lines = [re.sub(" +", " ", x) for x in readout(rows).splitlines()]
    assert "gang start p50 h lower 13.3 0.7" in lines
    assert "gang start p99 h lower 17.1 3.1" in lines
    assert "time to capacity p99 s lower 537 61" in lines
    assert "| gang start p50 | h | lower | 13.3 | 0.7 |" in readout(rows, markdown=True)


def test_compare_and_replay_name_the_trace_cluster_and_seed_first():
    rows = TWO_LOOPS.with_columns(trace=pl.lit("traces/default.parquet"), cluster=pl.lit("default"),
                                  gangs=pl.lit(20))
    line = "trace traces/default.parquet (3,405 pods, 20 gangs), cluster default, seed 0"
    assert readout(rows).splitlines()[0] == line
    assert readout(rows, markdown=True).startswith(line + "\n\n| metric |")
    two_seeds = rows.with_columns(seed=pl.Series([0, 1]))
    assert readout(two_seeds).splitlines()[0].endswith("cluster default, seed 0, 1")


def test_the_pods_refused_on_arrival_are_said_where_the_trace_is_named():
    """Two of four pods larger than any node type are refused on arrival (docs/model.md): the
    table says `pods done 2` and nothing else did say why."""
    rows = TWO_LOOPS.with_columns(trace=pl.lit("big.parquet"), cluster=pl.lit("default"), pods=pl.lit(4),
                                  pods_refused=pl.lit(2))
    assert readout(rows).splitlines()[0] == ("trace big.parquet (4 pods, 2 of them refused on arrival: no node type "
                                             "of the cluster can hold them), cluster default, seed 0")
    none = rows.with_columns(pods_refused=pl.lit(0))
    assert readout(none).splitlines()[0] == "trace big.parquet (4 pods), cluster default, seed 0"


def test_durations():
    assert [duration(s) for s in (3.21, 59.96, 95.0, 3600.0 * 2.5, 86400 * 30)] == [
        "3.2 s", "1 min", "1 min 35 s", "2.5 h", "30.0 days"]


def test_replay_prints_the_readout_not_a_dataframe(tmp_path):
    tiny = tiny_trace(tmp_path)
    r = loopbench("replay", f"trace.path={tiny}", "loop=merged", "horizon_s=7200", f"hydra.run.dir={tmp_path}/run",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"trace {tiny} (40 pods), cluster default, seed 0"
    assert re.fullmatch(r"metric +unit +better +merged", lines[1])
    assert re.fullmatch(r"cost +USD +lower +[\d,]+", next(x for x in lines if x.startswith("cost ")))
    assert re.fullmatch(r"wall time: [\d.]+ s", lines[-2]) and lines[-1] == f"run directory: {tmp_path}/run"
    assert "shape:" not in r.stdout and "wall_s" not in r.stdout
