"""The FGD paper's openb packing experiment (ATC'23, section 6; procedure in shared/FGD.md).

A static cluster (an openb node list) receives the pod list once, in a seeded shuffled
order, inflated with pods drawn with replacement until the GPU requests reach
`target_ratio` x the cluster's GPU milli; each pod is tried once, nothing departs. After
every pod the curve records arrived load, allocation and fragmentation, so the policies can
be compared at the same arrived load (the paper's tables: allocation at 130% arrived).

`OpenbPacking` is a Hydra runner (`conf/experiment/openb_packing.yaml`); `report_main`
turns a sweep of its run directories into the published tables and plots.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.compute as pc

from harness.cluster import Cluster
from harness.errors import LoopbenchError
from harness.filters import feasible
from harness.fragmentation import COVERAGE, TargetWorkload, node_fragmentation
from harness.importers.openb import openb_node_slots, read_openb_nodes, read_openb_pods
from harness.output import atomic_dir, atomic_path, start_run, write_parquet, write_text
from harness.provenance import RUN_INFO, provenance, write_report_provenance, write_run_info
from harness.scores import FGD, ScorePlugin, WeightedSum
from harness.settings import check, check_config, instantiate, number
from harness.state import ClusterState
from harness.workload import Workload, compile_workload

#: Arrived load (% of cluster GPU milli) at which the headline numbers are read.
ALLOC_AT_PCT = 130
FRAG_AT_PCT = 90


def _resolve(path) -> Path:
    """A relative path is taken from the working directory, else from the repository root."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    return Path(__file__).resolve().parents[1] / p


def bucket(pct: np.ndarray) -> np.ndarray:
    """The paper's arrived-% bucket: rounded half away from zero (pct is never negative)."""
    return np.floor(np.asarray(pct) + 0.5).astype(np.int64)


def value_at(arrived_pct: np.ndarray, values: np.ndarray, pct: int) -> float:
    """Mean of `values` over the events of bucket `pct`, as the paper's tables read them;
    if no event falls in it, the value after the last event below it (NaN if none)."""
    b = bucket(arrived_pct)
    hit = b == pct
    if hit.any():
        return float(values[hit].mean())
    below = np.flatnonzero(arrived_pct <= pct)
    return float(values[below[-1]]) if len(below) else float("nan")


