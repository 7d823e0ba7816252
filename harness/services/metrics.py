"""What a run's services got: demand served and not, time to capacity, cold starts and warm
replicas left idle, as exact integrals of the piecewise-constant state (demand changes at its
window starts, which are events of the simulation; readiness changes at events).

Per service, at any instant: ready capacity = ready replicas x capacity_per_replica;
  unserved rate     = max(0, demand - ready capacity)                (demand units per second)
  warm idle GPUs    = max(0, ready replicas - demand / capacity) x GPUs per replica
                      (ready capacity above demand, in replicas; a share or partition counts
                      its fraction of a GPU)
A time-to-capacity episode runs from demand rising above ready capacity until ready capacity
covers it again; one still open at the horizon counts as lasting to the horizon (and is
counted among `capacity_episodes_open`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
import polars as pl

from harness.metrics import add_rows_in_turn

if TYPE_CHECKING:
    from harness.workload import Services


class ServiceState(Protocol):
    """What the accounts read of the services' replicas (harness/services/engine.py's
    `ReplicaSets`, which builds the accounts and so is named here by what they read)."""

    svc: Services
    demand: np.ndarray  # each service's demand now
    ready: np.ndarray  # its ready replicas
    replicas: np.ndarray  # its created replicas

QUANTILES = {"p50": 0.5, "p99": 0.99}


class ServiceAccounting:
    """Integrates each service's demand, unserved demand and warm idle accelerators, and keeps
    its time-to-capacity episodes, cold starts, replicas created and deleted, and a timeline."""

    def __init__(self, replicas: ServiceState):
        self.rs = replicas
        n = replicas.svc.n
        self.demand_units = np.zeros(n)
        self.unserved_units = np.zeros(n)
        self.idle_gpu_s = np.zeros(n)
        self.short_since = np.full(n, np.nan)  # the open episode's start (nan: none open)
        self.episode_service: list[int] = []
        self.episode_s: list[float] = []
        self.cold_starts = np.zeros(n, np.int64)
        self.created = np.zeros(n, np.int64)
        self.deleted = np.zeros(n, np.int64)
        self.samples: list[tuple[np.ndarray, ...]] = []
        self.open_at_horizon = np.zeros(n, bool)  # episodes the horizon cut (`finish`)

    def _rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Demand, ready capacity, unserved demand and warm idle GPUs per service, now."""
        rs, svc = self.rs, self.rs.svc
        demand = rs.demand
        capacity = rs.ready * svc.capacity
        unserved = np.maximum(demand - capacity, 0.0)
        idle = np.maximum(rs.ready - demand / svc.capacity, 0.0) * svc.gpus_per_replica
        return demand, capacity, unserved, idle

    def _episodes(self, since: float, short: np.ndarray) -> None:
        """The state that holds from `since` on is short of capacity where `short`: episodes
        open and close at `since`."""
        opened = short & np.isnan(self.short_since)
        closed = ~short & ~np.isnan(self.short_since)
        if closed.any():
            self._close(closed, since)
        self.short_since[opened] = since

    def _close(self, which: np.ndarray, t: float) -> None:
        for s in np.flatnonzero(which).tolist():
            self.episode_service.append(s)
            self.episode_s.append(t - float(self.short_since[s]))
        self.short_since[which] = np.nan

    def advance(self, last: float, dt) -> None:
        """The state held since `last` over dt seconds (or consecutive steps, an array of dt)."""
        demand, capacity, unserved, idle = self._rates()
        self._episodes(last, demand > capacity)
        if isinstance(dt, np.ndarray):
            self.demand_units = add_rows_in_turn(self.demand_units, np.multiply.outer(demand, dt))
            self.unserved_units = add_rows_in_turn(self.unserved_units, np.multiply.outer(unserved, dt))
            self.idle_gpu_s = add_rows_in_turn(self.idle_gpu_s, np.multiply.outer(idle, dt))
        else:
            self.demand_units += demand * dt
            self.unserved_units += unserved * dt
            self.idle_gpu_s += idle * dt

    def sample(self, times: np.ndarray) -> None:
        """Timeline samples at `times`, all of the state now."""
        rs = self.rs
        demand, capacity, _, _ = self._rates()
        n, k = rs.svc.n, len(times)
        self.samples.append((np.repeat(times, n), np.tile(np.arange(n), k), np.tile(demand, k),
                             np.tile(capacity, k), np.tile(rs.ready, k), np.tile(rs.replicas, k)))

    def finish(self, horizon: float) -> None:
        """Episodes still open last until the horizon."""
        self.open_at_horizon = ~np.isnan(self.short_since)
        self._close(self.open_at_horizon, horizon)

    # ---- outputs ------------------------------------------------------------------------
    def frame(self) -> pl.DataFrame:
        """One row per service (services.parquet)."""
        svc = self.rs.svc
        episodes = pl.DataFrame({"s": self.episode_service, "d": self.episode_s},
                                schema={"s": pl.Int64, "d": pl.Float64})
        rows = []
        for s in range(svc.n):
            rows.append({"service": str(svc.name[s]),
                         **self._summary(slice(s, s + 1), episodes.filter(pl.col("s") == s)["d"])})
        return pl.DataFrame(rows)

    def totals(self) -> dict:
        """The run's totals over every service (metrics.parquet's service columns)."""
        return self._summary(slice(None), pl.Series(self.episode_s, dtype=pl.Float64))

    def _summary(self, which: slice, episodes: pl.Series) -> dict:
        demand = float(self.demand_units[which].sum())
        unserved = float(self.unserved_units[which].sum())
        return {
            "demand_units": demand,
            "demand_unserved_units": unserved,
            "demand_unserved_share": unserved / demand if demand > 0 else 0.0,
            **{f"time_to_capacity_{k}_s": cast(float, episodes.quantile(q, "linear")) if len(episodes)
               else float("nan") for k, q in QUANTILES.items()},
            "capacity_episodes": len(episodes),
            "capacity_episodes_open": int(self.open_at_horizon[which].sum()),
            "cold_starts": int(self.cold_starts[which].sum()),
            "warm_idle_accel_hours": float(self.idle_gpu_s[which].sum()) / 3600.0,
            "replicas_created": int(self.created[which].sum()),
            "replicas_deleted": int(self.deleted[which].sum()),
        }

    def timeline(self) -> pl.DataFrame:
        """Per service per timeline sample: demand and ready capacity (services_timeline.parquet)."""
        names = self.rs.svc.name
        cols = [np.concatenate(c) for c in zip(*self.samples, strict=True)] if self.samples else [np.zeros(0)] * 6
        t, s, demand, capacity, ready, replicas = cols
        return pl.DataFrame({"t_s": t.astype(np.float64), "service": names[s.astype(np.int64)].astype(str),
                             "demand": demand.astype(np.float64), "ready_capacity": capacity.astype(np.float64),
                             "ready_replicas": ready.astype(np.int64), "replicas": replicas.astype(np.int64)})
