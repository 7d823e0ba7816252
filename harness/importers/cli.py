"""`loopbench import`: a public trace (and its node list) to a canonical trace (and cluster YAML).

    loopbench import kubernetes FILE... --out-cluster CLUSTER.yaml --out TRACE.parquet
                     [--instance-types TYPES.yaml] [--nodepool-max-nodes N]
    loopbench import FORMAT SOURCE... -o TRACE.parquet [--nodes NODELIST]
                     [--cluster-out CLUSTER.yaml] [--autoscaled]
                     [--window START:END] [--compress F] [--scale F] [--remap OLD=NEW]...
                     [--inflate RATIO [--inflate-cluster CLUSTER.yaml]] [--seed N]
                     [--transforms STEPS.yaml]

Every source row is accounted for in the summary: read, kept, dropped by reason, adjusted.
Transforms run in the order of the flags above (window, compress, scale, remap, inflate),
then the steps of `--transforms` (a Hydra `_target_` list or `harness.transforms.Pipeline`).
A node list becomes a cluster YAML that a replay can use (`cluster=...`): the static
inventory, or with `--autoscaled` one derived from it (see
`harness.importers.common.autoscaled_cluster`). Outputs are written atomically.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

from harness import transforms as tf
from harness.cluster import MAX_POOL_NODES, Cluster
from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.importers.common import ImportResult, autoscaled_cluster, boot_delay, node_price
from harness.output import write_text, written_together
from harness.settings import instantiate
from harness.trace import MAX_TIME_S, TraceMeta, write_trace


def _openb_pods(paths: list[str]) -> ImportResult:
    from harness.importers.openb import read_openb_pods

    table = read_openb_pods(paths[0])
    meta = TraceMeta(source=f"Alibaba openb v2023 {Path(paths[0]).name}",
                     licence="Alibaba clusterdata terms (research use)",
                     time_origin="first pod creation (seconds as published)",
                     description="one independent pod per row; see harness/importers/openb.py")
    return ImportResult(table, meta, "pods", table.num_rows)


def openb_cluster_config(path: str) -> dict:
    """The cluster config of an openb node list, its pools priced and booted like every other
    node list's (`import openb --nodes` writes it; an experiment builds it from the list in place)."""
    from harness.importers.openb import read_openb_nodes

    cluster = read_openb_nodes(path)
    types = {t["name"]: t for t in cluster["node_types"]}
    for pool in cluster["pools"]:  # price and boot the pools like every other node list
        t = types[pool["node_type"]]
        pool.setdefault("price_on_demand",
                        node_price(t.get("gpu_model", ""), t.get("gpus", 0), t["cpu_milli"], t["memory_mib"]))
        pool.setdefault("boot_delay", boot_delay(t.get("gpus", 0)))
    return {"_target_": "harness.cluster.Cluster", **cluster}


def one_file(read: Callable[[str], ImportResult]) -> Callable[[list[str]], ImportResult]:
    """A reader of one source file as a `Format.read` (which is given the list of SOURCEs)."""
    return lambda paths: read(paths[0])


@dataclass(frozen=True)
class Format:
    read: Callable[[list[str]], ImportResult]
    nodes: Callable[[str], dict] | None
    many: bool  # accepts several source files
    sources: str  # what SOURCE is, for --help


def formats() -> dict[str, Format]:
    """The formats `loopbench import` reads, by name: a new importer adds its entry here."""
    from harness.importers import acme, alibaba_spot, dlrm, helios, pai, philly, workloads

    return {
        "openb": Format(_openb_pods, openb_cluster_config, False, "openb_pod_list_*.csv; nodes: openb_node_list_*.csv"),
        "pai": Format(pai.read_pai, pai.read_pai_machines, True,
                      "pai_task_table.csv [pai_job_table.csv]; nodes: pai_machine_spec.csv"),
        "philly": Format(philly.read_philly, philly.read_philly_machines, True,
                         "cluster_job_log [more parts]; nodes: cluster_machine_list"),
        "helios": Format(one_file(helios.read_helios), None, False, "cluster_log.csv"),
        "acme": Format(one_file(acme.read_acme), None, False, "trace_seren.csv or trace_kalos.csv"),
        "alibaba_spot": Format(one_file(alibaba_spot.read_spot_jobs), alibaba_spot.read_spot_nodes, False,
                               "job_info_df.csv; nodes: node_info_df.csv"),
        "dlrm": Format(one_file(dlrm.read_dlrm), None, False, "disaggregated_DLRM_trace.csv"),
        "workloads": Format(workloads.read_workloads, None, True,
                            "Pod, PodGroup and Workload manifests (YAML or JSON as kubectl prints them)"),
    }