class OpenbPacking:
    """Runner of one packing run: one policy, one seed, one openb pod list on one node list."""

    SETTINGS = {
        "target_ratio": number("arrived GPU requests as a multiple of the cluster's GPUs, 1.3 in the paper",
                               gt=0, le=10),
        "coverage": number("share of pods the typical pod shapes cover", gt=0, le=1),
    }

    def __init__(self, pods_csv: str | Path, nodes_csv: str | Path, target_ratio: float = 1.3,
                 coverage: float = COVERAGE):
        check(self, "runner", target_ratio=target_ratio, coverage=coverage)
        self.pods_csv, self.nodes_csv = _resolve(pods_csv), _resolve(nodes_csv)
        self.target_ratio, self.coverage = float(target_ratio), float(coverage)
        table = read_openb_pods(self.pods_csv)
        table = table.take(pc.sort_indices(table, [("pod_id", "ascending")]))  # step 1: sort by name
        self.cluster = Cluster(**read_openb_nodes(self.nodes_csv))
        self.slot_of_row = openb_node_slots(self.nodes_csv)
        self.workload: Workload = compile_workload(table, self.cluster)
        w = self.workload
        # typical shapes from the original list; the key holds the allowed models as a set, so
        # gpu_spec strings that only repeat a model (V100M32|V100M32) are one shape
        self.target = TargetWorkload.from_pods(w.cpu, w.gpus, w.milli, w.model_mask, self.coverage)
        self.capacity = 1000 * int(ClusterState(self.cluster).gpu_cap.sum())

    # ---- the procedure ---------------------------------------------------------------
    def sequence(self, rng: np.random.Generator) -> np.ndarray:
        """Steps 2-3: the shuffled original pods, then pods drawn with replacement until the
        next draw would take arrived GPU milli past target_ratio x capacity."""
        w = self.workload
        demand = w.gpu_milli_total
        order = rng.permutation(w.n_pods)
        total, goal = int(demand.sum()), self.target_ratio * self.capacity
        draws = []
        while demand.any() and total <= goal:
            d = rng.integers(0, w.n_pods, size=w.n_pods)
            cum = total + np.cumsum(demand[d])
            over = np.flatnonzero(cum > goal)
            if len(over):
                draws.append(d[:over[0]])
                break
            draws.append(d)
            total = int(cum[-1])
        return np.concatenate([order, *draws])

    def node_rank(self, rng: np.random.Generator) -> np.ndarray:
        """The paper's tie-break: a seeded random order over the node list, per slot."""
        rank = np.empty(len(self.slot_of_row), np.int64)
        rank[self.slot_of_row] = rng.permutation(len(self.slot_of_row))
        return rank

    def pack(self, policy: ScorePlugin, seq: np.ndarray, rank: np.ndarray,
             rng: np.random.Generator) -> tuple[dict, ClusterState]:
        """Steps 4-5: try each pod of `seq` once on the best-scoring feasible node (ties to the
        lowest `rank`), nothing departs; record node, allocation and F after every pod.
        F is kept per node and only the bound node's F_n is recomputed."""
        for plugin in policy.plugins if isinstance(policy, WeightedSum) else [policy]:
            if isinstance(plugin, FGD):
                plugin.target = self.target  # the runner's target workload, from the original list
        w, state = self.workload, ClusterState(self.cluster)
        for n in range(state.n_slots):
            state.add_node(n, ready=True)
        frag = node_fragmentation(state.gpu_free, state.gpu_cap, state.cpu_free, state.model_bit, self.target)
        frag_total = float(frag.sum())
        m = len(seq)
        node_of = np.full(m, -1, np.int32)
        allocated = np.zeros(m, np.int64)
        frag_curve = np.zeros(m)
        alloc = 0
        for i, pod in enumerate(seq):
            if not w.never_fits[pod]:
                cand = np.flatnonzero(feasible(state, w, pod))
                if len(cand):
                    s = policy.score(state, w, pod, cand, rng)
                    top = cand[s == s.max()]
                    node = int(top[np.argmin(rank[top])]) if len(top) > 1 else int(top[0])
                    gpu_idx = policy.pick_devices(state, w, pod, node)
                    state.bind(node, int(w.cpu[pod]), int(w.mem[pod]), gpu_idx, int(w.milli[pod]))
                    policy.on_bind(state, w, pod, node)
                    alloc += int(w.gpu_milli_total[pod])
                    one = slice(node, node + 1)
                    f = node_fragmentation(state.gpu_free[one], state.gpu_cap[one], state.cpu_free[one],
                                           state.model_bit[one], self.target)[0]
                    frag_total += f - frag[node]
                    frag[node] = f
                    node_of[i] = node
            allocated[i] = alloc
            frag_curve[i] = frag_total
        arrays = {"node": node_of, "arrived": np.cumsum(w.gpu_milli_total[seq]), "allocated": allocated,
                  "frag": frag_curve}
        return arrays, state

    def simulate(self, policy: ScorePlugin, seed: int) -> tuple[pl.DataFrame, dict]:
        """One seeded run: the curve (one row per pod tried) and the metrics row."""
        order_ss, node_ss, policy_ss = np.random.SeedSequence(seed).spawn(3)
        seq = self.sequence(np.random.default_rng(order_ss))
        rank = self.node_rank(np.random.default_rng(node_ss))
        arrays, _ = self.pack(policy, seq, rank, np.random.default_rng(policy_ss))
        node_of, arrived, allocated, frag_curve = (arrays[k] for k in ("node", "arrived", "allocated", "frag"))
        m, w = len(seq), self.workload

        cap = float(self.capacity)
        idle = cap - allocated
        curve = pl.DataFrame({
            "index": np.arange(m, dtype=np.int32),
            "pod_id": w.pod_id[seq].astype(str),
            "node": node_of,
            "placed": node_of >= 0,
            "arrived_gpu_milli": arrived,
            "arrived_pct": arrived / cap * 100.0,
            "allocated_gpu_milli": allocated,
            "alloc_rate": allocated / cap * 100.0,
            "frag_milli": frag_curve,
            "frag_ratio": np.divide(frag_curve, idle, out=np.zeros(m), where=idle > 0) * 100.0,
            "frag_amount": frag_curve / cap * 100.0,
        })
        pct = curve["arrived_pct"].to_numpy()
        metrics = {
            "policy": policy.name,
            "seed": int(seed),
            "trace": self.pods_csv.name,
            "nodes": self.nodes_csv.name,
            "pods": m,
            "placed": int((node_of >= 0).sum()),
            "typical_shapes": len(self.target),
            "capacity_gpu_milli": int(self.capacity),
            "arrived_pct_final": float(pct[-1]),
            "alloc_rate_final": float(allocated[-1] / cap * 100.0),
            f"alloc_rate_at_{ALLOC_AT_PCT}": value_at(pct, curve["alloc_rate"].to_numpy(), ALLOC_AT_PCT),
            f"frag_amount_at_{FRAG_AT_PCT}": value_at(pct, curve["frag_amount"].to_numpy(), FRAG_AT_PCT),
            f"frag_ratio_at_{FRAG_AT_PCT}": value_at(pct, curve["frag_ratio"].to_numpy(), FRAG_AT_PCT),
        }
        return curve, metrics

    def run(self, cfg, out_dir: Path) -> pl.DataFrame:
        """One run of the Hydra config `cfg` (its `policy` and `seed`) into `out_dir`, held by
        this run: curve.parquet, run.json (wall time), config.yaml, then metrics.parquet last
        (the run's completion marker). Returns the one-row metrics table, as every runner does."""
        from omegaconf import OmegaConf

        check_config(cfg)  # before the run directory is touched
        out_dir = Path(out_dir)
        with start_run(out_dir, ("curve.parquet", RUN_INFO, "config.yaml")):  # unfinished till the end
            policy = instantiate(cfg.policy, "policy")
            started = time.perf_counter()
            curve, metrics = self.simulate(policy, int(cfg.seed))
            wall = time.perf_counter() - started
            meta = provenance(cfg, {"source": f"Alibaba openb v2023 {self.pods_csv.name}",
                                    "nodes": self.nodes_csv.name})
            write_parquet(curve, out_dir / "curve.parquet", meta)
            write_run_info(out_dir, wall)
            write_text(OmegaConf.to_yaml(cfg), out_dir / "config.yaml")
            table = pl.DataFrame([metrics])
            write_parquet(table, out_dir / "metrics.parquet", meta)
        return table


