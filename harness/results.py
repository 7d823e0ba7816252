"""`loopbench results [NAME...] [--check]`: regenerate the published results/ from scratch.

Each canonical experiment (conf/experiment/NAME.yaml) is run as what a user would type: a
Hydra multirun `loopbench replay -m experiment=NAME` (its sweep is the config's
`hydra.sweeper.params`; openb_packing's is given below), split over `--jobs` processes along
its longest sweep axis, into runs/results/NAME/ (not committed); then its report goes to
results/NAME/: `loopbench report` for the replay experiments, `loopbench packing-report` for
openb_packing. `--check` regenerates into a temporary folder and compares with the committed
files: tables byte for byte, report.html with the image bytes masked (PNG encoding differs
between matplotlib builds), so a committed table that no longer matches the code is caught.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.cluster import Cluster
from harness.errors import ConfigError, LoopbenchError
from harness.output import COMPLETE_MARKER, hold
from harness.progress import Progress
from harness.provenance import PROVENANCE
from harness.settings import declares, flag, number
from harness.trace import MAX_TIME_S

ROOT = Path(__file__).resolve().parents[1]
#: Seconds between two counts of a sweep's finished runs.
POLL_S = 1.0
#: how long an interrupted sweep waits for its shards to stop before it kills them
END_S = 10.0


def _resolve(path) -> Path:
    """A relative path is taken from the working directory, else from the repository root."""
    p = Path(path)
    return p if p.is_absolute() or p.exists() else ROOT / p


@declares({
    "autoscaled": flag("pools from 0 to the node list's count instead of the static inventory"),
    "stock_low": number("each pool's stock is drawn between this share of its max_size and all of it; "
                        "null = unlimited stock", ge=0, le=1, null=True),
    "stock_period_s": number("seconds between two draws of a pool's stock", gt=0, le=MAX_TIME_S),
})
def openb_cluster(nodes_csv: str, autoscaled: bool = True, shortage: str | None = None,
                  stock_low: float | None = None, stock_period_s: float = 3600.0,
                  dra: dict | None = None) -> Cluster:
    """The cluster of an openb node list, exactly as `loopbench import openb --nodes NODES
    [--autoscaled]` writes it, built at run time so the node list is read in place (Hydra
    `_target_` of conf/experiment/openb_autoscaled.yaml and conf/scenario/openb_autoscaled.yaml);
    `shortage`, when given, is the Cluster's (how the provider fails: `cluster.shortage`).
    `stock_low`, when given, makes each pool's stock scarce: redrawn every `stock_period_s`
    between that fraction of the pool's max_size and all of it (the pool's seeded stream).
    `dra`, when given, is the Cluster's (a DRA cluster: its GPUs as devices, pods' as claims)."""
    from harness.importers.cli import openb_cluster_config
    from harness.importers.common import autoscaled_cluster

    path = _resolve(nodes_csv)
    if not path.exists():
        raise ConfigError("cluster.nodes_csv", f"{path}: no such file (the shared openb traces)")
    cfg = openb_cluster_config(str(path))
    if autoscaled:
        cfg = autoscaled_cluster(cfg)
    if shortage is not None:
        cfg["shortage"] = shortage
    if stock_low is not None:  # its range: the rule above
        for pool in cfg["pools"]:
            high = int(pool["max_size"])
            pool["stock"] = {"low": int(stock_low * high), "high": high, "period_s": stock_period_s}
    cfg["kueue"] = single_tenant_queue(cfg)
    if dra is not None:
        cfg["dra"] = dict(dra)
    return Cluster(**{k: v for k, v in cfg.items() if k != "_target_"})


def single_tenant_queue(cfg: dict) -> dict:
    """Kueue's queues for one tenant on a cluster config (a `kueue:` section, read only by the
    loops behind Kueue admission): a ResourceFlavor per pool (a node model, as Kueue users
    label flavors by instance type), tried in the pools' order, and one ClusterQueue `default`
    (the queue of a trace without queues) whose nominal quota in each flavor is all that
    pool may hold (max_size nodes): Kueue admits whole jobs onto the flavor of the first
    pool that fits them and has quota left, and never holds back what the cluster could run."""
    types = {t["name"]: t for t in cfg["node_types"]}
    flavors, quotas = [], []
    for pool in cfg["pools"]:
        t, n = types[pool["node_type"]], int(pool["max_size"])
        flavors.append({"name": pool["name"], "pools": [pool["name"]]})
        quotas.append({"name": pool["name"], "nominal": {"gpu": n * int(t.get("gpus", 0)),
                                                         "cpu": n * int(t["cpu_milli"]) / 1000,
                                                         "memory": n * int(t["memory_mib"]) / 1024}})
    return {"resource_flavors": flavors,
            "cluster_queues": [{"name": "default", "cohort": None, "flavors": quotas}],
            "local_queues": [{"name": "default", "cluster_queue": "default"}]}


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    notes: list[str]
    report: str = "replay"  # replay: harness.report; packing: harness.openb_packing.report_main
    sweep: list[str] = field(default_factory=list)  # overrides beyond the config's sweeper params
    #: a sweep key whose every value brings its own config to prepare (a scenario: its trace import)
    prepare_each: str = ""
    #: the sweep key to share among processes when the longest one's values cost unevenly
    shard_along: str = ""


EXPERIMENTS = [
    Experiment("loops_synthetic", "Loops on the bundled synthetic trace", [
        "The bundled synthetic AI workload (traces/default.parquet: shared-GPU inference, topology-claiming "
        "training, rack/block-local gangs, CPU jobs) on the default autoscaled cluster, through every loop and "
        "every ablation step (conf/experiment/loops_synthetic.yaml). A seed changes the cluster's random streams "
        "(boot delays, node tie-break order, a random expander where one is configured), not the trace.",
        "Regenerate: loopbench results loops_synthetic."]),
    Experiment("openb_packing", "openb packing (FGD, ATC'23)", [], report="packing",
               sweep=["policy=random,dotprod,gpu_clustering,gpu_packing,best_fit,fgd", "seed=range(42,52)",
                      "trace_variant=default,gpushare40,multigpu30,gpuspec20,cpu100"]),
    Experiment("openb_autoscaled", "openb pod list on an autoscaled cluster of its node models", [
        "The openb default pod list (Alibaba GPU v2023) against an autoscaled cluster with one pool per node model "
        "of openb_node_list_gpu_node.csv, 0 to that model's count (conf/experiment/openb_autoscaled.yaml).",
        "By its own timestamps the trace barely loads a cluster (8,152 pods over 149 days, about 60-110 GPUs busy "
        "at once against the inventory's 6,212), so it is windowed to its busy part (from day 112: 8,130 pods) and "
        "its arrivals are compressed 40x, durations kept: the 38 busy days arrive in 22 h and about 430 GPUs are "
        "busy on average, up to ~880. openb has no gangs, topology claims or committed capacity, so of the "
        "autoscaler's switches only sharing matters. Run times are kept, so the longest pods run 36 days: each "
        "replay runs until its last pod is done (stop_when_done, at most 90 days), so every loop does all the "
        "work but the Karpenter-like one: its consolidation restarts the longest pods, and a few are still "
        "running at the cap (its verdict counts them).",
        "Regenerate: loopbench results openb_autoscaled."]),
    Experiment("loops_robustness", "Robustness grid: loops x scoring x provider x trace", [
        "Does what the merged loop saves over the strongest separate baseline hold across settings? Each loop "
        "(bare separate, the ablation's reference; separate_2026, the strongest separate baseline a 2026 cluster "
        "runs (its Karpenter twin is in loops_synthetic only); separate_2026_priced, the same with the merged "
        "planner's pricing as its expander; merged, alone and behind the same Kueue) x scoring policy "
        "(kube-scheduler's default; GPU bin-packing) x "
        "provider (a request it cannot fill fails at once; or silently: the missing nodes never come up and the "
        "loop notices at its own timeout) x "
        "trace (the bundled synthetic trace on the default cluster, to its 48 h horizon; openb on the autoscaled "
        "cluster of its node models, with scarce stock, run until its last pod is done), 5 seeds "
        "(conf/experiment/loops_robustness.yaml; a scenario in conf/scenario/ selects a trace and its cluster "
        "together). Both clusters are DRA clusters.",
        "Regenerate: loopbench results loops_robustness."], prepare_each="scenario",
               # the loops cost unevenly (Karpenter-like: most of the grid's time): each process takes a provider
               shard_along="++cluster.shortage"),
    Experiment("loops_evidence", "Broader evidence: the strongest baselines and merged on three traces", [
        "Does merged's saving over the strongest separate baseline hold beyond the bundled trace, with enough "
        "gangs that a gang p99 is not a maximum? Loops (bare separate; separate_2026; separate_2026_priced; "
        "merged) x scenario (the bundled synthetic workload redrawn per seed with 20 and 100 gangs on the default "
        "cluster, and at twice the load; openb's real pods, no gangs; a gang workload drawn per seed from the "
        "Philly trace's published "
        "distributions, 20 and 100 gangs, on a cluster of 8-GPU servers) x 3 seeds "
        "(conf/experiment/loops_evidence.yaml). A seed redraws the generated traces (job mix, arrivals, gang "
        "sizes) as well as the provider's streams. Every replay runs until its last pod is done.",
        "Regenerate: loopbench results loops_evidence."], prepare_each="scenario"),
    Experiment("loops_gangs", "Gangs at scale: gang size and 400 gangs a run, separate_2026 and merged", [
        "Does merged's saving over the strongest separate baseline hold for larger gangs and for more of them, and "
        "how does the gang start tail grow with gang size? Loops (separate_2026, the strongest separate baseline; "
        "merged) x scenario x 3 seeds (conf/experiment/loops_gangs.yaml). The gang-size sweep "
        "(philly_redrawn_m2, _m8, _m32, _m64): the Philly-like workload of loops_evidence's philly_redrawn_g100 "
        "(100 gangs over 9 days, on the cluster of 8-GPU servers that may grow to 160) with every gang exactly 2, "
        "8, 32 or 64 servers (16 to 512 GPUs) placed anywhere in the cluster (32 and 64 exceed a rack of 16). A "
        "seed draws the same arrivals and durations in every size cell, so the gangs' load grows with their size "
        "(seed 0: about 2, 7, 29 and 58 servers busy on average over the 9 days, beside about 34 for the other "
        "jobs; seed 2 draws one gang of 49 days). The 400-gang cells (philly_redrawn_g400, "
        "synthetic_redrawn_g400: 37 and 24 days of arrivals, their own size mixes): a gang p99 over 400 gangs is "
        "the fifth largest of a run, no maximum. Every replay runs until its last pod is done, at most 120 days "
        "(the Philly-like cells) or 30 (the bundled one): a run that reaches that cap did less work, and its "
        "setting is counted apart.",
        "Regenerate: loopbench results loops_gangs."], prepare_each="scenario"),
    Experiment("inference_bursts", "Inference bursts: loops x replica autoscaler on bursty service demand", [
        "Inference services whose replicas follow demand: every setup (the separate loops with a DRA-aware "
        "Cluster-Autoscaler-like autoscaler and its other switches off; the same with every autoscaler "
        "switch on, alone and with each of today's workarounds, overprovisioning placeholders (with "
        "DefaultPreemption, which they need) and a CapacityBuffer, a replica's room per service; the merged loop, "
        "which also sees the replica autoscaler's recommendation) x replica autoscaler "
        "(the HPA, which keeps a replica; KEDA, which scales a service with minimum 0 to zero) x its scale-down "
        "stabilization window (0 s; the default 300 s) x scenario (the bundled synthetic services; the Azure LLM "
        "inference trace 2023 as 8 time-shifted copies of its two services, its hour played 6 times with seeded "
        "noise: 16 services of 4-H100 replicas over 5.9 h), on the default autoscaled cluster, 3 seeds "
        "(conf/experiment/inference_bursts.yaml).",
        "Demand not served is the share of demand above ready capacity (replicas that finished their cold start "
        "x capacity per replica); time to capacity runs from demand rising above ready capacity until it is "
        "covered; warm idle accelerator hours are ready replicas beyond the demand (docs/model.md, Services).",
        "Regenerate: loopbench results inference_bursts."], prepare_each="scenario"),
]
BY_NAME = {e.name: e for e in EXPERIMENTS}


def _hydra_config(name: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    from harness.config import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose("config", [f"experiment={name}", *overrides], return_hydra_config=True)


def _sweep_values(params: dict[str, str]) -> dict[str, list[str]]:
    """Each key of the sweep `params` (key -> Hydra sweep value) with its list of values."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    values = {}
    for k, v in params.items():
        o = parser.parse_override(f"{k}={v}")
        values[k] = list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(v)]
    return values


