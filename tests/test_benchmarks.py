"""The asv suite runs: every benchmark function once (`asv run --quick`) in this environment, so
a broken benchmark fails CI. Nothing is measured or saved here; speed goals live in benchmarks/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Left out to keep CI quick: the same function on another config name (every loop is still
# replayed, on the small trace, by asv_quality's setup_cache), and a benchmark whose code another
# one runs whole (a peak-memory twin of a timing; the packing run, which TrackPacking's setup runs too).
SLOW_PARAMS = [r"asv_replay\..*\('separate", r"asv_scale\..*\('separate", r"asv_quiet\..*\('separate",
               r"asv_packing\..*\('fgd'\)", r"bench_packing\..*\('(?!BestFit')", r"\.peakmem_(replay|run|import)\b",
               r"bench_packing\.TimePacking\."]
SELECTION = "^(?!.*(?:" + "|".join(SLOW_PARAMS) + "))"


def test_asv_quick_run(tmp_path):
    # asv's machine file goes to a throwaway home; the scale benchmark replays a slice of its trace
    env = {**os.environ, "HOME": str(tmp_path), "LOOPBENCH_ASV_SCALE_PODS": "2000"}
    asv = [sys.executable, "-m", "asv"]
    subprocess.run([*asv, "machine", "--yes", "--machine", "ci"], cwd=REPO, env=env, check=True,
                   capture_output=True, timeout=60)
    run = subprocess.run([*asv, "run", "--python=same", "--quick", "--dry-run", "--show-stderr",
                          "--machine", "ci", "-b", SELECTION],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"asv run failed:\n{out}"
    assert " failed" not in out, out
    for name in ["asv_replay", "asv_packing", "asv_import", "asv_quality", "asv_scale", "asv_dra"]:
        assert f"{name}." in out, f"no {name} benchmark ran:\n{out}"
