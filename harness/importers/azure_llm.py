"""Azure LLM inference trace 2023 (Microsoft AzurePublicDataset; ISCA'24 Splitwise) to services.

Each file is one service (its name: the file name after its last `_`, so
`AzureLLMInferenceTrace_code.csv` is `code`), one row per request: `TIMESTAMP` (wall clock,
100 ns digits, `2023-11-16 18:17:03.9799600`), `ContextTokens` (the prompt), `GeneratedTokens`
(the answer). Requests become demand per service in windows of `window_s` seconds: the
tokens of the requests arriving in a window, divided by its length.

The replica model (what one replica is and what it serves). A replica is one tensor-parallel
instance of a 70B-class model (Llama-2-70B, FP8) on 4 NVLink-connected H100 80GB GPUs.
Serving a request has two phases (Splitwise, Patel et al., ISCA'24, section III): the prompt
phase processes the context tokens at once and is compute-bound; the token phase generates
one token at a time and is memory-bound, far slower per token. So a replica costs a request
`context / prefill_tokens_per_s + generated / decode_tokens_per_s` seconds of its time, and
its two rates come from NVIDIA's published TensorRT-LLM figures for LLaMA 70B on H100 FP8,
tensor parallel 4, batch 64 (TensorRT-LLM v0.5.0, docs/source/performance.md, "High
Throughput", H100 GPUs (FP8)): 2,616 output tokens/s at 128 input / 2,048 output tokens and
843 at 2,048 / 128. Fitting the two-phase cost to those two rows gives 19,800 prompt and
2,640 generated tokens/s per replica, rounded to the defaults below, 20,000 and 2,600 (which
give back 2,580 and 844). The fit's blind spot: it predicts 2,300 for the table's 128/128 and
2,048/2,048 rows, measured 3,317 and 1,583, as decoding slows with the context's length. A
request's demand is its cost in generated-token equivalents, `generated + context x
decode/prefill`, so the demand unit is tokens/s (generated-token equivalents) and
`capacity_per_replica = decode_tokens_per_s`: demand / capacity is the number of replicas
the window keeps busy. The cold start (image pull + loading ~70 GB of weights) is an
assumption, 120 s by default. Every figure is a parameter.

Time origin: the earliest request of all the files, floored to the whole second. Windows run
from 0 to the window of the last request, every window a row (demand 0 where no request
arrived), and one more row at the end with demand 0: the services fall idle after the trace.
Every source row is accounted for: read, kept, dropped by reason (no timestamp, a missing
token count, no tokens at all); a value that is not a datetime or not a whole number of
tokens >= 0 is refused with its file, column and row.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.errors import ConfigError, TraceError
from harness.importers.common import Tally, float_np, read_csv
from harness.services.trace import (
    MAX_DEMAND_ROWS,
    MAX_REPLICAS,
    ServicesMeta,
    demand_from_columns,
    services_from_columns,
)
from harness.trace import MAX_GPUS_PER_POD, MAX_TIME_S

COLUMNS = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
LICENCE = "CC-BY-4.0"
SOURCE = "Microsoft AzurePublicDataset, Azure LLM inference trace 2023"
DEMAND_UNIT = "tokens/s (generated-token equivalents: a prompt token counts decode/prefill of one)"
#: Finer than the fastest controller cadence (HPA syncs every 15 s, KEDA polls every 30 s), so
#: an autoscaler reads a rate at most one window old; coarse enough that a window averages
#: about 24 (code) and 54 (conv) requests of the 2023 trace rather than a handful.
WINDOW_S = 10.0


#: A replica's serving rates are bounded so that every derived rate, demand and replica count
#: stays a finite number (1e-300 tokens/s made every window's demand infinite)
MIN_TOKENS_PER_S, MAX_TOKENS_PER_S = 1e-3, 1e9


@dataclass(frozen=True)
class ReplicaModel:
    """One replica: its shape and the tokens per second it serves (see the module docstring)."""

    prefill_tokens_per_s: float = 20_000.0
    decode_tokens_per_s: float = 2_600.0
    gpus: int = 4
    gpu_model: str = "H100"
    cpu_milli: int = 48_000  # 12 cores per GPU, as the synthetic training pods
    memory_mib: int = 400_000  # 100,000 MiB per GPU, likewise
    cold_start_s: float = 120.0

    def __post_init__(self):
        for name, flag in (("prefill_tokens_per_s", "--prefill-tps"), ("decode_tokens_per_s", "--decode-tps")):
            value = getattr(self, name)
            if not (math.isfinite(value) and MIN_TOKENS_PER_S <= value <= MAX_TOKENS_PER_S):
                raise ConfigError(f"{name} ({flag})", f"must be tokens/s in [{MIN_TOKENS_PER_S:g}, "
                                                      f"{MAX_TOKENS_PER_S:g}], got {value!r}")
        if not (math.isfinite(self.cold_start_s) and 0 <= self.cold_start_s <= MAX_TIME_S):
            raise ConfigError("cold_start_s (--cold-start-s)",
                              f"must be finite seconds >= 0, got {self.cold_start_s!r}")
        if not 1 <= self.gpus <= MAX_GPUS_PER_POD:
            raise ConfigError("gpus (--gpus)", f"must be an integer in [1, {MAX_GPUS_PER_POD}], got {self.gpus!r}")

    def demand(self, context: np.ndarray, generated: np.ndarray) -> np.ndarray:
        """Each request's cost in generated-token equivalents."""
        return generated + context * (self.decode_tokens_per_s / self.prefill_tokens_per_s)


