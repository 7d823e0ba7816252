"""How results read: the metric catalogue (label, unit, which way is better, digits) and the
text built from it, so `loopbench replay`, `compare` and `report` say the same thing the same way.

A run's metrics print as a table (metrics as rows, one column per loop), its wall time on a
line of its own (it is not a result: it changes from one machine or run to the next), and one
verdict line per loop against the first, in the form the robustness grid states as ranges
(harness/grid.py), e.g.

    merged saves 75% of idle accelerator hours over separate (7,484 -> 1,866) in one setting
    (scoring kube_default, provider refuses at once); cost -47%, gang start p99 -82%
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from harness import work
from harness.progress import duration
from harness.status import REASON_NAMES

IDLE_CAUSES = ["booting", "unallocated", "gang_wait", "committed"]
LOWER, HIGHER = "lower", "higher"


@dataclass(frozen=True)
class Metric:
    column: str
    label: str
    unit: str = ""
    better: str = ""  # LOWER, HIGHER, or "" when neither is (a description of the run, not a score)
    digits: int = 0  # decimals shown (the CSVs keep 4)
    count: bool = False  # a whole number per run: printed without decimals
    scale: float = 1.0  # shown value = column value x scale (seconds shown as hours)

    @property
    def header(self) -> str:
        """Label, unit and an arrow for the better direction: `cost (USD) ↓`."""
        arrow = {LOWER: " ↓", HIGHER: " ↑"}.get(self.better, "")
        return self.label + (f" ({self.unit})" if self.unit else "") + arrow


METRICS = [
    Metric("idle_accel_hours", "idle accelerator hours", "h", LOWER),
    Metric("idle_accel_usd", "idle accelerator cost", "USD", LOWER),
    *[Metric(f"idle_accel_hours_{c}", f"idle: {c.replace('_', ' ')}", "h", LOWER) for c in IDLE_CAUSES],
    # with a buffer's placeholders (harness/services/buffers.py): GPUs they hold, no work
    Metric("idle_accel_hours_buffer", "idle: buffer placeholders", "h", LOWER),
    Metric("placeholder_preemptions", "placeholder preemptions", "", "", 1, True),
    Metric("billed_accel_hours", "billed accelerator hours", "h", LOWER),
    Metric("used_accel_hours", "used accelerator hours", "h"),
    Metric("accel_utilization", "accelerator utilisation", "", HIGHER, 3),
    Metric("frag_ratio", "fragmentation ratio", "", LOWER, 3),
    Metric("frag_amount", "fragmentation amount", "", LOWER, 3),
    Metric("gang_latency_p50_s", "gang start p50", "s", LOWER),
    Metric("gang_latency_p90_s", "gang start p90", "s", LOWER),
    Metric("gang_latency_p99_s", "gang start p99", "s", LOWER),
    Metric("gang_latency_max_s", "gang start max", "s", LOWER),
    Metric("gangs_never_started", "gangs never started", "", LOWER, 1, True),
    # the work done by the horizon: loops compared must do the same (harness/work.py)
    Metric("pods_done", "pods done", "", "", 1, True),
    Metric("jobs_done", "jobs done", "", "", 1, True),
    Metric("pods_not_admitted", "pods never admitted", "", LOWER, 1, True),
    Metric("jobs_not_admitted", "jobs never admitted", "", LOWER, 1, True),
    # a trace with services (harness/services/metrics.py)
    Metric("demand_unserved_share", "demand not served (share)", "", LOWER, 4),
    Metric("time_to_capacity_p50_s", "time to capacity p50", "s", LOWER),
    Metric("time_to_capacity_p99_s", "time to capacity p99", "s", LOWER),
    Metric("cold_starts", "cold starts", "", LOWER, 1, True),
    Metric("warm_idle_accel_hours", "warm idle accelerator hours", "h", LOWER),
    Metric("cost_usd", "cost", "USD", LOWER),
    *[Metric(f"pending_s_{r}", f"pending: {r.replace('_', ' ')}", "pod-h", LOWER, 1, scale=1 / 3600)
      for r in REASON_NAMES],
    Metric("nodes_provisioned", "nodes provisioned", "", "", 1, True),
    Metric("nodes_never_used", "nodes never used", "", LOWER, 1, True),
    Metric("job_completion_p50_s", "job completion p50", "s", LOWER),
    Metric("preemptions", "preemptions", "", LOWER, 1, True),
    Metric("preempted_accel_hours_lost", "work lost to preemption", "h", LOWER),
]
BY_COLUMN = {m.column: m for m in METRICS}
#: Per-GPU-model columns (harness/metrics.py: idle_by_model): the prefix, then the model's name.
BY_MODEL = {"idle_accel_hours_model_": ("idle", "h"), "idle_accel_usd_model_": ("idle cost", "USD")}
#: Stands, in a list of columns, for every per-model column present (hours, then USD, by model).
MODELS = "*by_model"
#: What `loopbench replay` and `compare` print, in this order.
HEADLINE = ["idle_accel_hours", *[f"idle_accel_hours_{c}" for c in IDLE_CAUSES], "idle_accel_hours_buffer",
            "idle_accel_usd", MODELS,
            "accel_utilization", "frag_ratio", "gang_latency_p50_s", "gang_latency_p99_s", "gangs_never_started",
            "pods_done", "jobs_done", "pods_not_admitted", "jobs_not_admitted",
            "demand_unserved_share", "time_to_capacity_p99_s", "cold_starts", "warm_idle_accel_hours",
            "cost_usd", "nodes_provisioned", "nodes_never_used"]
#: The verdict's metrics; the first also shows its two values. Gangs never started join when
#: either side has some: a latency percentile counts only the gangs that started.
VERDICT = ["idle_accel_hours", "cost_usd", "gang_latency_p99_s"]
NEVER_STARTED = "gangs_never_started"
UNSERVED = "demand_unserved_share"
MISSING = "–"
#: A count below this changes as two values (`1 -> 2`): a share of a handful says more than it means.
FEW = 10
#: Seconds from here on read as hours: five-digit seconds are hard to picture.
HOURS_FROM_S = 10_000
#: How the provider answers a request it cannot fill (`cluster.shortage`), in words: its
#: value `error` reads as if the run had failed.
PROVIDER = {"error": "refuses at once", "silent": "fails silently"}


def metric(column: str) -> Metric:
    """The catalogue's entry of a column, per-GPU-model columns included (`idle cost: H100`)."""
    if column in BY_COLUMN:
        return BY_COLUMN[column]
    for prefix, (label, unit) in BY_MODEL.items():
        if column.startswith(prefix):
            return Metric(column, f"{label}: {column[len(prefix):]}", unit, LOWER)
    raise KeyError(column)


