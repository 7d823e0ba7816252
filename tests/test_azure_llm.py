"""The Azure LLM inference 2023 importer (harness/importers/azure_llm.py, `loopbench import
azure-llm`): demand per window computed by hand on tiny CSVs written here, the real files
where /work/shared/traces/azure-llm-2023 is present, and malformed inputs."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from harness.errors import ConfigError, TraceError
from harness.importers.azure_llm import ReplicaModel, read_azure_llm, service_name
from harness.importers.cli import main
from harness.services.trace import read_services, service_paths
from harness.trace import read_trace

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces" / "azure-llm-2023"  # ../shared from the root
CODE, CONV = REAL / "AzureLLMInferenceTrace_code.csv", REAL / "AzureLLMInferenceTrace_conv.csv"
needs_real = pytest.mark.skipif(not CODE.exists() or not CONV.exists(),
                                reason=f"the Azure LLM 2023 trace (AzurePublicDataset's AzureLLMInferenceTrace_"
                                       f"code.csv and _conv.csv) is not in {REAL}")

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
#: decode / prefill = 0.1: a prompt token counts a tenth of a generated one
MODEL = ReplicaModel(prefill_tokens_per_s=20_000.0, decode_tokens_per_s=2_000.0)


def write(tmp_path: Path, name: str, rows: str) -> str:
    path = tmp_path / f"AzureLLMInferenceTrace_{name}.csv"
    path.write_text(HEADER + rows)
    return str(path)


@pytest.fixture
def tiny(tmp_path) -> list[str]:
    code = write(tmp_path, "code",
                 "2023-11-16 18:00:00.5000000,1000,10\n"   # t 0.5 s: window 0
                 "2023-11-16 18:00:09.9999999,2000,20\n"   # t 9.9999999 s: window 0
                 "2023-11-16 18:00:10.0000001,500,0\n"     # window 1
                 "2023-11-16 18:00:31.2500000,0,0\n"       # dropped: no tokens
                 ",100,5\n"                                # dropped: no TIMESTAMP
                 "2023-11-16 18:00:35.0000000,,5\n")       # dropped: a token count is missing
    conv = write(tmp_path, "conv",
                 "2023-11-16 18:00:05.1234567,400,100\n"   # window 0
                 "2023-11-16 18:00:25,0,50\n")             # window 2 (no fraction digits)
    return [code, conv]


def test_tiny_trace_golden_demand_per_window(tiny):
    """By hand, windows of 10 s from 18:00:00 (the first request, 18:00:00.5, floored):
    code w0 = (10 + 1000 x 0.1) + (20 + 2000 x 0.1) = 330 tokens -> 33.0 tokens/s;
    code w1 = 500 x 0.1 = 50 -> 5.0; code w2 = 0; conv w0 = 100 + 400 x 0.1 = 140 -> 14.0;
    conv w1 = 0; conv w2 = 50 -> 5.0; then one idle row (0) at 30 s for each service."""
    r = read_azure_llm(tiny, window_s=10.0, model=MODEL)
    d = r.demand
    rows = list(zip(d.column("service").to_pylist(), d.column("start_s").to_pylist(),
                    d.column("demand").to_pylist(), strict=True))
    expected = [("code", 0.0, 33.0), ("code", 10.0, 5.0), ("code", 20.0, 0.0), ("code", 30.0, 0.0),
                ("conv", 0.0, 14.0), ("conv", 10.0, 0.0), ("conv", 20.0, 5.0), ("conv", 30.0, 0.0)]
    assert [(s, t) for s, t, _ in rows] == [(s, t) for s, t, _ in expected]
    assert [v for _, _, v in rows] == pytest.approx([v for _, _, v in expected], abs=1e-9)
    assert r.rows_read == 8 and r.rows_kept == 5
    assert dict(r.dropped) == {"no TIMESTAMP": 1, "a token count is missing": 1,
                               "no tokens (context and generated both 0)": 1}
    s = r.services
    assert s.column("service").to_pylist() == ["code", "conv"]
    assert s.column("capacity_per_replica").to_pylist() == [2000.0, 2000.0]
    # busiest windows 33 and 14 tokens/s each need ceil(x / 2000) = 1 replica; twice that
    assert s.column("max_replicas").to_pylist() == [2, 2]
    assert s.column("gpu_count").to_pylist() == [4, 4] and s.column("gpus_same_nvlink").to_pylist() == [True, True]
    assert r.meta.time_origin.startswith("2023-11-16 18:00:00")


def test_window_length_is_a_parameter(tiny):
    """Windows of 20 s, by hand: code w0 = (330 + 50) / 20 = 19.0, w1 = 0; conv w0 = 140 / 20
    = 7.0, w1 = 50 / 20 = 2.5; idle rows at 40 s."""
    d = read_azure_llm(tiny, window_s=20.0, model=MODEL).demand
    assert d.column("start_s").to_pylist() == [0.0, 20.0, 40.0] * 2
    assert d.column("demand").to_pylist() == pytest.approx([19.0, 0.0, 0.0, 7.0, 2.5, 0.0])


def test_service_is_named_by_the_files_last_underscore_part():
    assert service_name("/x/AzureLLMInferenceTrace_code.csv") == "code"
    assert service_name("AzureLLMInferenceTrace_Conv.csv") == "conv"
    assert service_name("mine.csv") == "mine"


def test_cli_writes_no_pods_services_and_demand(tiny, tmp_path, capsys):
    out = tmp_path / "out" / "azure.parquet"
    assert main(["azure-llm", *tiny, "-o", str(out), "--decode-tps", "2000", "--prefill-tps", "20000",
                 "--cold-start-s", "90", "--gpus", "2"]) == 0
    text = capsys.readouterr().out
    assert "rows read                8 requests" in text and "rows dropped             3" in text
    assert read_trace(out, allow_empty=True)[0].num_rows == 0
    services, demand, meta = read_services(*service_paths(out))
    assert services.column("cold_start_s").to_pylist() == [90.0, 90.0]
    assert services.column("gpu_count").to_pylist() == [2, 2]
    assert services.column("cpu_milli").to_pylist() == [24000, 24000]  # 12 cores per GPU
    assert demand.column("demand").to_pylist()[:2] == pytest.approx([33.0, 5.0])
    assert meta.demand_unit.startswith("tokens/s") and meta.licence == "CC-BY-4.0"


def test_cli_transforms_are_applied_and_recorded(tiny, tmp_path, capsys):
    out = tmp_path / "azure.parquet"
    assert main(["azure-llm", *tiny, "-o", str(out), "--copies", "3", "--repeat", "2", "--seed", "5"]) == 0
    services, demand, meta = read_services(*service_paths(out))
    assert services.column("service").to_pylist() == ["code-1", "code-2", "code-3", "conv-1", "conv-2", "conv-3"]
    assert max(demand.column("start_s").to_pylist()) == 60.0  # the 30 s span played twice
    assert "Copies(n=3, seed=5); Repeat(k=2, jitter=0.1, seed=5)" in meta.description


@pytest.mark.parametrize("argv, key", [
    (["--window-s", "0"], "--window-s"),
    (["--decode-tps", "-1"], "--decode-tps"),
    (["--prefill-tps", "nan"], "--prefill-tps"),
    (["--decode-tps", "1e-300"], "--decode-tps"),  # every demand infinite, max_replicas cast from inf
    (["--prefill-tps", "1e-300"], "--prefill-tps"),  # was refused in the demand file's column
    (["--decode-tps", "1e12"], "--decode-tps"),
    (["--decode-tps", "0.001", "--prefill-tps", "0.001"], "--decode-tps"),  # 303,000 replicas in window 0
    (["--gpus", "0"], "--gpus"),
    (["--min-replicas", "3", "--max-replicas", "2"], "--max-replicas"),
    (["--copies", "0"], "--copies"),
    (["--repeat", "2", "--jitter", "-0.5"], "--jitter"),
])
def test_cli_bad_flags_are_one_line_errors_naming_the_flag(argv, key, tiny, tmp_path, capsys):
    assert main(["azure-llm", *tiny, "-o", str(tmp_path / "a.parquet"), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert key in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "a.parquet").exists()


def test_cli_refuses_to_overwrite_an_input(tiny, capsys):
    assert main(["azure-llm", *tiny, "-o", tiny[0]]) == 1
    assert "is an input of this import" in capsys.readouterr().err


MALFORMED = {
    "bad_month": ("2023-13-16 18:00:00.5,10,1\n", "TIMESTAMP", 1, "not a datetime"),
    "text_time": ("yesterday,10,1\n", "TIMESTAMP", 1, "not a datetime"),
    "text_tokens": ("2023-11-16 18:00:01,ten,1\n", "ContextTokens", 1, "not a number"),
    "negative_tokens": ("2023-11-16 18:00:01,10,-1\n", "GeneratedTokens", 1, "whole number of tokens >= 0"),
    "fractional_tokens": ("2023-11-16 18:00:01,10.5,1\n", "ContextTokens", 1, "whole number of tokens >= 0"),
    "infinite_tokens": ("2023-11-16 18:00:01,inf,1\n", "ContextTokens", 1, "whole number of tokens >= 0"),
    "year_9999": ("9999-11-16 18:00:01,10,1\n", "TIMESTAMP", 1, "a datetime outside 1677-09-22 .. 2262-04-11"),
    # as the trace writes its times, to the 100 ns: finer than any coarser unit parses
    "year_9999_to_100_ns": ("9999-11-16 18:00:01.6805900,10,1\n", "TIMESTAMP", 1,
                            "a datetime outside 1677-09-22 .. 2262-04-11"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_request_is_refused_with_file_column_row(name, tmp_path):
    line, column, row, rule = MALFORMED[name]
    path = write(tmp_path, "code", "2023-11-16 18:00:00.5,100,10\n" + line)
    with pytest.raises(TraceError) as err:
        read_azure_llm([path])
    e = err.value
    assert (e.file, e.column, e.row) == (path, column, row) and rule in e.rule, str(e)


def test_a_request_dated_a_century_away_is_refused_before_its_windows_are_made(tmp_path):
    """1900 and 2023 in 10 s windows: 388 million windows, refused with the span and both dates."""
    path = write(tmp_path, "code", "1900-11-16 18:00:00,100,10\n2023-11-16 18:00:01,1,1\n")
    with pytest.raises(TraceError) as err:
        read_azure_llm([path])
    e = err.value
    assert e.column == "TIMESTAMP" and "first 1900-11-16 18:00:00, last 2023-11-16 18:00:01" in e.rule
    assert "--window-s" in e.rule


def test_bad_timestamp_in_the_first_and_a_late_row_is_located(tmp_path):
    path = write(tmp_path, "code", "2023-11-16 18:00:00.5.5,100,10\n" + "2023-11-16 18:00:01,1,1\n" * 5)
    with pytest.raises(TraceError) as err:
        read_azure_llm([path])
    assert err.value.row == 0, str(err.value)
    path = write(tmp_path, "code", "2023-11-16 18:00:01,1,1\n" * 6 + "2023-11-16 25:00:00,1,1\n")
    with pytest.raises(TraceError) as err:
        read_azure_llm([path])
    assert err.value.row == 6, str(err.value)


def test_malformed_files_are_refused(tmp_path):
    missing = tmp_path / "x_code.csv"
    missing.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,1\n")
    with pytest.raises(TraceError, match="required column is missing") as err:
        read_azure_llm([str(missing)])
    assert err.value.column == "GeneratedTokens"
    with pytest.raises(TraceError, match="no data rows"):
        read_azure_llm([write(tmp_path, "empty", "")])
    with pytest.raises(TraceError, match="no requests left to import"):
        read_azure_llm([write(tmp_path, "idle", "2023-11-16 18:00:00,0,0\n,1,1\n")])
    with pytest.raises(TraceError, match="file does not exist"):
        read_azure_llm([str(tmp_path / "nope_code.csv")])
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "t_code.csv").write_text(HEADER + "2023-11-16 18:00:00,1,1\n")
    (b / "t_code.csv").write_text(HEADER + "2023-11-16 18:00:00,1,1\n")
    with pytest.raises(ConfigError, match="two files name service 'code'"):
        read_azure_llm([str(a / "t_code.csv"), str(b / "t_code.csv")])


@needs_real
def test_real_trace_every_request_accounted_and_demand_conserved():
    """SOURCES.md: 8,819 (code) and 19,366 (conv) requests over one hour. The demand times the
    window length sums back to every request's cost, summed here row by row with csv."""
    t0 = time.perf_counter()
    r = read_azure_llm([str(CODE), str(CONV)])
    wall = time.perf_counter() - t0
    assert r.rows_read == 8_819 + 19_366 == r.rows_kept
    assert {k: v["requests"] for k, v in r.stats.items()} == {"code": 8_819, "conv": 19_366}
    model = ReplicaModel()
    for name, path in (("code", CODE), ("conv", CONV)):
        with open(path, newline="") as f:
            cost = sum(model.demand(float(row["ContextTokens"]), float(row["GeneratedTokens"]))
                       for row in csv.DictReader(f))
        d = r.demand.filter(np.array(r.demand.column("service").to_pylist()) == name)
        assert float(np.sum(d.column("demand").to_numpy()) * 10.0) == pytest.approx(cost, rel=1e-9)
    starts = r.demand.column("start_s").to_numpy()
    assert 3500 < starts.max() < 3620  # one hour of 10 s windows, 18:15:46 to 19:14:19
    assert r.meta.time_origin.startswith("2023-11-16 18:15:46")
    assert wall < 2.0, f"the importer took {wall:.2f} s on 28k requests (vectorized: well under 2 s)"


