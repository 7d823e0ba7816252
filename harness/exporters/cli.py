"""`loopbench export`: a cluster config and a trace, or a run, to another format.

    loopbench export kubernetes --cluster CLUSTER.yaml --trace TRACE.parquet --out OUT.yaml|OUT.json
    loopbench export perfetto RUN_DIR --out RUN.trace.json

The cluster YAML is built as a replay builds `cluster=...` (its `_target_`, every key checked),
the trace read and checked as a replay reads it. What the format cannot carry back is listed
once in the summary. A run is read from its own outputs (harness/run_timeline.py). The output
is written atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cluster import Cluster
from harness.errors import ConfigError, LoopbenchError
from harness.importers.cli import check_outputs
from harness.output import write_text
from harness.settings import instantiate
from harness.trace import read_trace


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loopbench export kubernetes", description=(
        "A cluster config and a trace -> the Nodes, PodGroups and Pods kubectl get -o yaml (or -o json, for "
        "OUT.json) prints, as loopbench import kubernetes reads them back. What it cannot read back is listed. "
        "See harness/exporters/kubernetes.py."))
    p.add_argument("--cluster", required=True, metavar="CLUSTER.yaml",
                   help="a cluster config (e.g. conf/cluster/default.yaml)")
    p.add_argument("--trace", required=True, metavar="TRACE.parquet",
                   help="a canonical trace (e.g. traces/default.parquet)")
    p.add_argument("-o", "--out", required=True, metavar="OUT.yaml",
                   help="the manifests to write (JSON if it ends in .json)")
    return p


def load_cluster(path: str) -> Cluster:
    """The cluster of a cluster YAML, built as a replay builds `cluster=...`."""
    from omegaconf import DictConfig, OmegaConf

    where = f"--cluster {path}"
    if not Path(path).is_file():
        raise ConfigError(where, "no such file (a cluster YAML, e.g. conf/cluster/default.yaml)")
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:  # OmegaConf wraps YAML's parse errors in its own
        raise ConfigError(where, f"not a YAML mapping ({str(exc).splitlines()[0]})") from None
    target = cfg.get("_target_") if isinstance(cfg, DictConfig) else None
    if target != "harness.cluster.Cluster":
        raise ConfigError(where, f"_target_ is {target!r}: a cluster YAML builds harness.cluster.Cluster")
    try:
        return instantiate(cfg, "cluster", _convert_="all")
    except LoopbenchError as exc:
        raise ConfigError(where, str(exc)) from None
    except Exception as exc:  # Hydra's wrapping of what Cluster raised
        cause = exc.__cause__ or exc
        raise ConfigError(where, str(cause) if isinstance(cause, LoopbenchError) else
                          f"cannot instantiate: {cause}") from None


def _kubernetes(argv: list[str]) -> int:
    from harness.exporters import kubernetes as k8s

    args = _parser().parse_args(argv)
    check_outputs([("--out", args.out)], [args.cluster, args.trace], "export")
    cluster = load_cluster(args.cluster)
    table, _ = read_trace(args.trace)
    out = k8s.export_kubernetes(cluster, table, args.trace)
    head = (f"# Exported by `loopbench export kubernetes --cluster {args.cluster} --trace {args.trace}` "
            f"(harness/exporters/kubernetes.py).\n# Read it back: {out.import_command(args.out)}\n")
    write_text(k8s.manifest_text(out.objects, args.out.endswith(".json"), head), Path(args.out))
    print("\n".join([f"loopbench export kubernetes: {args.cluster}, {args.trace}", *out.summary(args.out),
                     f"  wrote {args.out}"]))
    return 0


def _perfetto(argv: list[str]) -> int:
    from harness.exporters import perfetto

    p = argparse.ArgumentParser(prog="loopbench export perfetto", description=(
        "A replay run -> a Chrome / Perfetto trace (JSON) to open in ui.perfetto.dev or chrome://tracing: nodes "
        "as tracks per pool, pods as slices on them, autoscaler decisions as instants, job waits per queue. "
        "Pods and decisions need the run's decision trace (replay with trace_events=true). "
        "See harness/exporters/perfetto.py."))
    p.add_argument("run", metavar="RUN_DIR", help="a finished replay run (a folder holding metrics.parquet)")
    p.add_argument("-o", "--out", required=True, metavar="RUN.trace.json", help="the trace to write")
    args = p.parse_args(argv)
    check_outputs([("--out", args.out)], [], "export")
    text, tl = perfetto.export(Path(args.run))
    write_text(text, Path(args.out))
    print("\n".join([f"loopbench export perfetto: {args.run}",
                     f"  {tl.nodes.height:,} nodes, {0 if tl.stays is None else tl.stays.height:,} pod stays, "
                     f"{0 if tl.decisions is None else tl.decisions.height:,} autoscaler decisions, "
                     f"{tl.jobs.height:,} jobs",
                     *(f"  missing: {m}" for m in tl.missing), f"  wrote {args.out} (open it in ui.perfetto.dev)"]))
    return 0


FORMATS = {"kubernetes": _kubernetes, "perfetto": _perfetto}


def main(argv: list[str] | None = None) -> int:
    """Entry point of `loopbench export`; a bad input is one clear line and exit code 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] not in [[f] for f in FORMATS]:  # --help, or a format there is none of: argparse says so
        p = argparse.ArgumentParser(prog="loopbench export", description=__doc__.split("\n")[0],
                                    epilog="loopbench export FORMAT --help: its flags")
        p.add_argument("format", choices=list(FORMATS))
        p.parse_args(argv[:1])
    try:
        return FORMATS[argv[0]](argv[1:])
    except LoopbenchError as exc:
        print(f"loopbench export: error: {exc}", file=sys.stderr)
        return 1
