"""asv benchmarks (asv.conf.json at the repository root; see README "Benchmarks (asv)").

asv imports every module of this package, so the plain scripts beside the `asv_*` modules
keep their work under `if __name__ == "__main__"`. The benchmark code is always the working
tree's, but the project under test is the commit asv installed: its config and bundled trace
are read from that commit's checkout, so a change to a default in conf/ counts as a change of
that commit.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Public traces beside the repository (read in place; benchmarks needing them are skipped without).
SHARED_TRACES = REPO.parent / "shared" / "traces"
#: The pinned trace of the `track_` benchmarks: the same bytes for every commit compared.
SMALL_TRACE = Path(__file__).resolve().parent / "data" / "small.parquet"
LOOPS = ["separate", "separate_provreq", "merged"]


def checkout() -> Path:
    """Source tree of the commit under test: asv's checkout in a built environment
    (`asv run A..B`, `asv continuous`), else this working tree (`--python=same`)."""
    built = Path(os.environ.get("ASV_ENV_DIR", "")) / "project"
    return built if (built / "conf" / "config.yaml").exists() else REPO


def compose(overrides: list[str]):
    """`loopbench replay`'s config with `overrides`, from the tested commit's conf/, with the
    trace path made absolute (asv runs benchmarks in a temporary directory)."""
    from harness.config import compose as hydra_compose

    os.environ["LOOPBENCH_CONF"] = str(checkout() / "conf")
    cfg = hydra_compose("config", overrides)
    cfg.trace.path = str(checkout() / str(cfg.trace.path))
    return cfg