def _parser(formats: dict[str, Format]) -> argparse.ArgumentParser:
    epilog = "formats:\n" + "\n".join(f"  {name:13s} {f.sources}" for name, f in formats.items())
    epilog += f"\n  {'azure-llm':13s} {AZURE_SOURCES} (services; its flags: loopbench import azure-llm --help)"
    epilog += f"\n  {'dra':13s} {DRA_SOURCES} (devices; its flags: loopbench import dra --help)"
    epilog += (f"\n  {'kubernetes':13s} {KUBERNETES_SOURCES} (a cluster and a trace; its flags: "
               "loopbench import kubernetes --help)")
    p = argparse.ArgumentParser(prog="loopbench import", description=__doc__.split("\n")[0], epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("format", choices=sorted(formats))
    p.add_argument("sources", nargs="*", metavar="SOURCE")
    p.add_argument("-o", "--output", metavar="TRACE.parquet", help="canonical trace to write")
    p.add_argument("--nodes", metavar="NODELIST", help="the format's node list, to write a cluster YAML")
    p.add_argument("--cluster-out", metavar="CLUSTER.yaml", help="default: TRACE.cluster.yaml beside -o")
    p.add_argument("--autoscaled", action="store_true", help="write an autoscaled cluster derived from the node list")
    p.add_argument("--window", metavar="START:END", help="keep jobs submitted in [START, END) seconds "
                   "(suffix s/m/h/d; either side may be empty), shifted to start at 0")
    p.add_argument("--compress", type=float, metavar="F", help="divide submit times by F")
    p.add_argument("--compress-durations", action="store_true", help="with --compress, divide durations too")
    p.add_argument("--scale", type=float, metavar="F", help="F times the jobs (sample below 1, replicate above)")
    p.add_argument("--remap", action="append", default=[], metavar="OLD=NEW", help="rename a GPU model (repeatable)")
    p.add_argument("--inflate", type=float, metavar="RATIO", help="append jobs drawn with replacement until "
                   "requested GPUs reach RATIO x the cluster's GPUs (the FGD paper's method)")
    p.add_argument("--inflate-cluster", metavar="CLUSTER.yaml", help="cluster for --inflate (default: the --nodes one)")
    p.add_argument("--seed", type=int, default=0, help="seed of --scale and --inflate (default 0)")
    p.add_argument("--transforms", metavar="STEPS.yaml", help="more transforms, as a Hydra-instantiable list")
    return p


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(text: str, flag: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    unit = _UNITS.get(text[-1])
    try:
        return float(text[:-1]) * unit if unit else float(text)
    except ValueError:
        raise ConfigError(flag, f"not a time: {text!r} (seconds, or a number with s/m/h/d)") from None


def _steps(args, cluster: dict | None) -> list[Callable[[pa.Table], pa.Table]]:
    steps: list[Callable[[pa.Table], pa.Table]] = []
    if args.window:
        if ":" not in args.window:
            raise ConfigError("--window", f"expected START:END, got {args.window!r}")
        start, end = (_seconds(s, "--window") for s in args.window.split(":", 1))
        steps.append(tf.Window(start or 0.0, end))
    if args.compress is not None:
        steps.append(tf.Compress(args.compress, args.compress_durations))
    if args.scale is not None:
        steps.append(tf.Scale(args.scale, args.seed))
    if args.remap:
        pairs = [r.split("=", 1) for r in args.remap]
        bad = [r for r, pr in zip(args.remap, pairs, strict=True) if len(pr) != 2 or not pr[0] or not pr[1]]
        if bad:
            raise ConfigError("--remap", f"expected OLD=NEW, got {bad[0]!r}")
        steps.append(tf.RemapModels(dict(pairs)))
    if args.inflate is not None:
        target = args.inflate_cluster or cluster
        if target is None:
            raise ConfigError("--inflate", "needs a cluster: --nodes NODELIST or --inflate-cluster CLUSTER.yaml")
        steps.append(tf.Inflate(args.inflate, target, args.seed))
    if args.transforms:
        from omegaconf import OmegaConf

        try:
            extra = instantiate(OmegaConf.load(args.transforms), "")
        except LoopbenchError as exc:  # a _target_ refused, or a step's own rule
            raise ConfigError(f"--transforms {args.transforms}", str(exc)) from None
        except Exception as exc:  # Hydra's wrapping of what a step's constructor raised
            cause = exc.__cause__ or exc
            if isinstance(cause, LoopbenchError):
                raise ConfigError(f"--transforms {args.transforms}", str(cause)) from None
            raise ConfigError(f"--transforms {args.transforms}", f"cannot instantiate: {cause}") from None
        steps.extend(extra if isinstance(extra, list) else [extra])
    return steps


def _value(v) -> str:
    """A step parameter for the summary; a cluster is shown by its name."""
    if isinstance(v, Cluster):
        return v.name
    if isinstance(v, dict) and "node_types" in v:
        return str(v.get("name", "cluster"))
    return str(v)


def _describe(step) -> str:
    return f"{type(step).__name__}({', '.join(f'{k}={_value(v)}' for k, v in vars(step).items())})"


def _jobs(table: pa.Table) -> int:
    return pa.compute.count_distinct(table.column("job_id")).as_py()


def _summary(fmt: str, sources: list[str], r: ImportResult) -> list[str]:
    lines = [f"loopbench import {fmt}: {', '.join(sources)}",
             f"  rows read     {r.rows_read:>12,} {r.unit}",
             f"  rows kept     {r.rows_kept:>12,} {r.unit} -> {r.table.num_rows:,} pods, {_jobs(r.table):,} jobs"]
    dropped = sum(r.dropped.values())
    lines.append(f"  rows dropped  {dropped:>12,}")
    lines += [f"    {n:>12,}  {reason}" for reason, n in r.dropped.most_common()]
    if r.notes:
        lines.append("  adjusted (kept):")
        lines += [f"    {n:>12,}  {reason}" for reason, n in r.notes.most_common()]
    return lines


def _cluster_yaml(config: dict, fmt: str, nodes: str, autoscaled: bool) -> str:
    Cluster(**{k: v for k, v in config.items() if k != "_target_"})  # refuse a config a replay could not load
    kind = ("autoscaled cluster derived from the inventory (pools from 0 to the inventory's count; "
            "prices and boot delays: harness/importers/common.py)" if autoscaled else
            "static inventory (fixed-size pools, autoscaling off)")
    head = f"# Generated by `loopbench import {fmt} --nodes {nodes}`: {kind}.\n"
    return head + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=110)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # also through symlinks and hard links
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: list[tuple[str, str | None]], inputs: list[str], command: str = "import") -> None:
    """Refuse, before anything is written, an output (flag, path) that is an input of this
    command, a directory, or the other output."""
    given = [(flag, path) for flag, path in outputs if path]
    for flag, path in given:
        if os.path.isdir(path):
            raise ConfigError(flag, f"{path}: is a directory; give a file to write")
        for src in inputs:
            if _same_file(path, src):
                raise ConfigError(flag, f"{path}: is an input of this {command} ({src}); write elsewhere")
    if len(given) == 2 and _same_file(given[0][1], given[1][1]):
        raise ConfigError(given[1][0], f"{given[1][1]}: is also the trace output (-o); give another file")


