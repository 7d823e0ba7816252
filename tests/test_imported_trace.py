"""A config whose trace is imported (an experiment's or a scenario's `import_args`) replays with
the documented command alone: a trace not made yet is imported first, saying so, and an import
that cannot run is one line naming `import_args`."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import compose
from harness.errors import ConfigError
from harness.replay import build

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-gpu-v2023"


def test_a_scenario_trace_not_made_yet_is_imported_first(tmp_path, capsys):
    if not SHARED.exists():
        pytest.skip(f"{SHARED} is absent (public traces, read in place)")
    trace = tmp_path / "openb.parquet"
    sim, _ = build(compose("config", ["+scenario=openb_autoscaled", f"trace.path={trace}", "horizon_s=3600"]))
    assert trace.exists() and sim.w.n_pods == 8130  # the windowed, compressed list the results replay
    assert f"the trace {trace} is made first: loopbench import openb " in capsys.readouterr().err
    build(compose("config", ["+scenario=openb_autoscaled", f"trace.path={trace}", "horizon_s=3600"]))
    assert "is made first" not in capsys.readouterr().err  # made once


def test_an_import_that_cannot_run_is_refused_by_import_args(tmp_path):
    """The cluster's node list is there (it is read first), the pod list the import needs is not."""
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n")
    cfg = compose("config", ["+scenario=openb_autoscaled", f"trace.path={tmp_path / 't.parquet'}",
                             f"traces_dir={tmp_path / 'nowhere'}"])
    with pytest.raises(ConfigError, match=r"^import_args: loopbench import openb .*nowhere/openb_pod_list_default"
                                          r"\.csv: file does not exist$"):
        build(cfg)
    assert not (tmp_path / "t.parquet").exists()
