"""`loopbench export`: a cluster config and a trace to another format.

    loopbench export kubernetes --cluster CLUSTER.yaml --trace TRACE.parquet --out OUT.yaml|OUT.json

The cluster YAML is built as a replay builds `cluster=...` (its `_target_`, every key checked),
the trace read and checked as a replay reads it. What the format cannot carry back is listed
once in the summary. The output is written atomically.
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of `loopbench export`; a bad input is one clear line and exit code 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["kubernetes"]:  # --help, or a format there is none of: argparse says so
        p = argparse.ArgumentParser(prog="loopbench export", description=__doc__.split("\n")[0],
                                    epilog="loopbench export kubernetes --help: its flags")
        p.add_argument("format", choices=["kubernetes"])
        p.parse_args(argv[:1])
    try:
        return _kubernetes(argv[1:])
    except LoopbenchError as exc:
        print(f"loopbench export: error: {exc}", file=sys.stderr)
        return 1