AZURE_SOURCES = "AzureLLMInferenceTrace_code.csv AzureLLMInferenceTrace_conv.csv ..."


def _azure_parser() -> argparse.ArgumentParser:
    from harness.importers import azure_llm as az

    m = az.ReplicaModel()
    p = argparse.ArgumentParser(prog="loopbench import azure-llm", description=(
        "Azure LLM inference trace 2023 -> services and their demand: X.parquet (no pods), "
        "X.services.parquet, X.demand.parquet. One service per file (named by the file's last _ part); "
        "the replica model is harness/importers/azure_llm.py's docstring."))
    p.add_argument("sources", nargs="+", metavar="SOURCE", help=AZURE_SOURCES)
    p.add_argument("-o", "--output", required=True, metavar="TRACE.parquet", help="trace to write (its pods: none)")
    p.add_argument("--window-s", type=float, default=az.WINDOW_S,
                   help=f"demand window, seconds (default {az.WINDOW_S:g})")
    p.add_argument("--prefill-tps", type=float, default=m.prefill_tokens_per_s,
                   help=f"prompt tokens/s one replica processes (default {m.prefill_tokens_per_s:g})")
    p.add_argument("--decode-tps", type=float, default=m.decode_tokens_per_s,
                   help=f"generated tokens/s one replica produces (default {m.decode_tokens_per_s:g})")
    p.add_argument("--gpus", type=int, default=m.gpus, help=f"NVLink GPUs per replica (default {m.gpus})")
    p.add_argument("--gpu-model", default=m.gpu_model, help=f"GPU model of a replica (default {m.gpu_model})")
    p.add_argument("--cold-start-s", type=float, default=m.cold_start_s,
                   help=f"image pull + model load, seconds (default {m.cold_start_s:g})")
    p.add_argument("--min-replicas", type=int, default=1, help="per service (default 1)")
    p.add_argument("--max-replicas", type=int, help="per service (default: twice the busiest window's need)")
    p.add_argument("--copies", type=int, default=1, help="N time-shifted copies of each service, name-1..name-N")
    p.add_argument("--repeat", type=int, default=1, help="play the span K times in a row")
    p.add_argument("--jitter", type=float, default=0.1, help="spread of the repeats' per-window noise (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="seed of --copies and --repeat (default 0)")
    return p


def _azure_llm(argv: list[str]) -> int:
    """`loopbench import azure-llm`: requests -> services and demand, scaled up by the seeded
    transforms of harness/services/transforms.py; every request accounted for."""
    from harness.importers import azure_llm as az
    from harness.services import transforms as stf
    from harness.services.trace import ServicesMeta, service_paths, write_services

    args = _azure_parser().parse_args(argv)
    check_outputs([("-o", args.output)], args.sources)
    spath, dpath = service_paths(args.output)
    check_outputs([("-o", str(spath)), ("-o", str(dpath))], args.sources)
    per_gpu = az.ReplicaModel()
    model = az.ReplicaModel(prefill_tokens_per_s=args.prefill_tps, decode_tokens_per_s=args.decode_tps,
                            gpus=args.gpus, gpu_model=args.gpu_model, cold_start_s=args.cold_start_s,
                            cpu_milli=per_gpu.cpu_milli // per_gpu.gpus * args.gpus,
                            memory_mib=per_gpu.memory_mib // per_gpu.gpus * args.gpus)
    r = az.read_azure_llm(args.sources, window_s=args.window_s, model=model, min_replicas=args.min_replicas,
                          max_replicas=args.max_replicas)
    lines = [f"loopbench import azure-llm: {', '.join(args.sources)}",
             f"  rows read     {r.rows_read:>12,} requests",
             f"  rows kept     {r.rows_kept:>12,} requests",
             f"  rows dropped  {sum(r.dropped.values()):>12,}"]
    lines += [f"    {n:>12,}  {reason}" for reason, n in r.dropped.most_common()]
    for name, st in r.stats.items():
        lines.append(f"  service {name}: {st['requests']:,} requests, {st['context']:,.0f} context + "
                     f"{st['generated']:,.0f} generated tokens; busiest {args.window_s:g} s window "
                     f"{st['peak']:,.0f} tokens/s = {st['peak'] / model.decode_tokens_per_s:.2f} replicas")
    services, demand, meta = r.services, r.demand, r.meta
    steps: list[stf.Copies | stf.Repeat] = [stf.Copies(args.copies, args.seed),
                                            stf.Repeat(args.repeat, args.jitter, args.seed)]
    for step in steps:
        services, demand = step(services, demand)
    done = [s for s in steps if s.changes]
    if done:
        meta = ServicesMeta(meta.source, meta.licence, meta.time_origin, meta.demand_unit,
                            f"{meta.description}; transforms: {'; '.join(_describe(s) for s in done)}")
        lines += [f"  {_describe(s)}" for s in done]
    pods = TraceMeta(meta.source, meta.licence, meta.time_origin, "no pods: a services-only workload (see "
                     f"{spath.name}, {dpath.name})")
    from harness.trace import table_from_columns

    empty = table_from_columns({"pod_id": [], "job_id": [], "submit_s": [], "cpu_milli": [], "memory_mib": [],
                                "gpu_count": [], "gpu_milli": []})
    with written_together():
        write_services(services, demand, args.output, meta)
        write_trace(empty, args.output, pods, allow_empty=True)
    end = pa.compute.max(demand.column("start_s")).as_py()
    lines.append(f"  wrote {args.output} (no pods), {spath.name}: {services.num_rows:,} services, "
                 f"{dpath.name}: {demand.num_rows:,} windows over {end / 3600:.2f} h")
    print("\n".join(lines))
    return 0


DRA_SOURCES = "DeviceClass, ResourceSlice, ResourceClaimTemplate, ResourceClaim manifests (resource.k8s.io/v1)"


def _dra_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loopbench import dra", description=(
        "DRA manifests (resource.k8s.io/v1, YAML or JSON as kubectl get -o yaml prints them) -> one YAML of "
        "device classes, the devices of each node type and the claims, every object and CEL selector checked. "
        "ResourceSlices are grouped by spec.nodeName; a node's type is its --node-type, else its name without "
        "a trailing -<digits>. See harness/importers/dra.py."))
    p.add_argument("sources", nargs="+", metavar="FILE", help=DRA_SOURCES)
    p.add_argument("-o", "--out", required=True, metavar="OUT.yaml", help="the YAML to write (atomically)")
    p.add_argument("--node-type", action="append", default=[], metavar="NODE=TYPE",
                   help="the node type of a node (repeatable); default: the node name without a trailing -<digits>")
    return p


