"""`loopbench compare`: one trace through every loop, printed side by side.

Runs land in runs/compare/<timestamp>/<loop>/ (each a normal run directory), with the
side-by-side table beside them as comparison.csv and comparison.md; compares started in the
same second get distinct folders (<timestamp>-2, ...).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from harness.output import new_folder, run_lock, write_text
from harness.progress import steps
from harness.provenance import wall_s
from harness.replay import Replay
from harness.summary import HEADLINE, readout

LOOPS = ("separate", "separate_provreq", "merged")


def _loops_and_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """`loops=a,b` picks the loops; every other argument is a Hydra override."""
    loops, rest = list(LOOPS), []
    for arg in argv:
        if arg.startswith("loops="):
            loops = [x for x in arg.split("=", 1)[1].split(",") if x]
        else:
            rest.append(arg)
    return loops, rest


def side_by_side(metrics: pl.DataFrame, columns: list[str] = HEADLINE) -> pl.DataFrame:
    """Metrics as rows, loops as columns."""
    cols = [c for c in columns if c in metrics.columns]
    table = metrics.select(["loop", *cols]).with_columns(pl.col(cols).cast(pl.Float64))
    return table.unpivot(index="loop", variable_name="metric").pivot(on="loop", index="metric", values="value")


def show(metrics: pl.DataFrame, out_root: Path) -> None:
    """The loops' results as replay prints one run's, a verdict per loop against the first;
    the same in comparison.md."""
    write_text(readout(metrics, markdown=True), out_root / "comparison.md")
    print(readout(metrics))
    print(f"runs: {out_root}")


def compare(argv: list[str], out_root: Path | None = None) -> pl.DataFrame:
    from harness.cli import compose

    loops, overrides = _loops_and_overrides(argv)
    out_root = Path(out_root) if out_root else new_folder(Path("runs") / "compare")
    with run_lock(out_root):  # one compare per folder: another would mix its loops with ours
        rows = []
        for loop in steps(loops, "loop", "compare"):
            cfg = compose("config", [*overrides, f"loop={loop}"])
            rows.append(Replay().run(cfg, out_root / loop))
        metrics = pl.concat(rows, how="diagonal_relaxed")
        table = side_by_side(metrics)
        write_text(table.write_csv(), out_root / "comparison.csv")
        walls = [wall_s(out_root / loop) for loop in loops]
        show(metrics.with_columns(wall_s=pl.Series(walls, dtype=pl.Float64)), out_root)
    return table