@needs_real
def test_real_trace_through_the_cli_scaled_up(tmp_path, capsys):
    out = tmp_path / "azure.parquet"
    assert main(["azure-llm", str(CODE), str(CONV), "-o", str(out), "--copies", "20", "--repeat", "2"]) == 0
    services, demand, _ = read_services(*service_paths(out))
    assert services.num_rows == 40
    peaks = pl.from_arrow(demand).group_by("service").agg(pl.col("demand").max())["demand"]
    gpus = float((peaks / 2600.0).ceil().sum()) * 4
    assert gpus > 100, "forty copies should peak at well over a hundred GPUs between them"


def test_a_full_disk_while_writing_the_pods_table_leaves_none_of_the_three(tiny, tmp_path, monkeypatch, capsys):
    """The services and demand tables are written before the (empty) pods table: when that last
    write fails (ENOSPC, simulated), none of the three appears and no temp file is left."""
    import errno

    import pyarrow.parquet as pq

    from harness import trace

    write_table = pq.write_table

    def full(table, where, **kw):  # the pods table's temp file is .az.parquet.<random>.tmp
        if Path(where).name.startswith(".az.parquet."):
            raise OSError(errno.ENOSPC, "No space left on device")
        write_table(table, where, **kw)

    monkeypatch.setattr(trace.pq, "write_table", full)
    out = tmp_path / "out" / "az.parquet"
    assert main(["azure-llm", *tiny, "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"loopbench import: error: {out}: cannot write it: No space left on device"
    assert sorted(p.name for p in out.parent.iterdir()) == []
    monkeypatch.setattr(trace.pq, "write_table", write_table)
    assert main(["azure-llm", *tiny, "-o", str(out)]) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["az.demand.parquet", "az.parquet", "az.services.parquet"]