@dataclass
class ServiceImport:
    """The services and demand tables of an import, and what happened to each source row."""

    services: pa.Table
    demand: pa.Table
    meta: ServicesMeta
    rows_read: int
    dropped: Counter = field(default_factory=Counter)
    #: per service: requests kept, context and generated tokens, peak window demand
    stats: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def rows_kept(self) -> int:
        return self.rows_read - sum(self.dropped.values())


def service_name(path: str | os.PathLike) -> str:
    """`AzureLLMInferenceTrace_code.csv` -> `code`."""
    return Path(path).stem.rsplit("_", 1)[-1].lower()


def _timestamps_ns(col: pa.ChunkedArray, file: str) -> np.ndarray:
    """`YYYY-MM-DD HH:MM:SS[.fffffff]` to int64 ns (nulls as the int64 minimum)."""
    col = pc.utf8_trim_whitespace(col)
    try:
        ts = col.cast(pa.timestamp("ns"))
    except pa.ArrowInvalid:
        lo, hi = 0, len(col)  # bisect for the first value that does not parse
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                col.slice(lo, mid - lo).cast(pa.timestamp("ns"))
                lo = mid
            except pa.ArrowInvalid:
                hi = mid
        try:  # parses to the second: a date outside what nanoseconds since 1970 hold
            pc.replace_substring_regex(col.slice(lo, 1), r"\.\d*$", "").cast(pa.timestamp("s"))
            rule = "a datetime outside 1677-09-22 .. 2262-04-11 (nanoseconds since 1970 in int64)"
        except pa.ArrowInvalid:
            rule = "not a datetime YYYY-MM-DD HH:MM:SS[.fraction]"
        raise TraceError(file, f"{rule}: {col[lo].as_py()!r}", column="TIMESTAMP", row=lo) from None
    return ts.cast(pa.int64()).fill_null(np.iinfo(np.int64).min).to_numpy()


def _date(ns: int) -> str:
    return str(np.datetime64(ns, "ns").astype("datetime64[s]")).replace("T", " ")


def _tokens(col: pa.ChunkedArray, file: str, column: str) -> np.ndarray:
    values = float_np(col, file, column, 0)
    bad = ~np.isnan(values) & ((values < 0) | (values != np.floor(values)) | ~np.isfinite(values))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceError(file, f"must be a whole number of tokens >= 0 (got {values[i]!r})", column=column, row=i)
    return values