def shards(params: dict[str, str], jobs: int, along: str = "") -> list[list[str]]:
    """The sweep `params` (key -> Hydra sweep value) cut into at most `jobs` sweeps along the
    key `along` (default: the key with the most values), its values dealt round robin."""
    values = _sweep_values(params)
    if not values:
        return [[]]
    axis = along if along in values else max(values, key=lambda k: len(values[k]))
    n = max(1, min(jobs, len(values[axis])))
    return [[f"{k}={','.join(values[axis][i::n]) if k == axis else v}" for k, v in params.items()] for i in range(n)]


def sweep_size(params: dict[str, str]) -> int:
    """How many runs the sweep `params` makes."""
    return math.prod(len(v) for v in _sweep_values(params).values())


def prepare(exp: Experiment, cfg) -> None:
    """Make what the experiment's config reads: the trace its `import_args` import (run from
    the repository root, as the sweep is)."""
    argv = [str(a) for a in cfg.get("import_args") or []]
    if not argv:
        return
    missing = [a for a in argv if a.endswith(".csv") and not (ROOT / a).exists()]
    if missing:
        raise LoopbenchError(f"{exp.name}: {ROOT / missing[0]}: no such file (the public traces are read in "
                             "place from ../shared/traces beside the repository)")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "import", *argv], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        raise LoopbenchError(f"{exp.name}: loopbench import {' '.join(argv)}: {done.stderr.strip()}")


