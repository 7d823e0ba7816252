"""`loopbench report RUN_OR_SWEEP_DIR... -o OUTDIR`: published tables and plots of replay runs.

Every directory holding a `metrics.parquet` below the given paths is a finished run (single
runs, Hydra multirun sweeps, `loopbench compare` folders alike); others are unfinished and
ignored. Runs are grouped into *variants* (the loop's `name`, disambiguated by whatever else
differs between runs: loop knobs, trace, cluster, policy) and aggregated over seeds with
polars. Outputs, all deterministic (no wall times, no dates, fixed ordering), so that a
regeneration can be compared byte for byte:

- `summary.md` / `summary.csv`: per variant and metric, mean, std, min and max over seeds;
- for a grid of settings (runs that differ by trace, scoring policy or provider: harness/grid.py),
  `grid.csv` and `steps.csv` (and their tables): per setting and loop the means with 95%
  intervals over seeds, and what each interface step saves over the one before it in each
  setting; the verdict then states ranges across the settings;
- `ablation.csv` (and a table in both documents): each variant against the separate loops with
  every autoscaler switch off, paired by seed, i.e. what turning a capability on saved;
- `runs.csv`: every run's metrics row (one line per run);
- for runs with services (a trace's `services:`), a table of the service metrics and a plot,
  one panel per service, of its demand against each variant's ready capacity over time (from
  each run's services_timeline.parquet; not for a grid, whose plots are bars only);
- a Gantt view of nodes over time with their pods (harness/gantt.py) for one run of each of
  the first GANTTS variants (its lowest seed), when the runs have nodes.parquet (pods: with
  events.parquet) and are no grid; `loopbench results` leaves it out (`gantt_view=False`): its
  reports are aggregates over seeds;
- `report.html`: the tables and the plots in one self-contained page (PNG data URIs, no
  network), and the same plots as PNG files for `summary.md`;
- `provenance.json`: the code that built the report and each run's provenance (version,
  commit, config hash, trace source); it names a commit, so it is the one file that differs
  between regenerations of the same results.

Seeds are shown as mean [min, max]: where the ranges of two variants overlap, or a saving's
[min, max] straddles 0, the difference is not consistent across seeds.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
from omegaconf import DictConfig, OmegaConf

from harness import gantt, grid, run_timeline, work
from harness.config import conf_dir
from harness.description import Description
from harness.errors import LoopbenchError
from harness.output import COMPLETE_MARKER, atomic_dir, write_text
from harness.provenance import RUN_INFO, run_info, write_report_provenance
from harness.status import REASON_NAMES
from harness.summary import (
    BY_MODEL,
    IDLE_CAUSES,
    MODELS,
    UNSERVED,
    Metric,
    catalogue,
    expand,
    metric,
    percent,
    provider,
    readable,
    setting,
    verdict,
)

#: Run metadata that tells variants apart when it differs between runs (`shortage`: the
#: provider's behaviour, read from the run's config; `replicas`: a service's replica autoscaler).
CONTEXT = ["trace", "cluster", "policy", "shortage", "replicas"]
MERGED = "merged"
#: The grid's tables: per setting and loop, these metrics with their intervals.
GRID = ["idle_accel_hours", "idle_accel_usd", "cost_usd", "gang_latency_p99_s",
        "demand_unserved_share", "time_to_capacity_p99_s", "warm_idle_accel_hours"]


HEADLINE = ["idle_accel_hours", "accel_utilization", "frag_ratio", "gang_latency_p50_s", "gang_latency_p99_s",
            "gangs_never_started", "cost_usd", "nodes_provisioned", "nodes_never_used"]
#: The work done by the horizon, which loops compared must share (harness/work.py).
WORK = ["pods_done", "jobs_done", "pods_not_admitted", "jobs_not_admitted", "gangs_never_started"]
#: A trace with services (harness/services/metrics.py): their table, when runs have them.
SERVICES = ["demand_unserved_share", "time_to_capacity_p50_s", "time_to_capacity_p99_s", "cold_starts",
            "warm_idle_accel_hours"]
ABLATION = ["idle_accel_hours", "gang_latency_p50_s", "gang_latency_p99_s", "cost_usd"]
#: Columns that are not results (they change from one execution to the next): runs written before
#: the wall time moved to run.json (harness/provenance.py) have it in their metrics.
UNSTABLE = ["wall_s"]
#: decimals of a float in the report's CSV tables
FLOAT_DIGITS = 4
#: Variants with a Gantt view of one of their runs, at most (each costs about a second or two to draw)
GANTTS = 4
#: Whether a saving holds, said of a setting run with one seed: no interval to exclude 0.
ONE_SEED = "one seed: no spread"
#: Number columns of one Markdown table at most: a wider table is cut into several, each
#: repeating the leading columns, so that it fits a page (the HTML page wraps cells instead).
MAX_NUMBER_COLUMNS = 5


# ---- finding and labelling runs ----------------------------------------------------------

def find_runs(paths: list[str | Path]) -> list[Path]:
    """Every directory holding metrics.parquet below `paths` (unfinished runs have none)."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise LoopbenchError(f"{p}: no such file or directory")
        found |= {m.parent.resolve() for m in p.rglob(COMPLETE_MARKER)}
    if not found:
        raise LoopbenchError(f"no finished run (a directory holding {COMPLETE_MARKER}) "
                             f"under {', '.join(map(str, paths))}")
    return sorted(found)


def _flat(node, prefix: str = "") -> dict[str, object]:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _run_config(run: Path) -> DictConfig:
    """The run's composed config (config.yaml), with a `loop` mapping."""
    path = run / "config.yaml"
    if not path.exists():
        raise _broken(path, "missing (the run's composed config, written before metrics.parquet)")
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:  # yaml and omegaconf raise many types for a damaged file
        raise _broken(path, "not a readable YAML file", exc) from None
    if not isinstance(cfg, DictConfig) or not isinstance(cfg.get("loop"), DictConfig):
        raise _broken(path, "expected a mapping with a `loop` mapping (the run's composed config)")
    return cfg


def _loop_config(cfg: DictConfig) -> dict[str, object]:
    """The run's `loop` config, flattened to dotted keys."""
    return _flat(OmegaConf.to_container(cfg.loop, resolve=False))


def _describe(run: Path, cfg: DictConfig) -> Description:
    """How the run's loop described itself when it ran (run.json's `loop`, harness/loops/base.py:
    Loop.describe). A run written before run.json kept it has its loop built from its config,
    as the replay built it."""
    try:
        record = run_info(run).get("loop")
    except (OSError, ValueError) as exc:
        raise _broken(run / RUN_INFO, "not a readable JSON file", exc) from None
    if record is not None:
        try:
            return Description.from_record(record)
        except (KeyError, TypeError) as exc:
            raise _broken(run / RUN_INFO, "its `loop` is not a loop's description (family, rank, "
                          "switches, ablation)", exc) from None
    from harness.replay import build_loop

    try:
        return build_loop(cfg).describe()
    except LoopbenchError as exc:
        raise _broken(run / "config.yaml", f"its loop cannot be built: {' '.join(str(exc).split())}") from None


def _broken(path: Path, what: str, exc: Exception | None = None) -> LoopbenchError:
    """A damaged file of a finished run: the report is refused rather than silently short of it."""
    cause = f" ({str(exc).strip().splitlines()[0]})" if exc is not None and str(exc).strip() else ""
    return LoopbenchError(f"{path}: {what}{cause}; rerun that run or remove its directory")