def read_azure_llm(paths: list[str], *, window_s: float = WINDOW_S, model: ReplicaModel = ReplicaModel(),
                   min_replicas: int = 1, max_replicas: int | None = None) -> ServiceImport:
    """One service per file; demand in windows of `window_s` seconds from the first request.

    `max_replicas` None: twice the replicas the busiest window of the service keeps busy (at
    least 1 and min_replicas), room for an autoscaler targeting below full utilisation.
    """
    if not (math.isfinite(window_s) and 0 < window_s <= MAX_TIME_S):
        raise ConfigError("--window-s", f"must be a number of seconds > 0, got {window_s!r}")
    if not 0 <= min_replicas <= MAX_REPLICAS:
        raise ConfigError("--min-replicas", f"must be an integer in [0, {MAX_REPLICAS:,}], got {min_replicas!r}")
    if max_replicas is not None and not max(1, min_replicas) <= max_replicas <= MAX_REPLICAS:
        raise ConfigError("--max-replicas", f"must be an integer in [max(1, --min-replicas), {MAX_REPLICAS:,}], "
                          f"got {max_replicas!r}")
    names = [service_name(p) for p in paths]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError("SOURCE", f"two files name service '{dup}' (the part of the file name after its last _)")
    tally = Tally()
    times, costs, stats = [], [], {}
    for path, name in zip(paths, names, strict=True):
        file = str(path)
        table = read_csv(path, COLUMNS)
        tally.rows_read += table.num_rows
        t = _timestamps_ns(table.column("TIMESTAMP"), file)
        context = _tokens(table.column("ContextTokens"), file, "ContextTokens")
        generated = _tokens(table.column("GeneratedTokens"), file, "GeneratedTokens")
        keep = np.ones(table.num_rows, bool)
        keep = tally.drop(keep, t == np.iinfo(np.int64).min, "no TIMESTAMP")
        keep = tally.drop(keep, np.isnan(context) | np.isnan(generated), "a token count is missing")
        keep = tally.drop(keep, (context == 0) & (generated == 0), "no tokens (context and generated both 0)")
        times.append(t[keep])
        costs.append(model.demand(context[keep], generated[keep]))
        stats[name] = {"requests": int(keep.sum()), "context": float(context[keep].sum()),
                       "generated": float(generated[keep].sum())}
    if not any(len(t) for t in times):
        raise TraceError(", ".join(map(str, paths)), "no requests left to import")
    origin_ns = min(int(t.min()) for t in times if len(t)) // 10**9 * 10**9
    windows = [((t - origin_ns) / 1e9 // window_s).astype(np.int64) for t in times]
    n = int(max(int(w.max()) for w in windows if len(w))) + 1
    if n * len(names) > MAX_DEMAND_ROWS:
        span = n * window_s
        raise TraceError(", ".join(map(str, paths)), f"the requests span {span / 86400:,.0f} days (first "
                         f"{_date(origin_ns)}, last {_date(max(int(t.max()) for t in times if len(t)))}): "
                         f"{n:,} windows of {window_s:g} s for {len(names)} services would be "
                         f"{n * len(names):,} demand rows, more than {MAX_DEMAND_ROWS:,}: a wider --window-s, "
                         "or drop the rows dated far from the rest", column="TIMESTAMP")
    per_window = [np.bincount(w, weights=c, minlength=n) / window_s for w, c in zip(windows, costs, strict=True)]
    starts = np.arange(n + 1) * window_s
    capacity = model.decode_tokens_per_s
    peaks = np.array([d.max() for d in per_window])
    busiest = np.ceil(peaks / capacity)
    if max_replicas is None and (busiest > MAX_REPLICAS // 2).any():
        i = int(np.argmax(busiest))
        raise ConfigError("decode_tokens_per_s (--decode-tps)",
                          f"at {capacity:g} tokens/s a replica, service {names[i]}'s busiest window "
                          f"({peaks[i]:,.0f} tokens/s) needs {busiest[i]:,.0f} replicas, and max_replicas "
                          f"(twice that) may be at most {MAX_REPLICAS:,}: raise the rate or give --max-replicas")
    busiest = busiest.astype(np.int64)
    top = np.maximum(np.maximum(2 * busiest, 1), min_replicas) if max_replicas is None else \
        np.full(len(names), max_replicas)
    for name, peak in zip(names, peaks, strict=True):
        stats[name]["peak"] = float(peak)
    k = len(names)
    services = services_from_columns({
        "service": names, "cpu_milli": [model.cpu_milli] * k, "memory_mib": [model.memory_mib] * k,
        "gpu_count": [model.gpus] * k, "gpu_milli": [1000] * k,
        "gpu_models": [[model.gpu_model]] * k, "gpus_same_nvlink": [model.gpus > 1] * k,
        "capacity_per_replica": [capacity] * k, "cold_start_s": [model.cold_start_s] * k,
        "min_replicas": [min_replicas] * k, "max_replicas": top.tolist(),
    })
    demand = demand_from_columns({
        "service": pa.array(np.repeat(np.array(names, dtype=object), n + 1), pa.string()),
        "start_s": np.tile(starts, k),
        "demand": np.concatenate([np.r_[d, 0.0] for d in per_window]),
    })
    origin = np.datetime64(origin_ns, "ns").astype("datetime64[s]")
    meta = ServicesMeta(
        source=f"{SOURCE} ({', '.join(Path(p).name for p in paths)})", licence=LICENCE,
        time_origin=f"{str(origin).replace('T', ' ')} (the first request, floored to the second)",
        demand_unit=DEMAND_UNIT,
        description=(f"one service per file, demand in {window_s:g} s windows; replica: {model.gpus} x "
                     f"{model.gpu_model}, prefill {model.prefill_tokens_per_s:g} and decode "
                     f"{model.decode_tokens_per_s:g} tokens/s, cold start {model.cold_start_s:g} s; "
                     "see harness/importers/azure_llm.py"))
    return ServiceImport(services, demand, meta, tally.rows_read, tally.dropped, stats)