def _dra(argv: list[str]) -> int:
    """`loopbench import dra`: the manifests checked and written as one `dra:` YAML."""
    from harness.importers import dra

    args = _dra_parser().parse_args(argv)
    check_outputs([("--out", args.out)], args.sources)
    inp = dra.read_dra(args.sources, dra.parse_node_types(args.node_type))
    if dra.is_empty(inp):
        raise dra.no_input(args.sources)
    flags = "".join(f" --node-type {t}" for t in args.node_type)
    head = f"# Generated by `loopbench import dra {' '.join(args.sources)}{flags}` (harness/importers/dra.py).\n"
    write_text(dra.dump(inp, head), Path(args.out))
    print("\n".join([f"loopbench import dra: {', '.join(args.sources)}", *inp.summary(), f"  wrote {args.out}"]))
    return 0


KUBERNETES_SOURCES = "what kubectl get nodes,pods -A -o json (or -o yaml) prints, one file or several"


def _kubernetes_parser() -> argparse.ArgumentParser:
    from harness.importers.kubernetes import NODEPOOL_MAX_NODES

    p = argparse.ArgumentParser(prog="loopbench import kubernetes", description=(
        "A live cluster's nodes and pods (kubectl get nodes,pods -A -o json) -> a cluster YAML (node types "
        "and pools from the nodes) and a trace (one row per pod: requests, job, priority, queue, submit and "
        "run times from the pods' status). Among the FILEs, Kueue ResourceFlavors, ClusterQueues, LocalQueues "
        "and Cohorts become the cluster's kueue section, Karpenter NodePools (with --instance-types) and "
        "Cluster Autoscaler's --nodes flags (its Deployment) become pools. What is assumed or ignored is listed. "
        "See harness/importers/kubernetes.py."))
    p.add_argument("sources", nargs="+", metavar="FILE", help=KUBERNETES_SOURCES)
    p.add_argument("--out-cluster", required=True, metavar="CLUSTER.yaml", help="the cluster config to write")
    p.add_argument("--out", required=True, metavar="TRACE.parquet", help="the trace to write")
    p.add_argument("--running-duration-s", type=float, metavar="S",
                   help="run time of a Running pod (default: it runs to the end of the replay)")
    p.add_argument("--autoscaled", action="store_true",
                   help="pools from 0 to the nodes seen, autoscaling on (default: fixed size, autoscaling off)")
    p.add_argument("--name", help="the cluster's name (default: the first FILE's name)")
    p.add_argument("--instance-types", metavar="TYPES.yaml",
                   help="the shapes and prices of the instance types the input's Karpenter NodePools may buy "
                        "(format: harness/importers/karpenter_manifests.py)")
    p.add_argument("--nodepool-max-nodes", type=int, default=NODEPOOL_MAX_NODES, metavar="N",
                   help="the most nodes of one NodePool offering its limits do not bound lower "
                        f"(default {NODEPOOL_MAX_NODES})")
    return p