# ---- report over a sweep -----------------------------------------------------------------
ALLOC_COL, FRAG_COL = f"alloc_rate_at_{ALLOC_AT_PCT}", f"frag_amount_at_{FRAG_AT_PCT}"


def _run_dirs(paths: list[str]) -> list[Path]:
    found = set()
    for p in map(Path, paths):
        if not p.exists():
            raise LoopbenchError(f"{p}: no such directory")
        found |= {m.parent for m in p.rglob("metrics.parquet")}
    if not found:
        raise LoopbenchError(f"no run directory (one holding metrics.parquet) under {', '.join(paths)}")
    return sorted(found)


def summarize(metrics: pl.DataFrame) -> pl.DataFrame:
    """Headline numbers per trace and policy over seeds, best allocation first (no wall
    times: published tables must come out the same on every regeneration)."""
    stats = []
    for col, short in ((ALLOC_COL, "alloc_at_130"), (FRAG_COL, "frag_amount_at_90")):
        c = pl.col(col)
        stats += [c.mean().alias(f"{short}_mean"), c.std().alias(f"{short}_std"),
                  c.min().alias(f"{short}_min"), c.max().alias(f"{short}_max")]
    return (metrics.group_by("trace", "policy")
            .agg(pl.col("seed").n_unique().alias("seeds"), *stats)
            .sort(["trace", "alloc_at_130_mean"], descending=[False, True]))