def sweep_params(exp: Experiment, cfg, sets: Sequence[str] = ()) -> dict[str, str]:
    """The experiment's sweep: its config's sweeper params, then its own `sweep` overrides, then
    `sets` (KEY=VALUES, e.g. `seed=0,1`: a smaller sweep of the same experiment)."""
    params = {str(k): str(v) for k, v in (cfg.hydra.sweeper.params or {}).items()}
    for o in exp.sweep:
        k, v = o.split("=", 1)
        params[k] = v
    for o in sets:
        k, eq, v = o.partition("=")
        if not eq or not v:
            raise ConfigError("--set", f"expected KEY=VALUES (a sweep key and its values, e.g. seed=0,1), got {o!r}")
        if k not in params:
            raise ConfigError("--set", f"{k!r} is not a sweep key of {exp.name} (its keys: {', '.join(params)})")
        params[k] = v
    return params


def _each_config(exp: Experiment, cfg, params: dict[str, str]) -> list:
    """The configs to prepare: one per value of the experiment's `prepare_each` sweep key (each
    scenario's import), else the experiment's own."""
    if not exp.prepare_each:
        return [cfg]
    values = _sweep_values({exp.prepare_each: params[exp.prepare_each]})[exp.prepare_each]
    return [_hydra_config(exp.name, [f"{exp.prepare_each}={v}"]) for v in values]