def _kubernetes(argv: list[str]) -> int:
    """`loopbench import kubernetes`: nodes to a cluster YAML, pods to a trace, both checked first."""
    from harness.importers import kubernetes as k8s

    args = _kubernetes_parser().parse_args(argv)
    s = args.running_duration_s
    if s is not None and not (math.isfinite(s) and 0 <= s <= MAX_TIME_S):
        raise ConfigError("--running-duration-s", f"must be seconds in [0, {MAX_TIME_S:.0f}], got {s:g}")
    if not 1 <= args.nodepool_max_nodes <= MAX_POOL_NODES:
        raise ConfigError("--nodepool-max-nodes", f"must be in [1, {MAX_POOL_NODES:,}], got {args.nodepool_max_nodes}")
    check_outputs([("--out", args.out), ("--out-cluster", args.out_cluster)],
                  args.sources + ([args.instance_types] if args.instance_types else []))
    inp = k8s.read_kubernetes(args.sources, running_duration_s=s, autoscaled=args.autoscaled, name=args.name,
                              instance_types=args.instance_types, nodepool_max_nodes=args.nodepool_max_nodes)
    flags = (f"{f' --running-duration-s {s:g}' if s is not None else ''}{' --autoscaled' * args.autoscaled}"
             f"{f' --name {args.name}' if args.name else ''}"
             f"{f' --instance-types {args.instance_types}' if args.instance_types else ''}")
    head = (f"# Imported from a Kubernetes cluster by `loopbench import kubernetes {' '.join(args.sources)}{flags}`"
            " (harness/importers/kubernetes.py).\n")
    if inp.overrides:
        head += f"# Replay with: {' '.join(inp.overrides)}\n"
    write_trace(inp.result.table, args.out, inp.result.meta)
    write_text(k8s.cluster_yaml(inp.cluster, head), Path(args.out_cluster))
    print("\n".join([f"loopbench import kubernetes: {', '.join(args.sources)}", *inp.summary(),
                     f"  wrote {args.out_cluster} and {args.out}"]))
    return 0


