"""The package's layers, as docs/architecture.md draws them: each module imports only modules of
its own layer or the ones below, and no import circle exists, even counting the imports made for
annotations only (under TYPE_CHECKING) or inside a function. A new module must be given a layer
here (and in the drawing)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "harness"

#: bottom first; a module's layer is the first whose pattern matches its dotted name
LAYERS: list[tuple[str, str]] = [
    ("codes", r"harness(\.errors|\.status|\.output|\.progress|\.description|\.hooks|\.sealed)?"),
    ("data", r"harness\.(dra\.(resources|cel|translate|allocator|layer|taints)|dra|trace|node_type|cluster|workload|transforms|generate|generated|settings|kueue\.queues|importers(\..*)?|exporters(\..*)?|run_timeline"
             r"|services(\.(trace|workload|transforms))?)"),
    ("cluster state and scoring", r"harness\.(dra\.utilization|node_devices|state|cloud|packer|filters|scores|fragmentation"
                                  r"|idle_rates|whatif)"),
    ("simulation", r"harness\.(sim|decisions|engine|fleet|job_queue|job_backoff|pending_pods|ledger|metrics|view|quiet|eviction|taint_eviction|dra\.writeback|admission|services\.(metrics|replicaset|engine))"),
    ("scheduler", r"harness\.scheduler(\..*)?"),
    ("autoscalers", r"harness\.(autoscalers(\..*)?|services\.buffers)"),
    ("loops", r"harness\.(loops(\..*)?|kueue(\..*)?|services\.(loop|replicas))"),
    ("runs", r"harness\.(replay|replay_progress|openb_packing|config|work|summary|progress|provenance|kernel_cache"
             r"|compile_time|hydra_builds)"),
    ("commands", r"harness\.(cli|compare|results|report|gantt|grid|sweep_summary|explain)"),
]


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(ROOT.rglob("*.py")):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


MODULES = modules()


def layer(module: str) -> int:
    for i, (_, pattern) in enumerate(LAYERS):
        if re.fullmatch(pattern, module):
            return i
    raise AssertionError(f"{module} has no layer: give it one in tests/test_layers.py and docs/architecture.md")


def imports(module: str) -> set[str]:
    """The package's modules `module` imports, anywhere in its file."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        out |= {n for n in names if n in MODULES and n != module}
    return out


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_has_a_layer():
    for m in MODULES:
        layer(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_its_own(module):
    above = sorted(t for t in GRAPH[module] if layer(t) > layer(module))
    assert not above, (f"{module} ({LAYERS[layer(module)][0]}) imports "
                       + ", ".join(f"{t} ({LAYERS[layer(t)][0]})" for t in above))


def test_no_import_circle():
    """Tarjan's strongly connected components over the whole import graph: none has two modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                circles.append(sorted([v, *component]))

    for m in sorted(GRAPH):
        if m not in index:
            visit(m)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_checks_find_a_planted_upward_import_and_circle(monkeypatch):
    """The rules can fail: the state importing the scheduler is caught, and so is a circle."""
    real = GRAPH
    graph = {**real, "harness.state": GRAPH["harness.state"] | {"harness.scheduler.framework"}}
    monkeypatch.setitem(globals(), "GRAPH", graph)
    with pytest.raises(AssertionError, match="harness.state .* imports harness.scheduler.framework"):
        test_no_module_imports_a_layer_above_its_own("harness.state")
    circle = {**real, "harness.filters": real["harness.filters"] | {"harness.scores"},
              "harness.scores": real["harness.scores"] | {"harness.filters"}}
    monkeypatch.setitem(globals(), "GRAPH", circle)
    with pytest.raises(AssertionError, match="harness.filters <-> harness.scores"):
        test_no_import_circle()