def _markdown(summary: pl.DataFrame, plots: dict[str, str]) -> str:
    lines = ["# openb packing experiment (FGD, ATC'23)", "",
             "Allocation rate = allocated GPU milli / cluster GPU milli when arrived GPU requests reach "
             f"{ALLOC_AT_PCT}% of capacity; fragmentation amount = F / cluster GPU milli at {FRAG_AT_PCT}% "
             "arrived (F as in docs/model.md, Metrics). Mean over seeds, with std and [min, max].", ""]
    for trace in summary["trace"].unique(maintain_order=True):
        rows = summary.filter(pl.col("trace") == trace)
        lines += [f"## {trace}", "",
                  f"| policy | seeds | alloc % at {ALLOC_AT_PCT}% arrived | std | frag amount % at "
                  f"{FRAG_AT_PCT}% arrived | std |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in rows.iter_rows(named=True):
            lines.append(
                f"| {r['policy']} | {r['seeds']} | {r['alloc_at_130_mean']:.2f} "
                f"[{r['alloc_at_130_min']:.2f}, {r['alloc_at_130_max']:.2f}] | {r['alloc_at_130_std'] or 0:.2f} | "
                f"{r['frag_amount_at_90_mean']:.2f} [{r['frag_amount_at_90_min']:.2f}, "
                f"{r['frag_amount_at_90_max']:.2f}] | {r['frag_amount_at_90_std'] or 0:.2f} |")
        if trace in plots:
            lines += ["", f"![curves for {trace}]({plots[trace]})"]
        lines.append("")
    return "\n".join(lines)


def _plot(curves: pl.DataFrame, trace: str, path: Path) -> None:
    """Allocation and fragmentation against arrived load, bucketed per run then averaged."""
    from matplotlib.figure import Figure  # Agg canvas, no display or pyplot state needed

    fig = Figure(figsize=(11, 4.2))
    ax_alloc, ax_frag = fig.subplots(1, 2)
    per_run = (curves.group_by("policy", "seed", "bucket").agg(pl.col("alloc_rate", "frag_amount").mean())
               .group_by("policy", "bucket").agg(pl.col("alloc_rate", "frag_amount").mean())
               .sort("policy", "bucket"))
    for policy in per_run["policy"].unique(maintain_order=True):
        d = per_run.filter(pl.col("policy") == policy)
        ax_alloc.plot(d["bucket"], d["alloc_rate"], label=policy)
        ax_frag.plot(d["bucket"], d["frag_amount"], label=policy)
    ax_alloc.plot([0, 100], [0, 100], color="grey", lw=0.6, ls=":")
    for ax, ylabel in ((ax_alloc, "GPU allocation rate (%)"), (ax_frag, "fragmentation amount (% of GPUs)")):
        ax.set_xlabel("arrived GPU requests (% of capacity)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ax_alloc.legend(fontsize=8)
    fig.suptitle(trace)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)


def report_main(argv: list[str]) -> int:
    """`loopbench packing-report SWEEP_OR_RUN_DIR... -o OUTDIR`: summary.md, summary.csv, plots."""
    ap = argparse.ArgumentParser(prog="loopbench packing-report",
                                 description="Tables and curves of openb packing runs (one per policy and seed).")
    ap.add_argument("dirs", nargs="+", metavar="SWEEP_OR_RUN_DIR")
    ap.add_argument("-o", "--out", required=True, metavar="OUTDIR")
    args = ap.parse_args(argv)
    runs = _run_dirs(args.dirs)
    metrics = pl.concat([pl.read_parquet(r / "metrics.parquet") for r in runs], how="diagonal_relaxed")
    out = Path(args.out)
    summary = summarize(metrics)
    plots = {}
    with_curves = [(r, m) for r, m in zip(runs, metrics.iter_rows(named=True), strict=True)
                   if (r / "curve.parquet").exists()]
    with atomic_dir(out, "summary.md") as tmp:  # `out` is the old report or the new one, whole
        if with_curves:
            curves = pl.concat([
                pl.read_parquet(r / "curve.parquet", columns=["arrived_pct", "alloc_rate", "frag_amount"])
                .with_columns(policy=pl.lit(m["policy"]), seed=pl.lit(m["seed"]), trace=pl.lit(m["trace"]))
                for r, m in with_curves])
            curves = curves.with_columns(bucket=(pl.col("arrived_pct") + 0.5).floor().cast(pl.Int64))
            for trace in curves["trace"].unique(maintain_order=True):
                name = f"curves_{Path(trace).stem}.png"
                _plot(curves.filter(pl.col("trace") == trace), trace, tmp / name)
                plots[trace] = name
        summary.write_csv(tmp / "summary.csv")
        write_text(_markdown(summary, plots), tmp / "summary.md")
        idents = metrics.select("trace", "policy", "seed").iter_rows(named=True)
        write_report_provenance(tmp, sorted(zip(idents, runs, strict=True), key=lambda r: tuple(r[0].values())))
    print(f"{len(runs)} runs -> {out / 'summary.md'}")
    return 0
