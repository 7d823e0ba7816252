"""Seeded transforms that scale a service trace up: more services, a longer span.

They act on the pair (services, demand) of harness/services/trace.py, not on a pods table as
harness/transforms.py's do, hence a module of their own. A service's demand is a
piecewise-constant function of time: 0 before its first row, each row's value until its
next row. The trace's span is its latest `start_s`; the span [0, span) is the part a
transform shifts or repeats, and the value in effect at the span (the importers' final
"idle" row) is what follows it.

- `Copies(n, seed)`: each service becomes `n` services `name-1` ... `name-n`; copy 1 is the
  original, each other copy is shifted in time by a seeded whole number of seconds drawn
  uniformly in [0, span), circularly (what leaves the span's end re-enters at its start),
  so the copies peak at different times over the same span.
- `Repeat(k, jitter, seed)`: the span played `k` times in a row; every window of the second
  and later passes is multiplied by lognormal noise of mean 1 and spread `jitter`
  (exp(jitter z - jitter^2 / 2), z standard normal), so the repeats are alike but not equal.

Both are deterministic per seed; each service draws from its own stream (seed and name), so
adding a service leaves the others' offsets and noise unchanged.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.errors import ConfigError
from harness.services.trace import MAX_DEMAND_ROWS, demand_from_columns


def _rng(seed: int, *key: str | int) -> np.random.Generator:
    words = [seed & 0xFFFFFFFF, seed >> 32, *(zlib.crc32(str(k).encode()) for k in key)]
    return np.random.default_rng(np.random.SeedSequence(words))


def _by_service(demand: pa.Table) -> tuple[float, list[tuple[str, np.ndarray, np.ndarray]]]:
    """The span, and each service's (name, starts, values), a row at 0 (value 0) added where
    the service's first row is later."""
    name = demand.column("service").to_numpy(zero_copy_only=False)
    start = demand.column("start_s").to_numpy()
    value = demand.column("demand").to_numpy()
    span = float(start.max())
    order = np.lexsort((start, name))
    name, start, value = name[order], start[order], value[order]
    cuts = np.flatnonzero(name[1:] != name[:-1]) + 1
    groups = []
    for s, t, v in zip(np.split(name, cuts), np.split(start, cuts), np.split(value, cuts), strict=True):
        if t[0] > 0:
            t, v = np.r_[0.0, t], np.r_[0.0, v]
        groups.append((str(s[0]), t, v))
    return span, groups


def _at(starts: np.ndarray, values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The piecewise-constant function's value at times `t` (starts begin at 0)."""
    return values[np.searchsorted(starts, t, side="right") - 1]


def _table(rows: list[tuple[str, np.ndarray, np.ndarray]]) -> pa.Table:
    lengths = [len(t) for _, t, _ in rows]
    return demand_from_columns({
        "service": pa.array(np.repeat(np.array([n for n, _, _ in rows], dtype=object), lengths), pa.string()),
        "start_s": np.concatenate([t for _, t, _ in rows]),
        "demand": np.concatenate([v for _, _, v in rows]),
    })


def _refuse_rows_beyond(rows: int, flag: str, factor: int) -> None:
    """A factor that would make more demand rows than a services trace may hold is refused
    before any row is made."""
    if rows > MAX_DEMAND_ROWS:
        raise ConfigError(flag, f"{factor:,} would make about {rows:,} demand rows, more than {MAX_DEMAND_ROWS:,}")


class Copies:
    """`n` time-shifted copies of every service (see the module docstring)."""

    def __init__(self, n: int, seed: int = 0):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError("--copies", f"must be an integer >= 1, got {n!r}")
        self.n, self.seed = n, int(seed)

    @property
    def changes(self) -> bool:
        return self.n > 1

    def __call__(self, services: pa.Table, demand: pa.Table) -> tuple[pa.Table, pa.Table]:
        if not self.changes:
            return services, demand
        _refuse_rows_beyond(demand.num_rows * self.n, "--copies", self.n)
        span, groups = _by_service(demand)
        rows = []
        for name, t, v in groups:
            periodic = t < span
            offsets = _rng(self.seed, "copies", name).integers(0, max(int(span), 1), self.n - 1)
            rows.append((f"{name}-1", t, v))
            for i, d in enumerate(offsets, start=2):
                new = np.unique(np.r_[0.0, (t[periodic] + d) % span]) if span > 0 else t
                shifted = _at(t, v, (new - d) % span) if span > 0 else v
                tail = t[~periodic]  # the row at the span, if any, keeps its value
                rows.append((f"{name}-{i}", np.r_[new, tail], np.r_[shifted, v[~periodic]]))
        copies = services.take(pa.array(np.repeat(np.arange(services.num_rows), self.n)))
        suffix = pa.array(np.tile(np.arange(1, self.n + 1), services.num_rows).astype(str))
        new_names = pc.binary_join_element_wise(copies.column("service"), suffix, "-")
        copies = copies.set_column(copies.schema.get_field_index("service"), copies.schema.field("service"),
                                   new_names)
        return copies, _table(rows)


class Repeat:
    """The span played `k` times, the repeats with multiplicative noise (module docstring)."""

    def __init__(self, k: int, jitter: float = 0.0, seed: int = 0):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError("--repeat", f"must be an integer >= 1, got {k!r}")
        if not (isinstance(jitter, (int, float)) and np.isfinite(jitter) and 0 <= jitter <= 1):
            raise ConfigError("--jitter", f"must be a number in [0, 1] (spread of the noise), got {jitter!r}")
        self.k, self.jitter, self.seed = k, float(jitter), int(seed)

    @property
    def changes(self) -> bool:
        return self.k > 1

    def __call__(self, services: pa.Table, demand: pa.Table) -> tuple[pa.Table, pa.Table]:
        if not self.changes:
            return services, demand
        _refuse_rows_beyond(demand.num_rows * self.k, "--repeat", self.k)
        span, groups = _by_service(demand)
        rows = []
        for name, t, v in groups:
            periodic = t < span
            tp, vp = t[periodic], v[periodic]
            z = _rng(self.seed, "repeat", name).standard_normal((self.k - 1, len(tp)))
            noise = np.exp(self.jitter * z - self.jitter**2 / 2)
            starts = np.concatenate([tp + j * span for j in range(self.k)] + [t[~periodic] + (self.k - 1) * span])
            values = np.concatenate([vp, *(vp * noise[j] for j in range(self.k - 1)), v[~periodic]])
            rows.append((name, starts, values))
        return services, _table(rows)
