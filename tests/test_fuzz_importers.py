"""Every importer fuzzed (hypothesis): random bytes, and the fixture files with cells, lines
and bytes mutated. Whatever the input, an importer either returns a result that
`loopbench import` can write (the canonical trace validates, the node list loads as a
cluster) or raises a `LoopbenchError` naming the file; nothing else escapes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.errors import LoopbenchError, TraceError
from harness.importers import philly
from harness.importers.acme import read_acme
from harness.importers.alibaba_spot import read_spot_jobs, read_spot_nodes
from harness.importers.common import autoscaled_cluster
from harness.importers.dlrm import read_dlrm
from harness.importers.helios import read_helios
from harness.importers.openb import read_openb_nodes, read_openb_pods
from harness.importers.pai import read_pai, read_pai_machines
from harness.trace import validate_table

# pyarrow decodes a malformed row's text as UTF-8 before calling our invalid-row handler; on
# non-UTF-8 bytes that decode fails inside pyarrow ("Exception ignored in on_invalid"), and the
# parse still ends in our TraceError, which is what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

FIX = Path(__file__).parent / "fixtures"
SETTINGS = settings(max_examples=int(os.environ.get("LOOPBENCH_FUZZ_EXAMPLES", 60)), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _cluster(config: dict) -> Cluster:
    Cluster(**{k: v for k, v in autoscaled_cluster(config).items() if k != "_target_"})
    return Cluster(**{k: v for k, v in config.items() if k != "_target_"})


#: importer -> (fixture it mutates, file name to write under, reader)
IMPORTERS = {
    "helios": ("helios/cluster_log.csv", "cluster_log.csv", read_helios),
    "acme_seren": ("acme/trace_seren.csv", "trace_seren.csv", read_acme),
    "acme_kalos": ("acme/trace_kalos.csv", "trace_kalos.csv", read_acme),
    "pai_tasks": ("pai/pai_task_table.csv", "pai_task_table.csv", lambda p: read_pai([p])),
    "pai_jobs": ("pai/pai_job_table.csv", "pai_job_table.csv",
                 lambda p: read_pai([FIX / "pai" / "pai_task_table.csv", p])),
    "pai_machines": ("pai/pai_task_table.csv", "pai_machine_spec.csv", lambda p: _cluster(read_pai_machines(p))),
    "philly_jobs": ("philly/cluster_job_log", "cluster_job_log", lambda p: philly.read_philly([p])),
    "philly_machines": ("philly/cluster_machine_list", "cluster_machine_list",
                        lambda p: _cluster(philly.read_philly_machines(p))),
    "spot_jobs": ("alibaba_spot/job_info_df.csv", "job_info_df.csv", read_spot_jobs),
    "spot_nodes": ("alibaba_spot/node_info_df.csv", "node_info_df.csv", lambda p: _cluster(read_spot_nodes(p))),
    "dlrm": ("dlrm/disaggregated_DLRM_trace.csv", "disaggregated_DLRM_trace.csv", read_dlrm),
    "openb_pods": ("openb/pods.csv", "openb_pod_list_fuzz.csv", read_openb_pods),
    "openb_nodes": ("openb/nodes.csv", "openb_node_list_fuzz.csv", lambda p: _cluster(read_openb_nodes(p))),
}
# pai_machines mutates a machine list of its own (no fixture ships one)
MACHINE_SPEC = b"m1,V100,96,512,8\nm2,T4,64,256,2\nm3,CPU,96,512,0\nm4,MISC,96,512,8\n"

#: cell values that break parsers: empty, nulls, signs, overflow, non-numbers, separators, quotes
NASTY = ["", "NA", "nan", "-1", "0", "-0", "1e309", "-inf", "inf", "1e15", "9" * 40, "0.5", "2.5", "abc",
         "\u0661\u0662", " 7 ", '"', '""', ",", "\t", "\\", "[", "{", "null", "True", "2023-02-30 00:00:00",
         "2023-03-01 00:00:00+25:00", "1970-01-01 00:00:00", "9999-12-31 23:59:59+08:00", "\x00", "\u00e9",
         "1,2", "GPU", "HP", "Spot", "CN", "HN", "MISC", "V100|T4", "-", "+", ".", "e5"]


def source_bytes(name: str) -> bytes:
    return MACHINE_SPEC if name == "pai_machines" else (FIX / IMPORTERS[name][0]).read_bytes()


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """The fixture with one to three mutations: a cell replaced, a line dropped, duplicated or
    cut short, bytes flipped or inserted, the file truncated."""
    lines = data.split(b"\n")
    for _ in range(draw(st.integers(1, 3))):
        lines = lines or [b""]
        kind = draw(st.sampled_from(["cell", "cell", "cell", "drop", "dup", "cut", "flip", "insert", "truncate"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        line = lines[i] if lines else b""
        if kind == "cell":
            sep = b"," if b"," in line else b" "
            cells = line.split(sep)
            j = draw(st.integers(0, len(cells) - 1))
            value = draw(st.one_of(st.sampled_from(NASTY), st.text(max_size=12)))
            if b'"' in cells[j] and sep == b" ":  # JSON: keep the quotes, change the value
                value = f'"{value}"'
            cells[j] = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
            lines[i] = sep.join(cells)
        elif kind == "drop" and lines:
            del lines[i]
        elif kind == "dup" and lines:
            lines.insert(i, line)
        elif kind == "cut":
            lines[i] = line[: draw(st.integers(0, len(line)))]
        elif kind == "flip" and line:
            k = draw(st.integers(0, len(line) - 1))
            lines[i] = line[:k] + bytes([draw(st.integers(0, 255))]) + line[k + 1:]
        elif kind == "insert":
            k = draw(st.integers(0, len(line)))
            lines[i] = line[:k] + draw(st.binary(min_size=1, max_size=8)) + line[k:]
        elif kind == "truncate":
            joined = b"\n".join(lines)
            lines = joined[: draw(st.integers(0, len(joined)))].split(b"\n")
    return b"\n".join(lines)


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory(prefix="loopbench-fuzz-") as d:
        yield Path(d)


def run_importer(name: str, data: bytes, scratch: Path) -> str:
    """Feed `data` to the importer; return "ok" or "refused", fail on any other exception."""
    _, filename, read = IMPORTERS[name]
    path = scratch / name / filename
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    try:
        result = read(path)
        if hasattr(result, "table"):  # what `loopbench import` does next: validate and write
            validate_table(result.table, str(scratch / "out.parquet"))
            assert result.rows_read >= result.rows_kept >= 0
        return "ok"
    except LoopbenchError as exc:
        text = str(exc)
        assert "\n" not in text, text
        if isinstance(exc, TraceError):
            assert exc.file in (str(path), str(scratch / "out.parquet"), f"{FIX / 'pai' / 'pai_task_table.csv'}, {path}")
        return "refused"


@pytest.mark.parametrize("name", sorted(IMPORTERS))
def test_fixture_imports_cleanly(name, scratch):
    assert run_importer(name, source_bytes(name), scratch) == "ok"


@pytest.mark.parametrize("name", sorted(IMPORTERS))
@SETTINGS
@given(data=st.data())
def test_mutated_fixture_never_crashes(name, scratch, data):
    run_importer(name, data.draw(mutated(source_bytes(name))), scratch)


@pytest.mark.parametrize("name", sorted(IMPORTERS))
@settings(max_examples=int(os.environ.get("LOOPBENCH_FUZZ_EXAMPLES", 60)) // 4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode)))
def test_random_bytes_never_crash(name, scratch, blob):
    run_importer(name, blob, scratch)