def run(argv: list[str]) -> int:
    if argv[:1] == ["azure-llm"]:
        return _azure_llm(argv[1:])
    if argv[:1] == ["kubernetes"]:
        return _kubernetes(argv[1:])
    if argv[:1] == ["dra"]:
        return _dra(argv[1:])
    known = formats()
    args = _parser(known).parse_args(argv)
    fmt = known[args.format]
    if not args.sources and not args.nodes:
        raise ConfigError("loopbench import", "give SOURCE files, --nodes NODELIST, or both")
    if args.sources and not args.output:
        raise ConfigError("-o", "where to write the trace: -o TRACE.parquet")
    if len(args.sources) > 1 and not fmt.many:
        raise ConfigError("SOURCE", f"format {args.format} reads one file ({fmt.sources})")
    if args.nodes and fmt.nodes is None:
        raise ConfigError("--nodes", f"format {args.format} publishes no node list")
    out = args.cluster_out or (str(Path(args.output).with_suffix("")) + ".cluster.yaml" if args.output else None)
    check_outputs([("-o", args.output if args.sources else None), ("--cluster-out", out if args.nodes else None)],
                   [p for p in (*args.sources, args.nodes, args.inflate_cluster, args.transforms) if p])
    cluster = None
    if args.nodes:
        assert fmt.nodes is not None  # refused above
        cluster = fmt.nodes(args.nodes)
        if args.autoscaled:
            cluster = autoscaled_cluster(cluster)
        if out is None:
            raise ConfigError("--cluster-out", "where to write the cluster: --cluster-out CLUSTER.yaml")
        write_text(_cluster_yaml(cluster, args.format, args.nodes, args.autoscaled), Path(out))
        n_nodes = sum(p["max_size"] for p in cluster["pools"])
        print(f"loopbench import {args.format}: {args.nodes} -> {out} "
              f"({len(cluster['pools'])} pools, up to {n_nodes:,} nodes, "
              f"autoscaling {'on' if args.autoscaled else 'off'})")
    steps = _steps(args, cluster)
    if not args.sources:
        if steps:
            raise ConfigError("transforms", "transforms need SOURCE files to transform")
        return 0
    result = fmt.read(args.sources)
    lines = _summary(args.format, args.sources, result)
    table = result.table
    for step in steps:
        before = table.num_rows
        table = step(table)
        lines.append(f"  {_describe(step)}: {before:,} -> {table.num_rows:,} pods")
    meta = result.meta
    if steps:
        meta = TraceMeta(meta.source, meta.licence, meta.time_origin,
                         f"{meta.description}; transforms: {'; '.join(_describe(s) for s in steps)}")
    if table.num_rows == 0:
        raise TraceError(args.output, "no pods left to write after the transforms")
    write_trace(table, args.output, meta)
    lines.append(f"  wrote {args.output}: {table.num_rows:,} pods, {_jobs(table):,} jobs")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `loopbench import`; a bad input is one clear line and exit code 1."""
    try:
        return run(list(sys.argv[1:] if argv is None else argv))
    except LoopbenchError as exc:
        print(f"loopbench import: error: {exc}", file=sys.stderr)
        return 1