def expand(columns: list[str], present) -> list[str]:
    """`columns` with MODELS replaced by the per-model columns among `present` (hours, then
    USD, models by name); the others as given."""
    pairs = sorted((i, c) for c in present for i, p in enumerate(BY_MODEL) if c.startswith(p))
    by_model = [c for _, c in pairs]
    return [x for c in columns for x in (by_model if c == MODELS else [c])]


def catalogue(present) -> list[Metric]:
    """The metrics of the columns `present`: the catalogue's order, the per-model ones after
    idle cost."""
    columns = [x for m in METRICS for x in ([m.column, MODELS] if m.column == "idle_accel_usd" else [m.column])]
    return [metric(c) for c in expand(columns, present) if c in present]


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def readable(m: Metric, values) -> Metric:
    """The metric as shown beside these values: seconds as hours (one decimal) when one of
    them reaches five digits; otherwise as catalogued. The CSVs keep seconds."""
    if m.unit != "s" or not any(not _missing(v) and abs(v * m.scale) >= HOURS_FROM_S for v in values):
        return m
    return Metric(m.column, m.label, "h", m.better, 1, m.count, m.scale / 3600)


def provider(shortage) -> str:
    """`cluster.shortage` as the provider's behaviour: `refuses at once`, `fails silently`."""
    return PROVIDER.get(str(shortage), str(shortage))