def sweep(exp: Experiment, runs: Path, jobs: int, sets: Sequence[str] = ()) -> None:
    """The experiment's Hydra multirun, as `jobs` concurrent `loopbench replay -m` processes."""
    cfg = _hydra_config(exp.name, [])
    params = sweep_params(exp, cfg, sets)
    for each in _each_config(exp, cfg, params):
        prepare(exp, each)
    if runs.exists():
        shutil.rmtree(runs)
    procs = []
    try:
        for i, part in enumerate(shards(params, jobs, exp.shard_along)):
            log = runs / f"shard-{i}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "harness.cli", "replay", "-m", f"experiment={exp.name}", *part,
                   f"hydra.sweep.dir={runs / f'shard-{i}'}"]
            with log.open("w") as fh:  # each shard its own process group, ended with this process
                procs.append((subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                               start_new_session=True), log, cmd))
        _wait(procs, runs, exp.name, sweep_size(params))
    finally:
        _end([p for p, _, _ in procs])
    failed = [(log, cmd) for p, log, cmd in procs if p.wait() != 0]
    if failed:
        log, cmd = failed[0]
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise LoopbenchError(f"{exp.name}: sweep failed: {' '.join(cmd)}\n{tail}")


def _end(procs: list) -> None:
    """Stop the shards still running (an interrupted or failed sweep), their children too:
    none is left writing into a folder that a rerun or --check's cleanup removes."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    for p in running:
        try:
            p.wait(timeout=END_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _wait(procs: list, runs: Path, name: str, total: int) -> None:
    """Wait for the sweep's processes, showing how many of its runs have finished."""
    with Progress(f"results {name}", total, "runs", status=lambda n: f"{n:,.0f} of {total:,} runs done") as bar:
        while any(p.poll() is None for p, _, _ in procs):
            bar.update_to(sum(1 for _ in runs.rglob(COMPLETE_MARKER)))
            time.sleep(POLL_S)


