"""Cluster Autoscaler's node groups in the form its users write them: the `--nodes=MIN:MAX:NAME`
flags of the cluster-autoscaler container (static node groups, e.g. AWS auto scaling groups
without auto-discovery), read from its Deployment as `kubectl -n kube-system get deployment
cluster-autoscaler -o yaml` prints it (any Deployment whose container passes `--nodes`; both
`--nodes=1:10:gpu` and `--nodes 1:10:gpu` are read).

A group's node is what Cluster Autoscaler builds its template from: a Node of the input whose
node-group label (harness/importers/kubernetes.py, POOL_LABELS) is NAME, a live one or, for a
group scaled to zero, a template Node annotated `loopbench.io/node-template: "true"` (its
shape and labels, not a node of the cluster). The group becomes that pool with min_size MIN and
max_size MAX, autoscaling on; its nodes must make one pool (one node type, zone and block, as a
group's nodes share one template). The container's other flags are listed, not read: loop
settings belong to the loop config (loop.autoscaler.*).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from harness.cluster import MAX_POOL_NODES
from harness.importers.workloads import Obj, get_field

NODES_FLAG = "--nodes"
_SPEC = re.compile(r"(\d+):(\d+):(\S+)")


@dataclass(frozen=True)
class NodeGroup:
    """One `--nodes` flag and where it was read, for refusals."""

    obj: Obj
    path: str
    name: str
    min_size: int
    max_size: int


def _flags(args: list[str]) -> list[tuple[int, str, str]]:
    """(index of the value, flag, value) of each `--flag=value` or `--flag value` of `args`."""
    out = []
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        flag, eq, value = arg.partition("=")
        if eq:
            out.append((i, flag, value))
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append((i + 1, flag, args[i + 1]))
        else:
            out.append((i, flag, ""))
    return out


def node_groups(deployment: Obj, ignored: Counter) -> list[NodeGroup]:
    """The node groups a Deployment's containers declare with `--nodes` (none: not Cluster Autoscaler)."""
    groups: list[NodeGroup] = []
    others: set[str] = set()
    for c, _ in enumerate(get_field(deployment, "spec.template.spec.containers", list, [])):
        for key in ("command", "args"):
            at = f"spec.template.spec.containers[{c}].{key}"
            args = get_field(deployment, at, list, [])
            if not all(isinstance(a, str) for a in args):
                raise deployment.refuse(at, f"expected a list of strings, got {args!r}")
            for i, flag, value in _flags(args):
                if flag != NODES_FLAG:
                    others.add(flag)
                    continue
                m = _SPEC.fullmatch(value)
                if m is None:
                    raise deployment.refuse(f"{at}[{i}]", f"--nodes must read MIN:MAX:NAME, got {value!r}")
                lo, hi = int(m[1]), int(m[2])
                if not lo <= hi <= MAX_POOL_NODES:
                    raise deployment.refuse(f"{at}[{i}]", f"need MIN <= MAX <= {MAX_POOL_NODES:,}, got {value!r}")
                if m[3] in {g.name for g in groups}:
                    raise deployment.refuse(f"{at}[{i}]", f"node group {m[3]!r} is given twice")
                groups.append(NodeGroup(deployment, f"{at}[{i}]", m[3], lo, hi))
    if groups:
        for flag in sorted(others):
            ignored[f"Cluster Autoscaler's {flag}: not read (the loop config's loop.autoscaler settings are)"] += 1
    return groups