def _read(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """One Parquet output of a run, refused with its path if damaged or short of `columns`."""
    try:
        present = pl.read_parquet_schema(path)
        missing = [c for c in columns or [] if c not in present]
        if not missing:
            return pl.read_parquet(path, columns=columns)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
        raise _broken(path, "not a readable Parquet file", exc) from None
    raise _broken(path, f"has no column '{missing[0]}'")


def _context_value(column: str, value) -> str:
    """How a label names a run's context: a trace by its file's stem (its folder says nothing
    the stem does not). A cluster that varies with the trace is left out (a scenario picks both)."""
    return Path(str(value)).stem if column == "trace" else "none" if value is None else str(value)


def _policy_choice(cfg: DictConfig, loop: dict[str, object]) -> str | None:
    """The shipped policy (conf/policy/<name>.yaml) the run's loop scored with, by its short name
    (`bin_packing`, not `MostAllocated(cpu 1, memory 1, nvidia.com/gpu 3)`); None for weights of
    its own or a loop that does not take the `policy` group."""
    if "${policy}" not in loop.values() or not isinstance(cfg.get("policy"), DictConfig):
        return None
    mine = OmegaConf.to_container(cfg.policy, resolve=False)
    names = [name for name, shipped in _shipped_policies().items() if shipped == mine]
    return names[0] if len(names) == 1 else None


@cache
def _shipped_policies() -> dict[str, object]:
    return {p.stem: OmegaConf.to_container(OmegaConf.load(p)) for p in sorted((conf_dir() / "policy").glob("*.yaml"))}


def _scalar(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


@dataclass
class Variant:
    label: str
    loop: str
    about: Description  # the loop's family and switches

    @property
    def is_baseline(self) -> bool:
        """The ablation's family with no switch on."""
        return self.about.ablation and not self.about.switches

    @property
    def capability(self) -> str:
        on = " + ".join(s.name for s in self.about.switches)
        if self.about.ablation:
            return f"+ {on}" if on else f"{self.about.family}, every switch off (baseline)"
        return self.about.family + (f" + {on}" if on else "")

    def order(self) -> tuple:
        """Families in rank order; within one, the capabilities before the interface steps,
        fewer switches first, then by the first switch's rank."""
        switches = self.about.switches
        interface = any(s.interface for s in switches)
        return self.about.rank, interface, len(switches), min((s.rank for s in switches), default=-1), self.label


def label_runs(runs: list[Path], metrics: pl.DataFrame) -> tuple[pl.DataFrame, list[Variant]]:
    """Add a `variant` column: the loop name, plus the loop knobs and CONTEXT columns that
    differ between runs sharing that name (so a sweep over one knob is not pooled). A shipped
    policy is named by its choice (`policy=bin_packing`); the `policy` column keeps its name."""
    full = [_run_config(r) for r in runs]
    configs = [_loop_config(c) for c in full]
    shortage = [c.get("cluster", {}).get("shortage") if isinstance(c.get("cluster"), DictConfig) else None
                for c in full]
    if any(v is not None for v in shortage):  # the provider's behaviour; absent = error, Cluster's default
        metrics = metrics.with_columns(shortage=pl.Series([str(v or "error") for v in shortage]))
    chosen = [_policy_choice(c, loop) for c, loop in zip(full, configs, strict=True)]
    context = [c for c in CONTEXT if c in metrics.columns and metrics[c].n_unique() > 1]
    loops = metrics["loop"].to_list()
    labels, variants = [], {}
    for i, (loop, cfg) in enumerate(zip(loops, configs, strict=True)):
        same = [configs[j] for j in range(len(runs)) if loops[j] == loop]
        keys = sorted(k for k in set().union(*same) if len({_scalar(c.get(k)) for c in same}) > 1)
        extra = [f"{k}={_scalar(cfg.get(k))}" for k in keys] + [
            f"{c}={chosen[i] if c == 'policy' and chosen[i] else _context_value(c, metrics[c][i])}"
            for c in context if not (c == "cluster" and "trace" in context)]
        label = loop + (f" [{', '.join(extra)}]" if extra else "")
        labels.append(label)
        if label not in variants:
            variants[label] = Variant(label, loop, _describe(runs[i], full[i]))
    ordered = sorted(variants.values(), key=Variant.order)
    return metrics.with_columns(variant=pl.Series(labels)), ordered


# ---- aggregation ---------------------------------------------------------------------------

def summarize(metrics: pl.DataFrame, variants: list[Variant]) -> pl.DataFrame:
    """Long table: variant, metric, seeds, mean, std, min, max (over seeds)."""
    cols = [m.column for m in catalogue(metrics.columns)]
    long = (metrics.select("variant", "seed", *cols).with_columns(pl.col(cols).cast(pl.Float64))
            .unpivot(index=["variant", "seed"], variable_name="metric")
            .filter(pl.col("value").is_not_nan()))
    v = pl.col("value")
    out = long.group_by("variant", "metric").agg(
        pl.col("seed").n_unique().alias("seeds"), v.mean().alias("mean"), v.std().alias("std"),
        v.min().alias("min"), v.max().alias("max"))
    return _ordered(out, variants, cols)


def ablation(metrics: pl.DataFrame, variants: list[Variant]) -> pl.DataFrame | None:
    """Every variant against the all-off separate baseline, paired by seed: saved = baseline -
    variant (positive = better), as mean [min, max] over the seeds both have. None without a
    single baseline."""
    base = [v for v in variants if v.is_baseline]
    if len(base) != 1:
        return None
    cols = [c for c in ABLATION if c in metrics.columns]
    runs = metrics.select("variant", "seed", *cols).with_columns(pl.col(cols).cast(pl.Float64))
    b = runs.filter(pl.col("variant") == base[0].label).drop("variant")
    joined = runs.join(b, on="seed", suffix="_base")
    long = pl.concat([
        joined.select("variant", "seed", pl.lit(c).alias("metric"), pl.col(c).alias("value"),
                      (pl.col(f"{c}_base") - pl.col(c)).alias("saved")) for c in cols])
    long = long.filter(pl.col("value").is_not_nan() & pl.col("saved").is_not_nan())
    out = long.group_by("variant", "metric").agg(
        pl.col("seed").n_unique().alias("seeds"), pl.col("value").mean().alias("value_mean"),
        pl.col("saved").mean().alias("saved_mean"), pl.col("saved").min().alias("saved_min"),
        pl.col("saved").max().alias("saved_max"),
        (pl.col("saved") > 0).sum().cast(pl.Int64).alias("seeds_better"))
    cap = {v.label: v.capability for v in variants}
    out = out.with_columns(capability=pl.col("variant").replace_strict(cap))
    return _ordered(out, variants, cols).select("variant", "capability", pl.exclude("variant", "capability"))


def _ordered(df: pl.DataFrame, variants: list[Variant], metrics: list[str]) -> pl.DataFrame:
    vi = {v.label: i for i, v in enumerate(variants)}
    mi = {m: i for i, m in enumerate(metrics)}
    return (df.with_columns(_v=pl.col("variant").replace_strict(vi, return_dtype=pl.Int64),
                            _m=pl.col("metric").replace_strict(mi, return_dtype=pl.Int64))
            .sort("_v", "_m").drop("_v", "_m"))


# ---- documents -----------------------------------------------------------------------------

@dataclass
class Table:
    id: str
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    text_cols: int = 1  # leading columns of text (left-aligned); the rest are numbers
    lead: int = 2  # leading columns that say what a row is (variant, seeds), repeated in each part
    group: int = 1  # number columns that belong together (a value and what it saved): never parted

    def parts(self) -> list[tuple[list[int], int]]:
        """The table's columns cut into parts of at most MAX_NUMBER_COLUMNS after the lead
        (balanced, whole groups), each (column indices, text columns)."""
        lead = max(self.lead, self.text_cols)
        groups = [list(range(i, i + self.group)) for i in range(lead, len(self.header), self.group)]
        n = max(1, math.ceil(len(groups) / max(1, MAX_NUMBER_COLUMNS // self.group)))
        size = math.ceil(len(groups) / n) if groups else 0
        chunks = [groups[i:i + size] for i in range(0, len(groups), size)] if groups else [[]]
        return [(list(range(lead)) + [c for g in chunk for c in g], self.text_cols) for chunk in chunks]


@dataclass
class Figure:
    id: str
    title: str
    png: bytes
    note: str = ""


@dataclass
class Report:
    title: str
    intro: list[str]
    verdict: list[str] = field(default_factory=list)  # first thing a reader sees
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    left_out: str = ""  # which plots the report does not draw, and why


def _num(x: float | None, digits: int) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:,.{digits}f}"


def _spread(mean, lo, hi, digits: int, count: bool = False) -> str:
    """mean [min, max]; the bracket is dropped when every seed gave the same value."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    ends = 0 if count else digits
    if _num(lo, ends) == _num(hi, ends):
        return _num(lo, ends) if count else _num(mean, digits)
    return f"{_num(mean, digits)} [{_num(lo, ends)}, {_num(hi, ends)}]"


def _shown(summary: pl.DataFrame, columns: list[str]) -> dict[str, Metric]:
    """Each column's metric as its table shows it (`readable`: seconds as hours where they
    reach five digits; summary.csv keeps seconds)."""
    return {c: readable(metric(c), summary.filter(pl.col("metric") == c)["max"].to_list()) for c in columns}


def _cells(summary: pl.DataFrame, variants: list[Variant], columns: list[str]) -> list[list[str]]:
    by = {(r["variant"], r["metric"]): r for r in summary.iter_rows(named=True)}
    shown = _shown(summary, columns)
    rows = []
    for v in variants:
        row = [v.label, str(max((by[(v.label, c)]["seeds"] for c in columns if (v.label, c) in by), default=0))]
        for c in columns:
            r, m = by.get((v.label, c)), shown[c]
            k = m.scale
            row.append(_spread(r["mean"] * k, r["min"] * k, r["max"] * k, m.digits, m.count) if r else "–")
        rows.append(row)
    return rows


def _metric_table(id: str, title: str, summary: pl.DataFrame, variants: list[Variant], columns: list[str],
                  note: str = "") -> Table:
    shown = _shown(summary, columns)
    return Table(id, title, ["variant", "seeds", *[shown[c].header for c in columns]],
                 _cells(summary, variants, columns), note)


def _means(summary: pl.DataFrame, variants: list[Variant]) -> dict[str, dict[str, float]]:
    means: dict[str, dict[str, float]] = {v.label: {} for v in variants}
    for r in summary.iter_rows(named=True):
        means[r["variant"]][r["metric"]] = r["mean"]
    return means


def _base(variants: list[Variant]) -> Variant:
    """The baseline: the all-off separate loops, else the first variant."""
    bases = [v for v in variants if v.is_baseline]
    return bases[0] if len(bases) == 1 else variants[0]


def unequal_work(metrics: pl.DataFrame, variants: list[Variant]) -> dict[str, str]:
    """The work notes (harness/work.py) of the variants whose runs did not do the baseline's
    work on the same seeds."""
    return work.notes(metrics, "variant", _base(variants).label) if len(variants) > 1 else {}


def grid_unequal_work(metrics: pl.DataFrame, cells: list[str]) -> dict[str, str]:
    """Across a grid: the loops whose runs did not do bare separate's work in the same setting
    and seed, and the merged loops that did not do a strongest baseline's (`merged vs
    separate_2026`), each with its note (grid.work_note)."""
    loops = list(dict.fromkeys(metrics["loop"].to_list()))
    pairs = [(loop, grid.BASE) for loop in loops if loop != grid.BASE and grid.BASE in loops]
    pairs += [(m, s) for m in grid.MERGED if m in loops for s in grid.STRONGEST if s in loops]
    notes = {(loop if over == grid.BASE else f"{loop} vs {over}"): grid.work_note(metrics, cells, loop, over)
             for loop, over in pairs}
    return {name: note for name, note in notes.items() if note}


def verdicts(summary: pl.DataFrame, variants: list[Variant], where: str = "",
             unequal: dict[str, str] | None = None) -> list[str]:
    """Each variant against the baseline, on the means over seeds, in the one setting `where`
    (harness.summary.setting) all runs share; one in `unequal` (unequal_work) says so first."""
    if len(variants) < 2:
        return []
    base, means, notes = _base(variants), _means(summary, variants), unequal or {}
    return [verdict(v.label, base.label, means[v.label], means[base.label], where, notes.get(v.label, ""))
            for v in variants if v is not base]


def headline_verdicts(summary: pl.DataFrame, metrics: pl.DataFrame, variants: list[Variant],
                      where: str = "") -> list[str]:
    """The merged loops against the strongest separate baselines (`grid.STRONGEST`), in the
    one setting all runs share: the headline, before the ablation's lines against bare separate."""
    means, by = _means(summary, variants), {v.label: v for v in variants}
    return [verdict(m, s, means[m], means[s], where, work.notes(metrics, "variant", s).get(m, ""))
            for m in grid.MERGED if m in by for s in grid.STRONGEST if s in by]


def grid_verdicts(metrics: pl.DataFrame, cols: list[str], variants: list[Variant]) -> list[str]:
    """The merged loops against the strongest separate baselines, then each loop against the
    separate loops where the grid has them, in ranges form across the grid's settings; the
    merged loop also against the other loop that leaves the least (`grid.strongest`)."""
    loops = list(dict.fromkeys(v.loop for v in variants))
    judged = [*([UNSERVED] if _valued(metrics, UNSERVED) else []), grid.VERDICT[0]]  # services: unserved first
    lines = [grid.ranges_verdict(m, s, grid.savings(metrics, cols, m, s, c), cols, c,
                                 grid.work_note(metrics, cols, m, s))
             for m in grid.MERGED if m in loops for s in grid.STRONGEST if s in loops for c in judged]
    if grid.BASE in loops:
        lines += [grid.ranges_verdict(loop, grid.BASE, grid.savings(metrics, cols, loop, grid.BASE, c), cols, c,
                                      grid.work_note(metrics, cols, loop, grid.BASE))
                  for loop in loops if loop != grid.BASE for c in judged]
    others = [loop for loop in loops if loop not in (grid.BASE, MERGED)]
    if MERGED in loops and others:  # and against the strongest of the others, not only the weakest
        for c in judged:
            rival = grid.strongest(metrics, cols, others, c)
            if rival in grid.STRONGEST:  # its line is the first
                continue
            lines.append(grid.ranges_verdict(MERGED, f"{rival} (the other loop with the least)",
                                             grid.savings(metrics, cols, MERGED, rival, c), cols, c,
                                             grid.work_note(metrics, cols, MERGED, rival)))
    return lines


def _valued(metrics: pl.DataFrame, column: str) -> bool:
    """Has some run a value in this column (a trace without gangs or services has none)?"""
    return column in metrics.columns and bool(metrics[column].cast(pl.Float64).is_not_nan().any())


def _scaled(x, m: Metric):
    """A value in the unit its metric is shown in (None stays None)."""
    return None if x is None else x * m.scale


def _pm(mean, half, digits: int) -> str:
    """mean ± half-width (the half-width left out for one seed)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    return _num(mean, digits) if half is None or math.isnan(half) else f"{_num(mean, digits)} ± {_num(half, digits)}"


def grid_tables(metrics: pl.DataFrame, cols: list[str], variants: list[Variant]
                ) -> tuple[list[Table], pl.DataFrame, pl.DataFrame]:
    """The grid's tables: each setting's loops (mean ± 95% CI over seeds), each interface step
    per setting, and each step across the settings; with the two long tables behind them."""
    loops = list(dict.fromkeys(v.loop for v in variants))
    stats = grid.cell_stats(metrics, cols, GRID)
    by = {(tuple(r[c] for c in cols), r["loop"], r["metric"]): r for r in stats.iter_rows(named=True)}
    keys = sorted({k[0] for k in by}, key=lambda key: [(v is None, 0 if v is None else v) for v in key])  # unset last
    columns = [c for c in GRID if _valued(metrics, c)]
    shown = {c: readable(metric(c), stats.filter(pl.col("metric") == c)["mean"].to_list()) for c in columns}
    rows = []
    for key in keys:
        where = grid.describe(dict(zip(cols, key, strict=True)), cols)
        for loop in loops:
            cells = [by.get((key, loop, c)) for c in columns]
            if any(cells):
                seeds = max(r["seeds"] for r in cells if r)
                rows.append([where, loop, str(seeds), *[_pm(_scaled(r["mean"], shown[c]), _scaled(r["half"], shown[c]),
                                                            shown[c].digits) if r else "–"
                                                        for r, c in zip(cells, columns, strict=True)]])
    tables = [Table("grid", "Robustness grid: each setting (mean ± 95% CI over seeds)",
                    ["setting", "loop", "seeds", *[shown[c].header for c in columns]], rows,
                    "The interval is t-based over the setting's seeds (Student's t, n - 1 degrees of freedom).",
                    text_cols=2, lead=3)]
    steps = grid.steps(metrics, cols)
    if steps.height:
        label = metric("idle_accel_hours")
        detail = [[r["step"], grid.describe(r, cols), str(r["seeds"]), _pm(r["saved"], r["half"], 0),
                   percent(r["pct"]) if r["pct"] is not None else "–",
                   "no: unequal work" if not r["equal_work"] else
                   ONE_SEED if r["seeds"] < 2 else {True: "yes", False: "no"}.get(r["holds"], "n/a")]
                  for r in steps.iter_rows(named=True)]
        tables.append(Table("steps", f"Interface steps in each setting: {label.label} saved over the step before",
                            ["step", "setting", "seeds", "saved (h, ± 95% CI)", "saved (%)", "holds"], detail,
                            "Steps (those whose two loops ran): "
                            + "; ".join(f"{name}: {loop} over {over}" for name, loop, over in grid.STEPS
                                        if name in set(steps["step"].to_list()))
                            + ". saved = the step before - this "
                            "step, paired by seed; it holds when the saving is > 0, its interval excludes 0 and both "
                            "loops did the same work on every seed (pods and jobs done, never admitted or started).",
                            text_cols=2, lead=3))
        across = []
        for (name, loop, over) in grid.STEPS:
            part = steps.filter(pl.col("step") == name)
            equal = part.filter(pl.col("equal_work"))
            pcts = [x for x in equal["pct"].to_list() if x is not None]
            if not part.height:
                continue
            if not (part["seeds"] > 1).any():  # no interval, so no setting where it could be said to hold
                across.append([name, f"{loop} over {over}", grid.span(pcts) if pcts else "–", ONE_SEED,
                               str(part.height - equal.height), ONE_SEED])
                continue
            held = int(part["holds"].fill_null(False).sum())
            across.append([name, f"{loop} over {over}", grid.span(pcts) if pcts else "–",
                           f"{held}/{equal.height}", str(part.height - equal.height),
                           "yes" if held == part.height else "no"])
        header = ["step", "loops", "saved (%, min-max)", "holds in (settings)", "unequal work (settings)",
                  "holds everywhere"]
        tables.append(Table("steps-across", "Interface steps across the grid", header, across,
                            "The range of the step's saving over the settings where both loops did the same work, "
                            "in how many of those it holds (saving > 0, 95% interval excluding 0), and the settings "
                            "of unequal work, counted apart: no saving is claimed there.", text_cols=2, lead=2))
    return tables, stats, steps


def _model_split(model: str, m: dict, b: dict) -> str:
    """`T4 1,200 h against 400 h (~0.45 USD per idle GPU-hour)`: a model's idle hours in two
    variants' means, priced at their pooled idle USD per idle hour."""
    h, usd = f"idle_accel_hours_model_{model}", f"idle_accel_usd_model_{model}"
    both = m[h] + b[h]
    price = (m.get(usd, 0.0) + b.get(usd, 0.0)) / both if both else math.nan
    return f"{model} {_num(m[h], 0)} h against {_num(b[h], 0)} h (~{_num(price, 2)} USD per idle GPU-hour)"


def idle_split(summary: pl.DataFrame, variants: list[Variant]) -> list[str]:
    """Where each variant's idle hours sit by GPU model, when it idles more hours than the
    baseline yet they cost less (or fewer that cost more): the hours moved to cheaper (dearer)
    models. Each model's price is its idle USD per idle hour, both variants pooled."""
    base, means = _base(variants), _means(summary, variants)
    b = means[base.label]
    out = []
    for v in variants:
        m = means[v.label]
        if v is base or not all(k in m and k in b for k in ("idle_accel_hours", "idle_accel_usd")):
            continue
        dh, du = m["idle_accel_hours"] - b["idle_accel_hours"], m["idle_accel_usd"] - b["idle_accel_usd"]
        if dh * du >= 0 or not b["idle_accel_hours"] or not b["idle_accel_usd"]:
            continue
        hours = [c for c in expand([MODELS], m) if c.startswith("idle_accel_hours_model_") and c in b]
        moved = sorted(hours, key=lambda c: -abs(m[c] - b[c]))[:4]  # the models whose idle hours moved most
        split = "; ".join(_model_split(c[len("idle_accel_hours_model_"):], m, b) for c in moved)
        more, cost = ("more", "less") if dh > 0 else ("fewer", "more")
        out.append(f"{v.label} idles {percent(abs(dh) / b['idle_accel_hours'] * 100)} {more} accelerator hours than "
                   f"{base.label}, yet they cost {percent(abs(du) / b['idle_accel_usd'] * 100)} {cost}: the hours sit "
                   f"on other GPU models. Idle hours by model, {v.label} against {base.label}: {split}.")
    return out


def _dearest(summary: pl.DataFrame, present: set[str]) -> str:
    """`, so an idle H100 does not count as an idle L4`: the dearest and the cheapest of the
    runs' GPU models per idle hour (nothing for one model)."""
    hours, usd = "idle_accel_hours_model_", "idle_accel_usd_model_"
    models = [c[len(hours):] for c in present if c.startswith(hours) and usd + c[len(hours):] in present]
    total = dict(summary.group_by("metric").agg(pl.col("mean").sum()).iter_rows())
    price = {m: total[usd + m] / total[hours + m] for m in models if total[hours + m]}
    if len(price) < 2:
        return ""
    dear, cheap = max(price, key=lambda m: (price[m], m)), min(price, key=lambda m: (price[m], m))
    return f", so an idle {dear} does not count as an idle {cheap}"


def tables(summary: pl.DataFrame, abl: pl.DataFrame | None, variants: list[Variant], present: set[str],
           unequal: dict[str, str], against: str | None = None) -> list[Table]:
    """The report's tables; the work table's note names what `unequal` holds (unequal_work,
    grid_unequal_work): what did not do the work of `against` (default: the baseline variant)."""
    def have(cols):
        return [c for c in cols if c in present]

    out = [Table("variants", "Variants", ["variant", "loop", "capability"],
                 [[v.label, v.loop, v.capability] for v in variants], text_cols=3, lead=3)]
    out.append(_metric_table("headline", "Headline (mean [min, max] over seeds)", summary, variants, have(HEADLINE)))
    if "pods_done" in present:
        base = against or _base(variants).label
        unequal_note = (f" {work.MARK} to {base} (on some seed; the verdicts say how): {', '.join(unequal)}."
                        if unequal else f" Every variant did the work of {base}.")
        out.append(_metric_table("work", "Work done by the horizon", summary, variants, have(WORK),
                                 "Loops compared must finish the same work: the same pods and jobs done, none never "
                                 "admitted or never started, paired by seed." + unequal_note))
    out.append(_metric_table("idle", "Idle accelerator hours by cause", summary, variants,
                             have(["idle_accel_hours", *[f"idle_accel_hours_{c}" for c in IDLE_CAUSES]]),
                             "idle = billed - used = booting + unallocated + gang wait + committed (docs/model.md)."))
    by_model = expand(["idle_accel_hours", "idle_accel_usd", MODELS], present)
    if any(c.startswith(tuple(BY_MODEL)) for c in by_model):
        out.append(_metric_table("idle-models", "Idle accelerator hours and their cost by GPU model", summary, variants,
                                 have(by_model), " ".join([
                                     "Each idle GPU at its pool's price per GPU-hour (node price / GPUs; a committed "
                                     f"slot at its committed price, as cost counts it){_dearest(summary, present)}.",
                                     *idle_split(summary, variants)])))
    if have(SERVICES):
        out.append(_metric_table("services", "Services: demand against ready capacity", summary, variants,
                                 have(SERVICES), "Totals over the services of each run (docs/model.md, services)."))
    out.append(_metric_table("pending", "Pending pod-hours by reason", summary, variants,
                             have([f"pending_s_{r}" for r in REASON_NAMES]),
                             "Seconds pods spent pending, integrated by the reason of their last scheduling attempt, "
                             "in hours."))
    out.append(_metric_table("more", "More metrics", summary, variants,
                             have(["billed_accel_hours", "used_accel_hours", "frag_amount", "gang_latency_p90_s",
                                   "gang_latency_max_s", "job_completion_p50_s"])))
    if abl is not None and abl.height:
        cols = [c for c in ABLATION if c in abl["metric"].to_list()]
        by = {(r["variant"], r["metric"]): r for r in abl.iter_rows(named=True)}
        header = ["variant", "capability"]
        for c in cols:
            header += [metric(c).header, "saved"]
        rows = []
        for v in variants:
            row = [v.label, v.capability]
            for c in cols:
                r, d = by.get((v.label, c)), metric(c).digits
                if r is None:
                    row += ["–", "–"]
                    continue
                saved = "" if v.is_baseline else (
                    f"{_spread(r['saved_mean'], r['saved_min'], r['saved_max'], d)} ({r['seeds_better']}/{r['seeds']})")
                row += [_num(r["value_mean"], d), saved or "baseline"]
            rows.append(row)
        out.append(Table("ablation", "Ablation: what each capability saved vs the all-off separate loops", header, rows,
                         "saved = baseline - variant on the same seed (positive = better), mean [min, max] over seeds; "
                         "(k/n) = seeds on which it was better. A [min, max] that straddles 0 is not a consistent "
                         "difference.", text_cols=2, group=2))
    return out


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|")


def markdown(rep: Report, pngs: dict[str, str]) -> str:
    lines = [f"# {rep.title}", ""]
    if rep.verdict:
        lines += [*[f"- {v}" for v in rep.verdict], ""]
    for p in rep.intro:
        lines += [p, ""]
    for t in rep.tables:
        lines += [f"## {t.title}", ""]
        if t.note:
            lines += [t.note, ""]
        for cols, text in t.parts():
            lines += ["| " + " | ".join(_md_cell(t.header[c]) for c in cols) + " |",
                      "|" + "|".join(["---"] * text + ["---:"] * (len(cols) - text)) + "|"]
            lines += ["| " + " | ".join(_md_cell(r[c]) for c in cols) + " |" for r in t.rows]
            lines.append("")
    if rep.figures or rep.left_out:
        lines += ["## Plots", ""]
    if rep.figures:
        lines += ["The same plots, self-contained: [report.html](report.html).", ""]
    if rep.left_out:
        lines += [rep.left_out, ""]
    for f in rep.figures:
        lines += [f"### {f.title}", ""]
        if f.note:
            lines += [f.note, ""]
        lines += [f"![{f.title}]({pngs[f.id]})", ""]
    return "\n".join(lines)


#: Cells wrap so that a wide table fits the page: text at spaces and underscores, numbers only
#: before a bracket (`_html_text`, `_html_number`).
CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}th,td{border:1px solid #ccc;padding:3px 5px}
th{background:#f3f3f3;font-weight:600}td{text-align:right;font-variant-numeric:tabular-nums}td.t{text-align:left}
.scroll{overflow-x:auto}ul.verdict{font-size:15px;line-height:1.5}
figure{margin:1em 0 2em}img{max-width:100%;border:1px solid #eee}.note{color:#555;font-size:13px}"""
#: Once loaded, marks on <body> how many images decoded and were laid out, how many tables
#: have rows on screen and how many are wider than the page (they would scroll), for the
#: headless-browser check (tests/test_report.py).
SCRIPT = """window.addEventListener('load',function(){
function shown(e){var r=e.getBoundingClientRect();return r.width>0&&r.height>0;}
var im=Array.prototype.slice.call(document.images),tb=Array.prototype.slice.call(document.querySelectorAll('table'));
var ok=im.filter(function(i){return i.complete&&i.naturalWidth>0&&shown(i);}).length;
var rows=tb.filter(function(t){return t.tBodies[0].rows.length>0&&shown(t);}).length;
document.body.setAttribute('data-images-decoded',ok+'/'+im.length);
document.body.setAttribute('data-tables-shown',rows+'/'+tb.length);
var wide=tb.filter(function(t){var box=t.parentNode;return box.scrollWidth>box.clientWidth;}).length;
document.body.setAttribute('data-tables-overflowing',String(wide));});"""


def _html_text(cell: str) -> str:
    """A text cell that may also break after an underscore, a slash, a plus, an equals sign or a
    star (a variant named by its trace path or scoring: `separate_<wbr>reservation`,
    `policy=<wbr>1*<wbr>LeastAllocated+<wbr>1*<wbr>BalancedAllocation`)."""
    escaped = html.escape(cell)
    for c in "_/+=*":
        escaped = escaped.replace(c, c + "<wbr>")
    return escaped


def _html_number(cell: str) -> str:
    """A number cell that may break only before a bracket: `7,315 [6,727, 7,643] (5/5)`."""
    return re.sub(r" (?![\[(])", "&nbsp;", html.escape(cell))


def html_page(rep: Report) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{e(rep.title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{e(rep.title)}</h1>"]
    if rep.verdict:
        parts.append('<ul class="verdict">' + "".join(f"<li>{e(v)}</li>" for v in rep.verdict) + "</ul>")
    parts += [f"<p>{e(p)}</p>" for p in rep.intro]
    first, rest = rep.figures[:1], rep.figures[1:]
    parts += [_html_figure(f) for f in first]  # a plot before the tables: what the numbers look like
    for t in rep.tables:
        parts.append(f'<h2>{e(t.title)}</h2>')
        if t.note:
            parts.append(f'<p class="note">{e(t.note)}</p>')
        parts.append(f'<div class="scroll"><table id="table-{t.id}"><thead><tr>'
                     + "".join(f"<th>{e(h)}</th>" for h in t.header) + "</tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td class=t>{_html_text(c)}</td>" if i < t.text_cols
                                   else f"<td>{_html_number(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                  for r in t.rows]
        parts.append("</tbody></table></div>")
    if rest or rep.left_out:
        parts.append("<h2>Plots</h2>")
    if rep.left_out:
        parts.append(f'<p class="note">{e(rep.left_out)}</p>')
    parts += [_html_figure(f) for f in rest]
    parts += [f"<script>{SCRIPT}</script>", "</body></html>", ""]
    return "\n".join(parts)


def _html_figure(f: Figure) -> str:
    e = html.escape
    data = base64.b64encode(f.png).decode("ascii")
    return (f'<figure id="figure-{f.id}"><h3>{e(f.title)}</h3>' + (f'<p class="note">{e(f.note)}</p>' if f.note else "")
            + f'<img alt="{e(f.title)}" src="data:image/png;base64,{data}"></figure>')


# ---- plots ---------------------------------------------------------------------------------

def _png(fig) -> bytes:
    """The figure as a 64-colour palette PNG: a third of the size of matplotlib's RGBA output,
    which matters as results/ is committed; no metadata (no version, no date)."""
    from PIL import Image  # a dependency of matplotlib

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(64, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _figure(width: float, height: float):
    from matplotlib.figure import Figure as MplFigure  # Agg canvas: no display, no pyplot state

    return MplFigure(figsize=(width, height), layout="constrained")


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _stacked(summary: pl.DataFrame, variants: list[Variant], parts: list[tuple[str, str]], total: str | None,
             xlabel: str, scale: float = 1.0) -> bytes:
    """Horizontal stacked bars, one per variant, top to bottom in the tables' order: the
    variant names read level however many there are."""
    by = {(r["variant"], r["metric"]): r for r in summary.iter_rows(named=True)}
    names = [v.label for v in variants]
    # room for the longest name beside 5 in of bars (a grid's labels name their setting)
    fig = _figure(max(8.0, 5.0 + 0.075 * max(map(len, names), default=0)), 0.32 * len(names) + 1.6)
    ax = fig.subplots()
    y = np.arange(len(names))
    left = np.zeros(len(names))
    for (col, label), color in zip(parts, _colors(len(parts)), strict=True):
        w = np.array([by[(n, col)]["mean"] * scale if (n, col) in by else 0.0 for n in names])
        ax.barh(y, w, left=left, label=label, color=color)
        left += w
    if total:
        rows = [by.get((n, total)) for n in names]
        mean = np.array([r["mean"] * scale if r else np.nan for r in rows])
        err = np.array([[mean[i] - r["min"] * scale, r["max"] * scale - mean[i]] if r else [0, 0]
                        for i, r in enumerate(rows)]).T.clip(min=0)  # equal seeds: the mean may round past both
        ax.errorbar(mean, y, xerr=err, fmt="none", ecolor="black", capsize=3, lw=1, label="total: min-max over seeds")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_formatter("{x:,.0f}")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", ncols=3)  # below the bars, never over them
    return _png(fig)


def plot_cost(summary: pl.DataFrame, variants: list[Variant]) -> bytes:
    return _stacked(summary, variants, [("cost_usd", "cost (mean over seeds)")], "cost_usd", "cost (USD)")


def plot_gang_cdf(jobs: pl.DataFrame, variants: list[Variant]) -> bytes | None:
    """CDF of gang start latency over the gangs of all seeds; never-started gangs are in the
    denominator, so a curve that stops below 1 shows them."""
    gangs = jobs.filter(pl.col("is_gang") & ~pl.col("refused"))
    if gangs.height == 0:
        return None
    fig = _figure(8, 4.5)
    ax = fig.subplots()
    for v, color in zip(variants, _colors(len(variants)), strict=True):
        lat = gangs.filter(pl.col("variant") == v.label)["start_latency_s"]
        if lat.len() == 0:
            continue
        started = np.sort(lat.drop_nulls().to_numpy())
        y = np.arange(1, len(started) + 1) / lat.len()
        ax.step(np.concatenate([[0.0], started]), np.concatenate([[0.0], y]), where="post", color=color,
                label=f"{v.label} ({lat.null_count()} never started)" if lat.null_count() else v.label)
    ax.set_xscale("symlog", linthresh=60)
    ax.set_xlabel("gang start latency (s, log scale above 60 s)")
    ax.set_ylabel("fraction of gangs started")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return _png(fig)


BIN_S = 300  # timeline plots average the per-minute samples over 5-minute bins (smaller PNGs, same shape)


def _seed_mean(timeline: pl.DataFrame, cols: list[str], by: tuple[str, ...] = ("variant",)) -> pl.DataFrame:
    """Mean over seeds and over each BIN_S bin, per variant (and whatever else `by` names)."""
    return (timeline.with_columns(t_s=(pl.col("t_s") // BIN_S) * BIN_S)
            .group_by(*by, "t_s").agg(pl.col(cols).mean()).sort(*by, "t_s"))


def plot_fragmentation(timeline: pl.DataFrame, variants: list[Variant]) -> bytes:
    tl = _seed_mean(timeline, ["frag_ratio", "frag_amount"])
    fig = _figure(12, 4.2)
    axes = fig.subplots(1, 2, sharex=True)
    for v, color in zip(variants, _colors(len(variants)), strict=True):
        d = tl.filter(pl.col("variant") == v.label)
        hours = d["t_s"].to_numpy() / 3600
        for ax, col in zip(axes, ("frag_ratio", "frag_amount"), strict=True):
            # one-hour rolling mean: the samples jump with every bind
            ax.plot(hours, d[col].rolling_mean(3600 // BIN_S, min_samples=1).to_numpy(), color=color, lw=1,
                    label=v.label)
    axes[0].set_ylabel("fragmentation ratio (F / idle GPU milli)")
    axes[1].set_ylabel("fragmentation amount (F / GPU milli of ready nodes)")
    for ax in axes:
        ax.set_xlabel("time (h)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return _png(fig)


def plot_billed_used(timeline: pl.DataFrame, variants: list[Variant]) -> bytes:
    tl = _seed_mean(timeline, ["billed_gpus", "used_gpus"])
    ncols = min(4, len(variants))
    nrows = math.ceil(len(variants) / ncols)
    fig = _figure(3.2 * ncols, 2.4 * nrows + 0.4)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)).ravel()
    for ax, v in zip(axes, variants, strict=False):
        d = tl.filter(pl.col("variant") == v.label)
        hours = d["t_s"].to_numpy() / 3600
        ax.fill_between(hours, d["used_gpus"].to_numpy(), color="tab:green", alpha=0.5, lw=0, label="used")
        ax.plot(hours, d["billed_gpus"].to_numpy(), color="tab:red", lw=1, label="billed")
        ax.set_title(v.label, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[len(variants):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    fig.supxlabel("time (h)", fontsize=9)
    fig.supylabel("accelerators (mean over seeds)", fontsize=9)
    return _png(fig)


def plot_services(timeline: pl.DataFrame, variants: list[Variant]) -> bytes:
    """One panel per service: its demand (the trace's, grey) and each variant's ready capacity
    (ready replicas x capacity_per_replica), in demand units per second, each bin's mean held
    over the bin. Demand is the first variant's that has the service: the loops of one trace
    share it."""
    tl = _seed_mean(timeline, ["demand", "ready_capacity"], by=("variant", "service"))
    names = list(dict.fromkeys(timeline.sort("service")["service"].to_list()))
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig = _figure(4.0 * ncols, 2.6 * nrows + 0.6)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, squeeze=False)).ravel()
    for ax, name in zip(axes, names, strict=False):
        d = tl.filter(pl.col("service") == name)
        first = d.filter(pl.col("variant") == next(v.label for v in variants if v.label in d["variant"]))
        ax.fill_between(first["t_s"].to_numpy() / 3600, first["demand"].to_numpy(), step="post", color="0.8", lw=0,
                        label="demand")
        for v, color in zip(variants, _colors(len(variants)), strict=True):
            mine = d.filter(pl.col("variant") == v.label)
            if mine.height:
                ax.plot(mine["t_s"].to_numpy() / 3600, mine["ready_capacity"].to_numpy(), color=color, lw=1,
                        drawstyle="steps-post", label=f"{v.label}: ready capacity")
        ax.set_title(name, fontsize=8)
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.grid(alpha=0.3)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=min(3, len(labels)))
    fig.supxlabel("time (h)", fontsize=9)
    fig.supylabel("demand units per second (mean over seeds)", fontsize=9)
    return _png(fig)


def gantt_figures(runs: list[Path], metrics: pl.DataFrame, variants: list[Variant]) -> list[Figure]:
    """A Gantt view of one run per variant, its lowest seed, for the first GANTTS variants whose
    runs have nodes.parquet."""
    index = {r: i for i, r in enumerate(runs)}
    out: list[Figure] = []
    for v in variants[:GANTTS]:
        mine = [(metrics["seed"][index[r]], r) for r in runs if metrics["variant"][index[r]] == v.label]
        seed, run = min(mine)
        if not (run / "nodes.parquet").exists():
            continue
        tl = run_timeline.read(run)
        which = f"{v.label}, seed {seed}"
        more = f" Only the first {GANTTS} variants have one." if len(variants) > GANTTS and not out else ""
        out.append(Figure(f"gantt-{len(out)}", f"Nodes over time: {which}", _png(gantt.plot(tl, which)),
                          f"One run: {which} (its lowest seed).{more} {gantt.caption(tl)}"))
    return out


def _idle_figure(summary: pl.DataFrame, variants: list[Variant]) -> Figure:
    return Figure("idle", "Idle accelerator hours by cause",
                  _stacked(summary, variants, [(f"idle_accel_hours_{c}", c.replace("_", " ")) for c in IDLE_CAUSES],
                           "idle_accel_hours", "idle accelerator hours"),
                  "Stacked: mean over seeds of each cause; whiskers: min and max of the total over seeds.")


def bar_figures(summary: pl.DataFrame, variants: list[Variant]) -> list[Figure]:
    """A grid's plots: idle hours by cause and cost, one bar per variant."""
    return [_idle_figure(summary, variants),
            Figure("cost", "Cost", plot_cost(summary, variants), "Bars: mean over seeds; whiskers: min and max.")]


def figures(summary: pl.DataFrame, jobs: pl.DataFrame, timeline: pl.DataFrame, variants: list[Variant],
            services: pl.DataFrame | None = None) -> list[Figure]:
    """The plots of a report; `services`: the runs' services timelines (services_timeline.parquet),
    when some run had services."""
    out = [_idle_figure(summary, variants)]
    cdf = plot_gang_cdf(jobs, variants)
    if cdf is not None:
        out.append(Figure("gang-cdf", "Gang start latency CDF", cdf,
                          "All gangs of all seeds pooled; gangs never started keep a curve below 1."))
    out += [
        Figure("fragmentation", "Fragmentation over time", plot_fragmentation(timeline, variants),
               "FGD fragmentation of ready nodes, mean over seeds, one-hour rolling mean."),
        Figure("billed-used", "Billed vs used accelerators over time", plot_billed_used(timeline, variants),
               "The gap between the red line and the green area is idle accelerators."),
        Figure("cost", "Cost", plot_cost(summary, variants), "Bars: mean over seeds; whiskers: min and max."),
        Figure("pending", "Pending pod-hours by reason",
               _stacked(summary, variants, [(f"pending_s_{r}", r.replace("_", " ")) for r in REASON_NAMES], None,
                        "pending pod-hours", 1 / 3600),
               "Mean over seeds, stacked by the reason of each pod's last scheduling attempt."),
    ]
    if services is not None and services.height:
        out.append(Figure("services", "Demand against ready capacity over time, per service",
                          plot_services(services, variants),
                          "Grey: the service's demand; lines: each variant's ready capacity (ready replicas x "
                          f"capacity per replica). Mean over seeds and {BIN_S // 60}-minute bins: where a line "
                          "runs below the grey, demand went unserved."))
    return out


# ---- the command -----------------------------------------------------------------------------

def _read_all(runs: list[Path], labels: pl.Series, name: str, columns: list[str]) -> pl.DataFrame:
    frames = [_read(r / name, columns).with_columns(variant=pl.lit(v))
              for r, v in zip(runs, labels, strict=True) if (r / name).exists()]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _read_metrics(run: Path) -> pl.DataFrame:
    path = run / COMPLETE_MARKER
    metrics = _read(path)
    if "loop" not in metrics.columns:
        raise LoopbenchError(f"{path}: no 'loop' column; not a replay run "
                             "(openb packing runs: loopbench packing-report)")
    if "seed" not in metrics.columns:
        raise _broken(path, "has no column 'seed'")
    return metrics


def _left_out(metrics: pl.DataFrame, cells: list[str], variants: list[Variant]) -> str:
    """Why a grid's report draws bars only: the plots of one setting, by name, and how to get them."""
    names = [*(["gang start latency CDF"] if _valued(metrics, "gang_latency_p99_s") else []),
             "fragmentation over time", "billed vs used accelerators over time", "pending pod-hours by reason",
             *(["demand against ready capacity per service"] if _valued(metrics, UNSERVED) else [])]
    settings = metrics.select(cells).unique().height
    return (f"Left out: {', '.join(names[:-1])} and {names[-1]}. These runs differ by {grid.depending(cells)} "
            f"({settings} settings, {len(variants)} variants): too many for one curve or panel each. A report over "
            "the runs of one setting draws them.")


def _write_csv(df: pl.DataFrame, path: Path) -> None:
    write_text(df.write_csv(float_precision=FLOAT_DIGITS), path)


def runs_table(metrics: pl.DataFrame, variants: list[Variant]) -> pl.DataFrame:
    """Every run's metrics row (runs.csv), by variant then seed, without what differs between
    two replays of one config (the wall time)."""
    order = {v.label: i for i, v in enumerate(variants)}
    return (metrics.drop([c for c in UNSTABLE if c in metrics.columns])
            .with_columns(_o=pl.col("variant").replace_strict(order, return_dtype=pl.Int64))
            .sort("_o", "seed").drop("_o").select("variant", pl.exclude("variant")))


def runs_csv(paths: list[str | Path]) -> str:
    """The runs.csv a report over the runs below `paths` writes, made alone (no plots, no files):
    what a committed experiment's rows are checked against."""
    _, metrics, variants = _labelled_runs(paths)
    return runs_table(metrics, variants).write_csv(float_precision=FLOAT_DIGITS)


def _labelled_runs(paths: list[str | Path]) -> tuple[list[Path], pl.DataFrame, list[Variant]]:
    """The finished runs below `paths`, their metrics rows, each labelled with its variant, and the variants.

    Runs of different loops have different columns (a gang's, a queue's, a GPU model's), and the
    folders a sweep lays its runs out in depend on how many processes ran it: so the columns are
    put in the order they first appear in the runs taken by variant, then seed, which is the same
    for the same runs however they were found."""
    runs = find_runs(paths)
    frames = [_read_metrics(r) for r in runs]
    metrics, variants = label_runs(runs, pl.concat(frames, how="diagonal_relaxed"))
    rank = {v.label: i for i, v in enumerate(variants)}
    labels, seeds = metrics["variant"].to_list(), metrics["seed"].to_list()
    turn = sorted(range(len(runs)), key=lambda i: (rank[labels[i]], seeds[i]))
    columns = list(dict.fromkeys(c for i in turn for c in frames[i].columns))
    return runs, metrics.select(*columns, *(c for c in metrics.columns if c not in columns)), variants


def _intro(metrics: pl.DataFrame, variants: list[Variant], runs: list[Path]) -> list[str]:
    seeds = sorted(metrics["seed"].unique().to_list())
    facts = [f"{len(runs)} runs: {len(variants)} variants x seeds {', '.join(map(str, seeds))}."]
    for c, what in (("trace", "trace"), ("cluster", "cluster"), ("policy", "scheduler score policy"),
                    ("shortage", "provider (cluster.shortage)")):
        if c in metrics.columns:
            values = sorted(map(str, metrics[c].unique().to_list()))
            if c == "shortage":  # the value and what it means: `error` is no failure of the run
                values = [f"{v} ({provider(v)})" if provider(v) != v else v for v in values]
            facts.append(f"{what}: {', '.join(values)}.")
    for c, what in (("pods", "pods"), ("gangs", "gangs")):
        if c in metrics.columns:
            values = sorted(metrics[c].unique().to_list())
            facts.append(f"{what}: {', '.join(f'{x:,}' for x in values)}.")
    if "horizon_s" in metrics.columns:
        horizons = [f"{x / 3600:,.1f} h" for x in sorted(metrics["horizon_s"].unique().to_list())]
        if len(horizons) > 4:  # runs that end with their last pod (stop_when_done): each its own
            horizons = [horizons[0], "...", horizons[-1],
                        f"({len(horizons)} values: runs that ended with their last pod)"]
        facts.append(f"horizon: {', '.join(horizons)}.")
    return [" ".join(facts),
            "Values are mean [min, max] over seeds (the comparisons at the top: means); a bracket is left out "
            "when every seed gave the same value. ↓: lower is better, ↑: higher is better. "
            "Metric definitions: docs/model.md."]


def build(paths: list[str | Path], out: Path, title: str | None = None, notes: Sequence[str] = (),
          gantt_view: bool = True) -> Report:
    """Aggregate the runs below `paths` and write the report files into `out`, replacing it whole;
    `gantt_view`: with a Gantt view of one run per variant (gantt_figures)."""
    runs, metrics, variants = _labelled_runs(paths)
    labels = metrics["variant"]
    order = {v.label: i for i, v in enumerate(variants)}
    summary = summarize(metrics, variants)
    abl = ablation(metrics, variants)
    cells = grid.cell_columns(metrics)
    jobs = _read_all(runs, labels, "jobs.parquet", ["is_gang", "refused", "start_latency_s"])
    # a grid has too many variants for one curve or panel each: its plots are bars only
    timeline = pl.DataFrame() if cells else _read_all(runs, labels, "timeline.parquet",
                                                      ["t_s", "billed_gpus", "used_gpus", "frag_ratio", "frag_amount"])
    services = pl.DataFrame() if cells else _read_all(runs, labels, "services_timeline.parquet",
                                                      ["t_s", "service", "demand", "ready_capacity"])
    unequal = grid_unequal_work(metrics, cells) if cells else unequal_work(metrics, variants)
    where = setting(metrics.row(0, named=True))
    rep = Report(title or out.name, [*notes, *_intro(metrics, variants, runs)],
                 grid_verdicts(metrics, cells, variants) if cells else
                 [*headline_verdicts(summary, metrics, variants, where), *verdicts(summary, variants, where, unequal)])
    baselines = [v.label for v in variants if v.is_baseline]
    if len(baselines) > 1:
        rep.intro.append(f"No ablation table: {len(baselines)} variants are all-off separate loops "
                         f"({'; '.join(baselines)}); report each trace/cluster/policy separately for one.")
    against = f"{grid.BASE} in the same setting" if cells else None
    rep.tables = tables(summary, abl, variants, set(summary["metric"]), unequal, against)  # metrics with a value
    grid_stats = steps = None
    if cells:
        first, grid_stats, steps = grid_tables(metrics, cells, variants)
        rep.tables[1:1] = first  # after the variants: the grid is what the report is about
        rep.figures = bar_figures(summary, variants)
        rep.left_out = _left_out(metrics, cells, variants)
    elif jobs.height and timeline.height:
        rep.figures = figures(summary, jobs, timeline, variants, services)
    else:
        rep.left_out = (f"No plots: the runs have no {'jobs.parquet' if not jobs.height else 'timeline.parquet'} "
                        "(the plots draw each job's start and the timeline of every run).")
    if gantt_view and not cells:
        rep.figures += gantt_figures(runs, metrics, variants)
    with atomic_dir(out, "summary.md") as tmp:  # `out` is the old report or the new one, whole
        pngs = {f.id: f"{f.id}.png" for f in rep.figures}
        for f in rep.figures:
            (tmp / pngs[f.id]).write_bytes(f.png)
        _write_csv(summary, tmp / "summary.csv")
        _write_csv(runs_table(metrics, variants), tmp / "runs.csv")
        if abl is not None:
            _write_csv(abl, tmp / "ablation.csv")
        if grid_stats is not None:
            _write_csv(grid_stats, tmp / "grid.csv")
        if steps is not None and steps.height:
            _write_csv(steps, tmp / "steps.csv")
        write_text(markdown(rep, pngs), tmp / "summary.md")
        write_text(html_page(rep), tmp / "report.html")
        by_row = sorted(range(len(runs)), key=lambda i: (order[labels[i]], metrics["seed"][i]))
        write_report_provenance(tmp, [({"variant": labels[i], "seed": metrics["seed"][i]}, runs[i]) for i in by_row])
    return rep


def main(argv: list[str]) -> int:
    """`loopbench report RUN_OR_SWEEP_DIR... -o OUTDIR [--title T] [--note TEXT]...`"""
    ap = argparse.ArgumentParser(prog="loopbench report",
                                 description="Tables, plots and an HTML page from replay runs (single runs or sweeps).")
    ap.add_argument("dirs", nargs="+", metavar="RUN_OR_SWEEP_DIR")
    ap.add_argument("-o", "--out", required=True, metavar="OUTDIR")
    ap.add_argument("--title", help="page title (default: the OUTDIR name)")
    ap.add_argument("--note", action="append", default=[], help="a paragraph to print under the title (repeatable)")
    ap.add_argument("--no-gantt", action="store_true",
                    help=f"leave out the Gantt view of nodes over time (a run of each of the first {GANTTS} variants)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    rep = build(args.dirs, out, args.title, args.note, gantt_view=not args.no_gantt)
    print(f"{len(rep.tables)} tables, {len(rep.figures)} plots -> {out / 'summary.md'}, {out / 'report.html'}")
    return 0
