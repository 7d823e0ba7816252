"""Outputs never mix or lose results: an import never writes over its inputs, and a failed
write leaves no temp file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import output
from harness.importers.cli import main as import_main
from harness.output import write_text

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"


# ---- import outputs ----------------------------------------------------------------------------------

@pytest.fixture
def openb(tmp_path) -> tuple[Path, Path]:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_bytes((FIX / "openb" / "pods.csv").read_bytes())
    nodes.write_bytes((FIX / "openb" / "nodes.csv").read_bytes())
    return pods, nodes


@pytest.mark.parametrize("flags", [
    ["-o", "{pods}"],
    ["-o", "{nodes}", "--nodes", "{nodes}"],
    ["-o", "{tmp}/t.parquet", "--nodes", "{nodes}", "--cluster-out", "{nodes}"],
    ["-o", "{tmp}/t.parquet", "--nodes", "{nodes}", "--cluster-out", "{pods}"],
], ids=["trace-onto-source", "trace-onto-nodes", "cluster-onto-nodes", "cluster-onto-source"])
def test_import_refuses_to_write_over_an_input(openb, tmp_path, capsys, flags):
    pods, nodes = openb
    argv = ["openb", str(pods), *[f.format(pods=pods, nodes=nodes, tmp=tmp_path) for f in flags]]
    before = pods.read_bytes(), nodes.read_bytes()
    assert import_main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is an input of this import" in err
    assert (pods.read_bytes(), nodes.read_bytes()) == before
    assert not (tmp_path / "t.parquet").exists()


def test_import_refuses_an_input_reached_by_another_name(openb, tmp_path, capsys):
    pods, _ = openb
    (tmp_path / "link.csv").symlink_to(pods)
    assert import_main(["openb", str(tmp_path / "link.csv"), "-o", str(tmp_path / "." / "pods.csv")]) == 1
    assert "is an input of this import" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["-o", "--cluster-out"])
def test_import_refuses_a_directory_as_output(openb, tmp_path, capsys, flag):
    pods, nodes = openb
    folder = tmp_path / "out"
    folder.mkdir()
    argv = ["openb", str(pods), "--nodes", str(nodes), "-o", str(tmp_path / "t.parquet"), flag, str(folder)]
    assert import_main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag}: {folder}: is a directory" in err
    assert list(folder.iterdir()) == []


def test_import_refuses_one_file_for_trace_and_cluster(openb, tmp_path, capsys):
    pods, nodes = openb
    out = tmp_path / "both.yaml"
    assert import_main(["openb", str(pods), "--nodes", str(nodes), "-o", str(out), "--cluster-out", str(out)]) == 1
    assert "--cluster-out" in capsys.readouterr().err and not out.exists()


# ---- a failed write leaves nothing -----------------------------------------------------------------

@pytest.mark.parametrize("fail", ["replace", "chmod"])
@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()], ids=["OSError", "KeyboardInterrupt"])
def test_a_failed_rename_leaves_no_temp_file(tmp_path, monkeypatch, fail, exc):
    def failing(*args, **kwargs):
        raise exc

    monkeypatch.setattr(output.os, fail, failing)
    with pytest.raises(type(exc)):
        write_text("x", tmp_path / "out.txt")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