def number(x, metric: Metric) -> str:
    """One value as shown: thousands separators, the metric's decimals; a count without them
    (a mean of counts over seeds keeps its decimals)."""
    if _missing(x):
        return MISSING
    x = x * metric.scale
    return f"{round(x):,}" if metric.count and x == round(x) else f"{x:,.{metric.digits}f}"


def _change(metric: Metric, base, value) -> str | None:
    """`-75%`, or the two values when the baseline is 0 or both are a few of a count
    (`1 -> 2`, not `+100%`); None when either is missing."""
    if _missing(base) or _missing(value):
        return None
    if base == 0 or (metric.count and max(abs(base), abs(value)) < FEW):
        return f"{number(base, metric)} -> {number(value, metric)}"
    pct = (value - base) / abs(base) * 100
    if round(pct, 1) == 0:
        return "±0%"
    return f"{pct:+.0f}%" if abs(pct) >= 1 else f"{pct:+.1f}%"


def saving(base, value) -> float | None:
    """How much of the baseline's idle accelerator hours `value` saves, in % (negative: burns
    more); None when either is missing or the baseline is 0."""
    if _missing(base) or _missing(value) or base == 0:
        return None
    return (base - value) / abs(base) * 100


def percent(pct: float) -> str:
    """A share as the verdict says it: 75%, 0.4%, ±0%."""
    if round(pct, 1) == 0:
        return "±0%"
    return f"{pct:.0f}%" if abs(pct) >= 1 else f"{pct:.1f}%"


def saves(name: str, base_name: str, base, value) -> str:
    """`merged saves 75% of idle accelerator hours over separate (7,484 -> 1,866)`, or that it
    burns more, or both values when the share is undefined."""
    m = BY_COLUMN[VERDICT[0]]
    pct = saving(base, value)
    if pct is None:
        if _missing(base) or _missing(value):
            return f"{name} vs {base_name}: {m.label} n/a"
        return f"{name} vs {base_name}: {m.label} {number(base, m)} -> {number(value, m)}"
    values = f"({number(base, m)} -> {number(value, m)})"
    if pct < 0 and round(pct, 1) != 0:
        return f"{name} burns {percent(-pct)} more {m.label} than {base_name} {values}"
    return f"{name} saves {percent(pct)} of {m.label} over {base_name} {values}"


def verdict(name: str, base_name: str, values: dict, base: dict, setting: str = "", unequal: str = "") -> str:
    """The ranges form of harness/grid.py for one setting (its scoring and provider, when
    known): `name saves P% of idle accelerator hours over base_name (b -> v) in one setting
    (...); <metric> <change>, ...` over the rest of VERDICT (values by column). `unequal`, the
    note of runs that did not do the same work (harness/work.py), comes first: a saving on
    less work is no saving."""
    columns = list(VERDICT[1:])
    if any((d.get(NEVER_STARTED) or 0) > 0 for d in (values, base)):  # None or NaN: not > 0
        columns.append(NEVER_STARTED)
    if not all(_missing(d.get(UNSERVED)) for d in (values, base)):  # a run with services
        columns.append(UNSERVED)
    parts = []
    for c in columns:
        m = BY_COLUMN[c]
        change = _change(m, base.get(c), values.get(c))
        parts.append(f"{m.label} {change if change is not None else 'n/a'}")
    where = f" in one setting ({setting})" if setting else ""
    first = f"{name} vs {base_name}: {unequal}. " if unequal else ""
    return f"{first}{saves(name, base_name, base.get(VERDICT[0]), values.get(VERDICT[0]))}{where}; {', '.join(parts)}"


def setting(row: dict) -> str:
    """`scoring kube_default, provider refuses at once`: the grid's dimensions a run row names."""
    named = [("scoring", row.get("policy")), ("provider", row.get("shortage"))]
    return ", ".join(f"{what} {provider(v) if what == 'provider' else v}" for what, v in named if v is not None)