def report(exp: Experiment, runs: Path, out: Path) -> None:
    """The experiment's report into `out`, swapped in whole: a failed build leaves the old one."""
    if exp.report == "packing":
        from harness.openb_packing import report_main

        report_main([str(runs), "-o", str(out)])
    else:
        from harness.report import build

        build([runs], out, exp.title, exp.notes, gantt_view=False)  # results are over seeds, not one run


def regenerate(exp: Experiment, out_root: Path, runs_root: Path, jobs: int, sets: Sequence[str] = ()) -> Path:
    started = time.perf_counter()
    runs, out = runs_root / exp.name, out_root / exp.name
    with hold(runs_root / f".{exp.name}.lock", runs):  # one regeneration of an experiment at a time
        sweep(exp, runs, jobs, sets)
        report(exp, runs, out)
    print(f"{exp.name}: {out} ({time.perf_counter() - started:.0f} s)", flush=True)
    return out


_DATA_URI = re.compile(rb"data:image/png;base64,[A-Za-z0-9+/=]+")


def differences(committed: Path, fresh: Path) -> list[str]:
    """Files that differ between two results folders: tables byte for byte, report.html with
    its embedded images masked, PNG files only present and valid; provenance.json, which names
    the commit that generated the results, not at all."""
    diffs = []
    names = sorted(({p.name for p in committed.iterdir()} | {p.name for p in fresh.iterdir()}) - {PROVENANCE})
    for name in names:
        a, b = committed / name, fresh / name
        if not a.exists() or not b.exists():
            diffs.append(f"{name}: only in {'the regeneration' if b.exists() else 'the committed results'}")
        elif name.endswith(".png"):
            if not b.read_bytes().startswith(b"\x89PNG"):
                diffs.append(f"{name}: not a PNG")
        elif name.endswith(".html"):
            if _DATA_URI.sub(b"data:", a.read_bytes()) != _DATA_URI.sub(b"data:", b.read_bytes()):
                diffs.append(f"{name}: differs (images masked)")
        elif a.read_bytes() != b.read_bytes():
            diffs.append(f"{name}: differs")
    return diffs


def check(exp: Experiment, out_root: Path, jobs: int) -> list[str]:
    """Regenerate `exp` into a temporary folder; the differences from the committed results."""
    committed = out_root / exp.name
    if not committed.exists():
        return [f"{committed}: no committed results"]
    with tempfile.TemporaryDirectory(prefix=f"loopbench-{exp.name}-") as tmp:
        fresh = regenerate(exp, Path(tmp) / "results", Path(tmp) / "runs", jobs)
        return differences(committed, fresh)


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="loopbench results", description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"experiments (default: all of {', '.join(BY_NAME)})")
    ap.add_argument("--out", default=str(ROOT / "results"), help="results folder (default: the repository's results/)")
    ap.add_argument("--runs", default=str(ROOT / "runs" / "results"), help="where the runs go (default: runs/results)")
    ap.add_argument("--jobs", type=int, default=2, help="concurrent replay processes (default 2)")
    ap.add_argument("--check", action="store_true", help="regenerate into a temporary folder and compare")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUES",
                    help="replace a sweep key's values, e.g. --set seed=0,1 (a smaller run; not for --check)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)  # ends the shards and --check's folder as Ctrl-C does
    if args.jobs < 1:
        raise ConfigError("--jobs", f"must be an integer >= 1 (concurrent replay processes), got {args.jobs}")
    if args.set and args.check:
        raise ConfigError("--set", "--check regenerates the committed sweep whole; drop --set")
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        raise ConfigError("NAME", f"unknown experiment '{unknown[0]}' (known: {', '.join(BY_NAME)})")
    chosen = [BY_NAME[n] for n in args.names] or EXPERIMENTS
    out_root = Path(args.out)
    if not args.check:
        for exp in chosen:
            regenerate(exp, out_root, Path(args.runs), args.jobs, args.set)
        return 0
    bad = 0
    for exp in chosen:
        diffs = check(exp, out_root, args.jobs)
        print(f"{exp.name}: {'matches the committed results' if not diffs else 'DIFFERS: ' + '; '.join(diffs)}")
        bad += bool(diffs)
    return 1 if bad else 0