def what_ran(metrics: pl.DataFrame) -> str:
    """`trace traces/default.parquet (3,405 pods, 20 gangs), cluster default, seed 0`: what the
    runs replayed, each value once (a column whose runs differ lists its values), and the pods
    refused on arrival, if any; nothing for rows that name no trace."""
    def values(column: str) -> list:
        return list(dict.fromkeys(metrics[column].to_list())) if column in metrics.columns else []

    if not values("trace"):
        return ""
    parts = []
    for column in ("trace", "cluster", "seed"):
        shown = values(column)
        if not shown:
            continue
        part = f"{column} {', '.join(map(str, shown))}"
        if column == "trace":
            sizes = [f"{v[0]:,} {what}" for what in ("pods", "gangs") if len(v := values(what)) == 1 and v[0]]
            if sizes and len(refused := values("pods_refused")) == 1 and refused[0]:  # said nowhere else
                sizes[0] += f", {refused[0]:,} of them refused on arrival: no node type of the cluster can hold them"
            part += f" ({', '.join(sizes)})" if sizes else ""
        parts.append(part)
    return ", ".join(parts)


def _rows(metrics: pl.DataFrame, columns: list[str]) -> list[list[str]]:
    """Header and one row per metric (label, unit, better), one column per loop (a row of `metrics`);
    with several loops whose runs count their pods done, first whether each did the first's work."""
    runs = metrics.to_dicts()
    names = [str(r.get("loop", i + 1)) for i, r in enumerate(runs)]
    rows = [["metric", "unit", "better", *names]]
    if len(runs) > 1 and "pods_done" in metrics.columns:
        unequal = _unequal(metrics)
        rows.append(["equal work", "", "", "reference",
                     *["NO" if name in unequal else "yes" for name in names[1:]]])
    for c in expand(columns, metrics.columns):
        if c in metrics.columns:
            m = readable(metric(c), [r[c] for r in runs])
            rows.append([m.label, m.unit, m.better, *[number(r[c], m) for r in runs]])
    return rows


def table(metrics: pl.DataFrame, columns: list[str] = HEADLINE) -> str:
    """The metrics as aligned text: names, units and direction left, numbers right."""
    rows = _rows(metrics, columns)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in [rows[0], ["-" * w for w in widths], *rows[1:]]:
        cells = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def markdown_table(metrics: pl.DataFrame, columns: list[str] = HEADLINE) -> str:
    """The same table in Markdown."""
    head, *body = _rows(metrics, columns)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def wall_line(metrics: pl.DataFrame) -> str:
    """`wall time: 3.2 s`, or one figure per loop."""
    if "wall_s" not in metrics.columns:
        return ""
    runs = metrics.to_dicts()
    if len(runs) == 1:
        return f"wall time: {duration(runs[0]['wall_s'])}"
    return "wall time: " + ", ".join(f"{r.get('loop', i + 1)} {duration(r['wall_s'])}" for i, r in enumerate(runs))


def _unequal(metrics: pl.DataFrame) -> dict[str, str]:
    """The work notes of the loops (rows) that did not do the first's work."""
    if "loop" not in metrics.columns:
        return {}
    return work.notes(metrics, "loop", str(metrics["loop"][0]))


def verdicts(metrics: pl.DataFrame) -> list[str]:
    """One verdict line per loop (row) after the first, against the first, in the setting of
    the first; one that did not do the first's work says so first."""
    runs = metrics.to_dicts()
    unequal = _unequal(metrics)
    return [verdict(str(r.get("loop")), str(runs[0].get("loop")), r, runs[0], setting(runs[0]),
                    unequal.get(str(r.get("loop")), "")) for r in runs[1:]]


def readout(metrics: pl.DataFrame, markdown: bool = False) -> str:
    """What replay and compare print: what ran, the table, the wall time, the verdicts (one
    paragraph each in Markdown)."""
    ran = [line for line in [what_ran(metrics)] if line]
    if markdown:
        return "\n\n".join([*ran, markdown_table(metrics), wall_line(metrics), *verdicts(metrics)]) + "\n"
    return "\n".join([*ran, table(metrics), "", wall_line(metrics), *verdicts(metrics)])
