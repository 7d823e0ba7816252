"""`loopbench report` and `loopbench results`: golden aggregation over hand-made run
directories, deterministic outputs, the report rendered in headless Chromium, and the
committed results/ checked against a fresh regeneration."""

from __future__ import annotations

import csv
import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml
from omegaconf import OmegaConf

from harness import grid, report, results
from harness.cli import main as cli_main
from harness.config import compose
from harness.errors import LoopbenchError
from harness.generated import is_generated
from harness.summary import BY_COLUMN

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
SHARED = ROOT.parent / "shared" / "traces" / "alibaba-gpu-v2023"
IN_CI = os.environ.get("CI") == "true"
#: .ci/run found or installed chromium: a browser test that cannot find it fails instead of skipping
BROWSER_REQUIRED = os.environ.get("LOOPBENCH_BROWSER") == "required"

def loop_cfg(name: str, **switches) -> dict:
    """conf/loop/<name>.yaml as a run's config holds it (the report builds the loop from it), with
    these autoscaler switches set."""
    cfg = compose("config", [f"loop={name}", *(f"loop.autoscaler.{k}={str(v).lower()}" for k, v in switches.items())])
    return OmegaConf.to_container(cfg.loop, resolve=True)


def make_run(d: Path, loop: dict, seed: int, idle: float, cost: float, p50: float, *, finished: bool = True) -> Path:
    """A run directory as Replay writes it, with chosen numbers (idle split 1:3 booting/unallocated)."""
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "loop": loop}))
    pl.DataFrame({"is_gang": [True, True, False], "refused": [False, False, False],
                  "start_latency_s": [p50 - 10, None, 5.0]}).write_parquet(d / "jobs.parquet")
    pl.DataFrame({"t_s": [0.0, 60.0, 120.0], "billed_gpus": [8.0, 8.0, 16.0], "used_gpus": [0.0, 4.0, 8.0],
                  "frag_ratio": [0.0, 0.5, 0.25], "frag_amount": [0.0, 0.1, 0.2]}).write_parquet(d / "timeline.parquet")
    if finished:
        pl.DataFrame([{"loop": loop["name"], "seed": seed, "trace": "t.parquet", "cluster": "c", "policy": "LeastAllocated",
                       "wall_s": 1.234 + seed, "gangs": 2, "idle_accel_hours": idle,
                       "idle_accel_hours_booting": idle / 4, "idle_accel_hours_unallocated": 3 * idle / 4,
                       "idle_accel_hours_gang_wait": 0.0, "idle_accel_hours_committed": 0.0,
                       "gang_latency_p50_s": p50, "gang_latency_p99_s": 2 * p50, "cost_usd": cost,
                       "pending_s_shortage": 3600.0, "pending_s_booting": 7200.0 * seed}]
                     ).write_parquet(d / "metrics.parquet")
    return d


@pytest.fixture
def runs(tmp_path) -> Path:
    """A Hydra-like sweep: baseline, +topology, merged at seeds 0 and 1, plus an unfinished run."""
    root = tmp_path / "sweep"
    numbers = {  # (idle, cost, gang p50) per seed
        ("separate", 0): (10.0, 100.0, 600.0), ("separate", 1): (14.0, 120.0, 800.0),
        ("separate_topology", 0): (7.0, 110.0, 500.0), ("separate_topology", 1): (13.0, 100.0, 900.0),
        ("merged", 0): (4.0, 60.0, 100.0), ("merged", 1): (6.0, 80.0, 200.0),
    }
    for i, ((name, seed), (idle, cost, p50)) in enumerate(numbers.items()):
        make_run(root / f"shard-{seed}" / str(i), loop_cfg(name), seed, idle, cost, p50)
    make_run(root / "shard-1" / "99", loop_cfg("separate"), 7, 1e6, 1e6, 1.0, finished=False)
    return root


def by(df: pl.DataFrame, **keys) -> dict:
    rows = df.filter(*[pl.col(k) == v for k, v in keys.items()]).to_dicts()
    assert len(rows) == 1, (keys, rows)
    return rows[0]


def test_aggregates_seeds_and_ablation_by_hand(runs, tmp_path):
    out = tmp_path / "out"
    assert cli_main(["report", str(runs), "-o", str(out), "--title", "golden"]) == 0
    summary = pl.read_csv(out / "summary.csv")
    # baseline idle over seeds 0, 1 = 10, 14 (the unfinished run's 1e6 is ignored)
    assert by(summary, variant="separate", metric="idle_accel_hours") == {
        "variant": "separate", "metric": "idle_accel_hours", "seeds": 2, "mean": 12.0, "std": 2.8284, "min": 10.0,
        "max": 14.0}
    assert by(summary, variant="merged", metric="pending_s_booting")["max"] == 7200.0
    abl = pl.read_csv(out / "ablation.csv")
    # +topology saved 10-7 = 3 on seed 0 and 14-13 = 1 on seed 1
    topo = by(abl, variant="separate_topology", metric="idle_accel_hours")
    assert (topo["capability"], topo["saved_mean"], topo["saved_min"], topo["saved_max"], topo["seeds_better"]) == (
        "+ topology", 2.0, 1.0, 3.0, 2)
    # cost: 100-110 = -10, 120-100 = +20: mean 5, not consistent (1 of 2 seeds better)
    cost = by(abl, variant="separate_topology", metric="cost_usd")
    assert (cost["saved_mean"], cost["saved_min"], cost["saved_max"], cost["seeds_better"]) == (5.0, -10.0, 20.0, 1)
    assert by(abl, variant="merged", metric="gang_latency_p50_s")["saved_mean"] == 550.0
    md = (out / "summary.md").read_text()
    assert "| separate | 2 | 12 [10, 14] |" in md
    assert "| separate_topology | + topology | 10 | 2 [1, 3] (2/2) |" in md
    assert "5 [-10, 20] (1/2)" in md
    # pending hours: shortage 3600 s = 1.0 h on every seed, so no bracket
    assert "| merged | 2 | 1.0 | 1.0 [0.0, 2.0] |" in md
    runs_csv = pl.read_csv(out / "runs.csv")
    assert runs_csv["variant"].to_list() == ["separate", "separate", "separate_topology", "separate_topology",
                                             "merged", "merged"]
    assert "wall_s" not in runs_csv.columns  # not a result: it changes from run to run


def test_runs_csv_is_the_same_however_a_sweep_laid_out_its_runs(tmp_path):
    """Loops whose rows have different columns, swept by one process or dealt over two shards:
    the same runs.csv, columns in the order they first appear by variant, then seed."""
    extra = {"merged": {"planner_plans": 3}, "separate": {"pods_not_admitted": 1, "jobs_not_admitted": 2}}

    def sweep(root: Path, shards: int) -> Path:
        cells = [(name, seed) for name in ("merged", "separate") for seed in (0, 1)]
        for i, (name, seed) in enumerate(cells):  # shard-i/N takes every N-th cell, as results' sweeps do
            d = make_run(root / f"shard-{i % shards}" / str(i), loop_cfg(name), seed, 1.0 + i, 10.0, 100.0)
            row = pl.read_parquet(d / "metrics.parquet").with_columns(
                **{k: pl.lit(v + seed) for k, v in extra[name].items()})
            row.write_parquet(d / "metrics.parquet")
        return root

    one, two = report.runs_csv([sweep(tmp_path / "one", 1)]), report.runs_csv([sweep(tmp_path / "two", 2)])
    assert one == two
    header = one.splitlines()[0].split(",")
    # separate before merged (variant order); its own columns where its rows put them, merged's after
    assert header[0] == "variant" and header[-3:] == ["pods_not_admitted", "jobs_not_admitted", "planner_plans"]


def test_no_plot_label_is_rotated(runs, tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(report, "_png", lambda fig: figures.append(fig) or b"\x89PNG")
    report.build([wide_runs(tmp_path / "wide")], tmp_path / "out")
    assert len(figures) == 6
    for fig in figures:
        fig.canvas.draw()
        for ax in fig.axes:
            for label in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
                assert label.get_rotation() == 0, (ax.get_xlabel(), label.get_text())


def test_outputs_are_deterministic_and_self_contained(runs, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    rep = report.build([runs], a, "same title")
    report.build([runs / "shard-1", runs / "shard-0"], b, "same title")  # order of inputs does not matter
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for f in a.iterdir():
        assert f.read_bytes() == (b / f.name).read_bytes(), f.name
    page = (a / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # nothing fetched from a network
    assert page.count("<img ") == len(rep.figures) == len(re.findall(r'src="data:image/png;base64,', page))
    assert {f.id for f in rep.figures} == {"idle", "gang-cdf", "fragmentation", "billed-used", "cost", "pending"}
    for t in rep.tables:
        assert f'id="table-{t.id}"' in page
    assert results.differences(a, b) == []


def test_variants_that_share_a_loop_name_are_told_apart(tmp_path):
    make_run(tmp_path / "r" / "0", loop_cfg("separate"), 0, 10.0, 1.0, 1.0)
    make_run(tmp_path / "r" / "1", loop_cfg("separate", gang_aware=True), 0, 8.0, 1.0, 1.0)
    make_run(tmp_path / "r" / "2", loop_cfg("separate_karpenter"), 0, 5.0, 1.0, 1.0)
    make_run(tmp_path / "r" / "3", loop_cfg("separate_sees"), 0, 9.0, 1.0, 1.0)
    report.build([tmp_path / "r"], tmp_path / "out")
    abl = pl.read_csv(tmp_path / "out" / "ablation.csv").filter(pl.col("metric") == "idle_accel_hours")
    assert abl.select("variant", "capability", "saved_mean").rows() == [
        ("separate [autoscaler.gang_aware=false]", "separate loops, every switch off (baseline)", 0.0),
        ("separate [autoscaler.gang_aware=true]", "+ gang", 2.0),
        ("separate_sees", "+ scheduler sees in-flight capacity + gangs wait for capacity", 1.0),
        ("separate_karpenter", "separate loops with KarpenterAutoscaler", 5.0),
    ]


def test_a_run_is_described_by_its_own_record_not_by_rebuilding_its_loop(tmp_path):
    """A replay writes its loop's description into run.json; the report reads it there, so a run
    whose config no longer builds (a class renamed since) still reports as what it was. A run
    without the record has its loop built from its config; a damaged record is refused by file."""
    from harness.provenance import write_run_info
    from harness.replay import build_loop

    karpenter = loop_cfg("separate_karpenter")
    record = build_loop(OmegaConf.create({"loop": karpenter})).describe().as_record()
    gone = {**karpenter, "_target_": "harness.no_such_module.KarpenterLoop"}
    make_run(tmp_path / "r" / "0", loop_cfg("separate"), 0, 10.0, 1.0, 1.0)
    write_run_info(make_run(tmp_path / "r" / "1", gone, 0, 5.0, 1.0, 1.0), 1.0, record)
    report.build([tmp_path / "r"], tmp_path / "out")
    abl = pl.read_csv(tmp_path / "out" / "ablation.csv").filter(pl.col("metric") == "idle_accel_hours")
    assert abl.select("variant", "capability").rows() == [
        ("separate", "separate loops, every switch off (baseline)"),
        ("separate_karpenter", "separate loops with KarpenterAutoscaler"),
    ]
    write_run_info(tmp_path / "r" / "1", 1.0, {"family": "separate loops"})
    with pytest.raises(LoopbenchError, match=r"run\.json.*not a loop's description"):
        report.build([tmp_path / "r"], tmp_path / "out2")


def test_clear_errors(tmp_path, capsys):
    (tmp_path / "empty" / "unfinished").mkdir(parents=True)
    with pytest.raises(LoopbenchError, match="no finished run"):
        report.find_runs([tmp_path / "empty"])
    packing = tmp_path / "packing" / "0"
    packing.mkdir(parents=True)
    pl.DataFrame([{"policy": "FGD", "seed": 42}]).write_parquet(packing / "metrics.parquet")
    assert cli_main(["report", str(tmp_path / "packing"), "-o", str(tmp_path / "o")]) == 1
    assert "packing-report" in capsys.readouterr().err
    assert cli_main(["report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "o")]) == 1
    assert cli_main(["results", "no_such_experiment"]) == 1


def test_sweeps_are_cut_along_their_longest_axis():
    assert results.shards({"loop": "a,b,c", "seed": "range(0,5)"}, 2) == [
        ["loop=a,b,c", "seed=0,2,4"], ["loop=a,b,c", "seed=1,3"]]
    assert results.shards({"loop": "a,b"}, 4) == [["loop=a"], ["loop=b"]]
    assert results.shards({"seed": "3"}, 2) == [["seed=3"]]


def test_differences_mask_images_only(runs, tmp_path):
    a = tmp_path / "a"
    report.build([runs], a)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    page = (b / "report.html").read_text()
    (b / "report.html").write_text(re.sub(r"base64,[A-Za-z0-9+/=]{8}", "base64,AAAAAAAA", page, count=1))
    assert results.differences(a, b) == []
    (b / "summary.csv").write_text((b / "summary.csv").read_text().replace("12.0", "12.5", 1))
    (b / "idle.png").unlink()
    assert results.differences(a, b) == ["idle.png: only in the committed results", "summary.csv: differs"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_failed_rebuild_leaves_the_previous_report_whole(runs, tmp_path, monkeypatch):
    out = tmp_path / "results" / "NAME"
    exp = results.BY_NAME["loops_synthetic"]
    results.report(exp, runs, out)
    before = snapshot(out)

    def fail(rep):
        raise RuntimeError("the page could not be built")

    monkeypatch.setattr(report, "html_page", fail)  # after the tables and plots are written
    with pytest.raises(RuntimeError, match="could not be built"):
        results.report(exp, runs, out)
    assert snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["NAME"], "nothing of the failed build is left"


def test_a_rebuild_replaces_the_report_whole(runs, tmp_path):
    out = tmp_path / "out"
    assert cli_main(["report", str(runs), "-o", str(out)]) == 0
    assert (out / "ablation.csv").exists()
    make_run(tmp_path / "merged-only" / "0", loop_cfg("merged"), 0, 4.0, 60.0, 100.0)  # no baseline: no ablation
    assert cli_main(["report", str(tmp_path / "merged-only"), "-o", str(out)]) == 0
    report.build([tmp_path / "merged-only"], tmp_path / "fresh", "out")
    assert snapshot(out) == snapshot(tmp_path / "fresh")  # no stale ablation.csv (nor anything else)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "merged-only", "out", "sweep"]


def test_an_interrupted_swap_is_undone_by_the_next_build(runs, tmp_path, monkeypatch):
    """Killed between moving the old report aside and moving the new one in: the next build,
    even a failing one, starts from the old report; leftovers of the interrupted build go."""
    out = tmp_path / "out"
    report.build([runs], out)
    before = snapshot(out)
    out.rename(tmp_path / ".out.old")
    (tmp_path / ".out.new").mkdir()
    (tmp_path / ".out.new" / "summary.csv").write_text("half")
    monkeypatch.setattr(report, "html_page", lambda rep: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        report.build([runs], out)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "sweep"]


def test_an_existing_folder_that_is_no_report_is_not_replaced(runs, tmp_path, capsys):
    run = runs / "shard-0" / "0"
    files = snapshot(run)
    assert cli_main(["report", str(runs), "-o", str(run)]) == 1
    assert "not a report" in capsys.readouterr().err
    assert snapshot(run) == files


def test_summary_and_page_open_with_the_verdict(runs, tmp_path):
    """Each variant against the baseline, on seed means: separate idle (10+14)/2 = 12, cost 110,
    gang p99 2 x 700 = 1400; separate_topology 10 (-17%), 105 (-5%), 1400 (±0%); merged 5
    (-58%), 70 (-36%), 300 (-79%)."""
    report.build([runs], tmp_path / "out", "golden")
    verdicts = ["separate_topology saves 17% of idle accelerator hours over separate (12 -> 10) in one setting "
                "(scoring LeastAllocated); cost -5%, gang start p99 ±0%",
                "merged saves 58% of idle accelerator hours over separate (12 -> 5) in one setting "
                "(scoring LeastAllocated); cost -36%, gang start p99 -79%"]
    md = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert md[:5] == ["# golden", "", *[f"- {v}" for v in verdicts], ""]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<h1>golden</h1>\n<ul class=\"verdict\">" + "".join(f"<li>{html.escape(v)}</li>" for v in verdicts) + "</ul>" in page
    assert "<td>12 [10,&nbsp;14]</td>" in page  # a cell wraps before its bracket, never inside it
    # a plot before the first table: what the numbers look like, without scrolling past them
    assert page.index('<figure id="figure-idle">') < page.index("<table")
    assert page.count("<figure") == len(report.build([runs], tmp_path / "again").figures)


WIDE_LOOPS = ["separate", "separate_topology", "separate_gang", "separate_sharing", "separate_reservation",
              "separate_provreq", "separate_all", "separate_sees", "separate_prefers", "separate_karpenter", "merged"]


def wide_runs(root: Path) -> Path:
    """loops_synthetic's shape: 11 variants x 2 seeds, every metric of the report, large numbers."""
    for i, name in enumerate(WIDE_LOOPS):
        cfg = loop_cfg(name)
        for seed in (0, 1):
            d = make_run(root / f"{i}-{seed}", cfg, seed, 9519.0 + 1099 * seed, 107_554.0 + 9489 * seed, 12_160.0 + 16531 * seed)
            m = pl.read_parquet(d / "metrics.parquet")
            more = {c: 0.3312 + 0.02 * seed if mc.digits == 3 else 1523 + 323 * seed + i if mc.count
                    else 100_000.0 + 17_043 * seed + i for c, mc in BY_COLUMN.items() if c not in m.columns}
            m.with_columns(**{c: pl.lit(v) for c, v in more.items()}).write_parquet(d / "metrics.parquet")
    return root


def test_wide_tables_are_split_in_markdown(tmp_path):
    report.build([wide_runs(tmp_path / "runs")], tmp_path / "out")
    md = (tmp_path / "out" / "summary.md").read_text().splitlines()
    rules = [line for line in md if line.startswith("|---")]
    assert rules and max(r.count("---:") for r in rules) <= report.MAX_NUMBER_COLUMNS + 1  # + seeds
    # the headline's 9 metrics in two tables, each repeating the variant and its seeds
    section = md[md.index("## Headline (mean [min, max] over seeds)"):md.index("## Work done by the horizon")]
    headers = [line for line in section if line.startswith("| variant |")]
    assert len(headers) == 2 and all(h.startswith("| variant | seeds | ") for h in headers)
    assert sum(h.count(" | ") - 1 for h in headers) == len(report.HEADLINE)
    assert sum(line.startswith("| merged | 2 | ") for line in section) == 2


# ---- the report in a real browser ----------------------------------------------------------

def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        message = "chromium is not installed (Debian: apt-get install chromium; .ci/run installs it as root)"
        if BROWSER_REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return exe


def render(page: Path, tmp_path: Path) -> str:
    """The DOM of `page` after load, as headless Chromium builds it (no network, no profile)."""
    profile = tmp_path / f"profile-{page.parent.name}"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--window-size=1280,1000", "--virtual-time-budget=10000", "--dump-dom",
           page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def check_rendered(page: Path, tmp_path: Path, figures: set[str], tables: set[str]) -> None:
    dom = render(page, tmp_path)
    n_img, n_tab = page.read_text().count("<img "), page.read_text().count("<table ")
    assert n_img == len(figures) and n_tab == len(tables)
    assert f'data-images-decoded="{n_img}/{n_img}"' in dom, "an image did not decode or has no size"
    assert f'data-tables-shown="{n_tab}/{n_tab}"' in dom, "a table has no rows on screen"
    for f in figures:
        assert f'id="figure-{f}"' in dom
    for t in tables:
        assert f'id="table-{t}"' in dom


def test_report_renders_in_chromium(runs, tmp_path):
    rep = report.build([runs], tmp_path / "out")
    check_rendered(tmp_path / "out" / "report.html", tmp_path, {f.id for f in rep.figures}, {t.id for t in rep.tables})


def test_wide_tables_fit_a_laptop_screen_in_chromium(tmp_path):
    """11 variants and 9 headline metrics of six-digit [min, max] (loops_synthetic's shape):
    no table is wider than the page at 1280 px."""
    report.build([wide_runs(tmp_path / "runs")], tmp_path / "out")
    dom = render(tmp_path / "out" / "report.html", tmp_path)
    assert 'data-tables-overflowing="0"' in dom


ALL_TABLES = {"variants", "headline", "work", "idle", "pending", "more", "ablation"}
ALL_PLOTS = {"idle", "gang-cdf", "fragmentation", "billed-used", "cost", "pending"}


#: a report's tables: a grid's have no ablation (many baselines) but the grid's own three
REPORT_TABLES = ALL_TABLES | {"idle-models"}
GRID_TABLES = REPORT_TABLES - {"ablation"} | {"grid", "steps", "steps-across"}


@pytest.mark.parametrize("name, figures, tables", [
    ("loops_synthetic", ALL_PLOTS, REPORT_TABLES),
    ("openb_autoscaled", ALL_PLOTS - {"gang-cdf"}, REPORT_TABLES),  # openb has no gangs
    ("loops_robustness", {"idle", "cost"}, GRID_TABLES),  # a grid report keeps the bar plots only
])
def test_committed_reports_render_in_chromium(name, figures, tables, tmp_path):
    page = RESULTS / name / "report.html"
    assert page.exists(), f"{page}: run `loopbench results {name}`"
    check_rendered(page, tmp_path, figures, tables)


# ---- the committed results against a regeneration --------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", list(results.BY_NAME))
def test_committed_results_equal_a_fresh_regeneration(name):
    """A whole experiment regenerated (minutes each: openb_autoscaled ~20 replays, Karpenter's
    slowest), so CI leaves them out (see .ci/run); `loopbench results --check` runs them all."""
    if name != "loops_synthetic" and not SHARED.exists():
        if IN_CI:
            pytest.fail(f"{SHARED} is missing")
        pytest.skip(f"{SHARED} is absent (public traces, read in place)")
    diffs = results.check(results.BY_NAME[name], RESULTS, jobs=2)
    assert diffs == [], f"results/{name} is stale: run `loopbench results {name}` and commit results/"


@pytest.fixture(scope="module")
def derived_traces(tmp_path_factory) -> Path:
    """Where the experiments' imported and drawn traces go, once per test process: CI leaves no
    derived trace in the checkout."""
    return tmp_path_factory.mktemp("derived")


@pytest.mark.parametrize("name,loop", [("loops_synthetic", "separate"), ("loops_synthetic", "merged"),
                                       ("loops_synthetic", "separate_2026"),
                                       ("openb_autoscaled", "separate"), ("openb_autoscaled", "merged"),
                                       ("loops_evidence", "merged")])
def test_committed_rows_are_current(name, loop, tmp_path, derived_traces):
    """Seed 0 of two loops of an experiment, replayed again, gives a committed row of its
    runs.csv: a quick staleness check of every replay experiment (the whole regenerations are
    the slow tests above)."""
    from harness.config import compose
    from harness.replay import Replay

    if name == "openb_autoscaled" and not SHARED.exists():
        if IN_CI:
            pytest.fail(f"{SHARED} is missing")
        pytest.skip(f"{SHARED} is absent (public traces, read in place)")
    cfg = compose("config", [f"experiment={name}", f"loop={loop}", "seed=0"])
    committed_trace = str(cfg.trace.path)
    if cfg.get("import_args") or is_generated(cfg):  # imported or drawn into the test's folder
        derived = derived_traces / name / Path(committed_trace).name
        derived.parent.mkdir(exist_ok=True)
        cfg = compose("config", [f"experiment={name}", f"loop={loop}", "seed=0", f"trace.path={derived}"])
        if cfg.get("import_args") and not derived.exists():  # imported once for the loops of one experiment
            results.prepare(results.BY_NAME[name], cfg)
    Replay().run(cfg, tmp_path / "runs" / loop, progress=False)
    (fresh,) = csv.DictReader(report.runs_csv([tmp_path / "runs"]).splitlines())
    fresh["trace"] = committed_trace if fresh["trace"] == str(cfg.trace.path) else fresh["trace"]
    # a grid's variant names its setting (`merged [trace=...]`): the row is found by loop, trace and seed
    committed = [r for r in csv.DictReader((RESULTS / name / "runs.csv").read_text().splitlines())
                 if (r["loop"], r["trace"], r["seed"]) == (fresh["loop"], fresh["trace"], fresh["seed"])]
    stale = f"results/{name} is stale: run `loopbench results {name}` and commit results/"
    assert len(committed) == 1, stale
    # the committed table has the columns of every loop: those this loop has not are empty
    row = {k: v for k, v in committed[0].items() if k != "variant"}
    assert row == {k: fresh.get(k, "") for k in row} and fresh.keys() <= committed[0].keys(), stale


@pytest.mark.parametrize("setup", ["merged", "separate_all_overprovisioning"])
def test_committed_inference_rows_are_current(setup, tmp_path):
    """Seed 0 of two setups of inference_bursts (the bundled services, the HPA's defaults),
    replayed again, give their committed row of its runs.csv (the grid's label names the
    setting: the row is found by loop, trace, replica setting and seed)."""
    from harness.config import compose
    from harness.replay import Replay

    cfg = compose("config", ["experiment=inference_bursts", f"setup={setup}", "seed=0"])
    Replay().run(cfg, tmp_path / "runs" / setup, progress=False)
    report.build([tmp_path / "runs"], tmp_path / "out")
    (fresh,) = csv.DictReader((tmp_path / "out" / "runs.csv").read_text().splitlines())
    key = ("loop", "trace", "replicas", "seed")
    committed = [r for r in csv.DictReader((RESULTS / "inference_bursts" / "runs.csv").read_text().splitlines())
                 if all(r[k] == fresh[k] for k in key)]
    stale = "results/inference_bursts is stale: run `loopbench results inference_bursts` and commit results/"
    assert len(committed) == 1, stale
    assert {k: v for k, v in committed[0].items() if k != "variant"} == {
        k: fresh.get(k, "") for k in committed[0] if k != "variant"}, stale


# ---- idle cost by GPU model, and the robustness grid ------------------------------------------

def retouch(d: Path, metrics: dict, cluster: dict | None = None) -> None:
    """Set columns of a made run's metrics (and a cluster mapping in its config)."""
    m = pl.read_parquet(d / "metrics.parquet").with_columns(**{k: pl.lit(v) for k, v in metrics.items()})
    m.write_parquet(d / "metrics.parquet")
    if cluster is not None:
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        (d / "config.yaml").write_text(yaml.safe_dump({**cfg, "cluster": cluster}))


def test_idle_cost_by_model_explains_more_idle_hours_at_a_lower_cost(tmp_path):
    """separate idles 100 h: A100 80 h (240 USD), T4 20 h (10 USD); merged 120 h: A100 20 h
    (60 USD), T4 100 h (50 USD). merged idles 20% more hours for 110 USD instead of 250 (-56%):
    its idle hours moved from A100 (3 USD per GPU-hour: 300 USD over 100 h) to T4 (0.5)."""
    for name, h, (a100, t4) in (("separate", 100.0, (80.0, 20.0)), ("merged", 120.0, (20.0, 100.0))):
        d = make_run(tmp_path / "runs" / name, loop_cfg(name), 0, h, 1000.0, 60.0)
        retouch(d, {"idle_accel_usd": 3 * a100 + 0.5 * t4, "idle_accel_hours_model_A100": a100,
                    "idle_accel_hours_model_T4": t4, "idle_accel_usd_model_A100": 3 * a100,
                    "idle_accel_usd_model_T4": 0.5 * t4})
    rep = report.build([tmp_path / "runs"], tmp_path / "out")
    table = next(t for t in rep.tables if t.id == "idle-models")
    assert table.header == ["variant", "seeds", "idle accelerator hours (h) ↓", "idle accelerator cost (USD) ↓",
                            "idle: A100 (h) ↓", "idle: T4 (h) ↓", "idle cost: A100 (USD) ↓", "idle cost: T4 (USD) ↓"]
    assert table.rows[1] == ["merged", "1", "120", "110", "20", "100", "60", "50"]
    # the runs' own GPU models, the dearest against the cheapest per idle hour
    assert "so an idle A100 does not count as an idle T4. " in table.note
    assert table.note.endswith(
        "merged idles 20% more accelerator hours than separate, yet they cost 56% less: the hours sit on other GPU "
        "models. Idle hours by model, merged against separate: T4 100 h against 20 h (~0.50 USD per idle GPU-hour); "
        "A100 20 h against 80 h (~3.00 USD per idle GPU-hour).")


#: merged's idle hours per (policy, shortage) cell at seeds 0, 1; separate's are 100 and 110
#: everywhere, sees' 5 fewer on both seeds, prefers' as sees' +10 then -10.
MERGED = {("A", "error"): (50.0, 60.0), ("A", "silent"): (70.0, 80.0), ("B", "error"): (60.0, 70.0),
          ("B", "silent"): (80.0, 90.0)}


def grid_runs(root: Path) -> Path:
    for (policy, shortage), merged in MERGED.items():
        for seed in (0, 1):
            sep = 100.0 + 10 * seed
            idle = {"separate": sep, "separate_sees": sep - 5, "separate_prefers": sep - 5 + (10 if seed else -10),
                    "merged": merged[seed]}
            for name, h in idle.items():
                d = make_run(root / f"{policy}-{shortage}-{name}-{seed}", loop_cfg(name), seed, h, 2 * h, 60.0)
                retouch(d, {"policy": policy, "idle_accel_usd": 3 * h}, {"shortage": shortage})
    return root


def test_the_grid_report_states_ranges_and_whether_each_step_holds_everywhere(tmp_path):
    rep = report.build([grid_runs(tmp_path / "runs")], tmp_path / "out", "grid")
    # merged saves (105 - 55) / 105 = 47.6% (A, error), 30/105 = 28.6%, 40/105 = 38.1%, 20/105 = 19.0% (B, silent)
    assert ("merged saves 19-48% of idle accelerator hours over separate, depending on scoring and provider "
            "(4 settings). It saves the least (19%) with scoring B, provider fails silently.") in rep.verdict
    assert [t.id for t in rep.tables[:4]] == ["variants", "grid", "steps", "steps-across"]
    cells = {(r[0], r[1]): r for r in rep.tables[1].rows}
    # separate in every cell: 100, 110: mean 105, std 7.07, half-width 12.706 x 7.07 / sqrt(2) = 63.5
    assert cells[("scoring A, provider refuses at once", "separate")][2:5] == ["2", "105 ± 64", "315 ± 191"]
    across = {r[0]: r for r in rep.tables[3].rows}
    # sees saves 5 h on both seeds (no spread: holds in all 4 settings); prefers saves -10 and
    # +10 over sees (mean 0: holds nowhere); merged over prefers: 100 - 55 = 45 ... 100 - 85 = 15
    assert across["sees"] == ["sees", "separate_sees over separate", "5%", "4/4", "0", "yes"]
    assert across["prefers"] == ["prefers", "separate_prefers over separate_sees", "±0%", "0/4", "0", "no"]
    assert across["requests (merged)"][2] == "15-45%"
    steps = pl.read_csv(tmp_path / "out" / "steps.csv")
    assert steps.filter(step="sees")["holds"].to_list() == [True] * 4
    assert (tmp_path / "out" / "grid.csv").exists() and {f.id for f in rep.figures} == {"idle", "cost"}
    # the plots of one setting are left out, saying which and why, in both documents
    left_out = ("Left out: gang start latency CDF, fragmentation over time, billed vs used accelerators over time "
                "and pending pod-hours by reason. These runs differ by scoring and provider (4 settings, 16 "
                "variants): too many for one curve or panel each. A report over the runs of one setting draws them.")
    assert rep.left_out == left_out
    assert left_out in (tmp_path / "out" / "summary.md").read_text()
    assert html.escape(left_out) in (tmp_path / "out" / "report.html").read_text()


def test_a_grid_without_bare_separate_still_judges_merged_against_the_strongest_baseline(tmp_path):
    """Only separate_2026 and merged (conf/experiment/loops_gangs.yaml): separate_2026 idles 100
    and 110 h in both traces; merged 50 and 60 in trace a ((105 - 55) / 105 = 47.6%), 80 and 90
    in trace b (20 / 105 = 19.0%). No line against bare separate, which did not run."""
    for trace, merged in (("a", (50.0, 60.0)), ("b", (80.0, 90.0))):
        for seed in (0, 1):
            for name, h in (("separate_2026", 100.0 + 10 * seed), ("merged", merged[seed])):
                retouch(make_run(tmp_path / "runs" / f"{trace}-{name}-{seed}", loop_cfg(name), seed, h, 2 * h, 60.0),
                        {"trace": f"{trace}.parquet"})
    rep = report.build([tmp_path / "runs"], tmp_path / "out", "grid")
    assert rep.verdict == ["merged saves 19-48% of idle accelerator hours over separate_2026, depending on trace "
                           "(2 settings). It saves the least (19%) with trace b."]


def test_a_grid_of_one_seed_says_so_rather_than_that_nothing_holds(tmp_path):
    """With one seed a saving has no interval: `holds in 0/4` would read as if no step held."""
    root = grid_runs(tmp_path / "runs")
    for d in [m.parent for m in root.rglob("metrics.parquet") if pl.read_parquet(m)["seed"][0] == 1]:
        shutil.rmtree(d)
    rep = report.build([root], tmp_path / "out")
    across = {r[0]: r for r in next(t for t in rep.tables if t.id == "steps-across").rows}
    assert across["sees"][3:] == ["one seed: no spread", "0", "one seed: no spread"]
    detail = next(t for t in rep.tables if t.id == "steps").rows
    assert {r[-1] for r in detail} == {"one seed: no spread"}


def test_a_services_grid_is_judged_first_on_the_demand_left_unserved(tmp_path):
    """Two replica autoscaler settings (a cell each), three loops, one seed. Unserved shares:
    separate hpa 0.04, keda 0.10; separate_all 0.035, 0.06; merged 0.03, 0.05. Idle hours 100,
    90, 80 in both. Against separate, merged leaves 25% (hpa) and 50% (keda) less unserved;
    against separate_all, the other loop with the least of both, (0.035 - 0.03) / 0.035 = 14%
    and 0.01 / 0.06 = 17% less, and 10 / 90 = 11% fewer idle hours. Each comparison states the
    unserved demand first, then idle hours; the labels and the grid name the setting; the grid
    table shows the service columns and no gang column."""
    shares = {"separate": (0.04, 0.10), "separate_all": (0.035, 0.06), "merged": (0.03, 0.05)}
    for i, replicas in enumerate(("hpa (down 300 s)", "keda (down 0 s, cooldown 300 s)")):
        for name, idle in (("separate", 100.0), ("separate_all", 90.0), ("merged", 80.0)):
            d = make_run(tmp_path / "runs" / f"{replicas[:4]}-{name}", loop_cfg(name), 0, idle, 2 * idle, 60.0)
            retouch(d, {"replicas": replicas, "demand_unserved_share": shares[name][i],
                        "gang_latency_p99_s": float("nan")})
    rep = report.build([tmp_path / "runs"], tmp_path / "out", "services")
    where = "depending on replica autoscaler (2 settings). It saves the least"
    assert rep.verdict[2:] == [
        f"merged saves 25-50% of demand not served (share) over separate, {where} (25%) with replica autoscaler "
        "hpa (down 300 s).",
        f"merged saves 20% of idle accelerator hours over separate, {where} (20%) with replica autoscaler "
        "hpa (down 300 s).",
        "merged saves 14-17% of demand not served (share) over separate_all (the other loop with the least), "
        f"{where} (14%) with replica autoscaler hpa (down 300 s).",
        "merged saves 11% of idle accelerator hours over separate_all (the other loop with the least), "
        f"{where} (11%) with replica autoscaler hpa (down 300 s)."]
    grid_table = next(t for t in rep.tables if t.id == "grid")
    assert "demand not served (share) ↓" in grid_table.header
    assert not any("gang" in h for h in grid_table.header)
    labels = set(pl.read_csv(tmp_path / "out" / "summary.csv")["variant"].to_list())
    assert "merged [replicas=keda (down 0 s, cooldown 300 s)]" in labels and len(labels) == 6


def test_the_strongest_loop_is_the_best_ranked_over_the_cells():
    """Cell A: x 1, y 2, z 3 (ranks 1, 2, 3); cell B, on a smaller scale: x 9, y 30, z 4 (ranks
    2, 3, 1). Mean ranks x 1.5, z 2, y 2.5: x, where the plain means (x 5, z 3.5) would pick z,
    the scale of one cell deciding. Of y and z: 2 and 1, then 1 and 2: a tie, the earlier."""
    m = pl.DataFrame({"c": ["A"] * 3 + ["B"] * 3, "loop": ["x", "y", "z"] * 2, "seed": [0] * 6,
                      "v": [1.0, 2.0, 3.0, 9.0, 30.0, 4.0]})
    assert grid.strongest(m, ["c"], ["x", "y", "z"], "v") == "x"
    assert grid.strongest(m, ["c"], ["z", "y"], "v") == "z"


def test_a_grid_report_fits_a_laptop_screen_in_chromium(tmp_path):
    """Variant labels carry the scoring policy's name (`1*LeastAllocated+1*BalancedAllocation`) and
    the provider: the headline's variant column wraps inside them rather than overflow (it did,
    by 180 px, when cells broke only after underscores)."""
    root = grid_runs(tmp_path / "runs")
    names = {"A": "1*LeastAllocated+1*BalancedAllocation", "B": "MostAllocated"}
    for m in root.rglob("metrics.parquet"):  # every metric, five-digit numbers with a spread, as the grid's
        df = pl.read_parquet(m)
        seed = df["seed"][0]
        more = {c: 0.3312 + 0.02 * seed if mc.digits == 3 else 1523 + 323 * seed if mc.count else 10_000.0 + 1_704 * seed
                for c, mc in BY_COLUMN.items() if c not in df.columns}
        df.with_columns(pl.col("policy").replace_strict(names), pl.col(pl.Float64) * (137.31 + 11.7 * seed),
                        **{c: pl.lit(v) for c, v in more.items()}).write_parquet(m)
    report.build([root], tmp_path / "out")
    dom = render(tmp_path / "out" / "report.html", tmp_path)
    assert 'data-tables-overflowing="0"' in dom


def test_a_grid_variant_names_its_trace_by_stem_and_not_the_cluster_that_comes_with_it(tmp_path):
    """Two scenarios (a trace with its cluster): the labels name the trace by its file's stem,
    and leave the cluster out (the grid's long labels were cut off in its plots)."""
    for trace, cluster in (("runs/traces/openb_x40.parquet", "openb-autoscaled"), ("traces/default.parquet", "default")):
        for name in ("separate", "merged"):
            d = make_run(tmp_path / "runs" / f"{cluster}-{name}", loop_cfg(name), 0, 100.0, 200.0, 60.0)
            retouch(d, {"trace": trace, "cluster": cluster, "idle_accel_usd": 300.0})
    report.build([tmp_path / "runs"], tmp_path / "out")
    labels = set(pl.read_csv(tmp_path / "out" / "summary.csv")["variant"].to_list())
    assert labels == {"separate [trace=openb_x40]", "separate [trace=default]",
                      "merged [trace=openb_x40]", "merged [trace=default]"}


def test_a_variant_names_a_shipped_policy_by_its_choice_and_another_by_its_weights(tmp_path):
    """Runs composed with policy=bin_packing and policy=kube_default are labelled by those names,
    not their policies' spelled-out weights (the grid's labels ran off its plots); one whose
    weights were overridden matches no shipped policy and keeps its policy's own name. The runs
    table keeps each policy's own name in its `policy` column (published rows stay as they are)."""
    for i, (overrides, name) in enumerate((
            (["policy=bin_packing"], "MostAllocated(cpu 1, memory 1, nvidia.com/gpu 3)"),
            (["policy=kube_default"], "1*LeastAllocated+1*BalancedAllocation"),
            (["policy=least_allocated", "policy.resources.cpu=2"], "LeastAllocated(cpu 2, memory 1)"))):
        d = make_run(tmp_path / "runs" / str(i), loop_cfg("separate"), 0, 100.0, 200.0, 60.0)
        cfg = compose("config", ["loop=separate", *overrides])
        (d / "config.yaml").write_text(OmegaConf.to_yaml(cfg))  # as Replay writes it: `${policy}` in the loop
        retouch(d, {"policy": name})
    report.build([tmp_path / "runs"], tmp_path / "out")
    labels = set(pl.read_csv(tmp_path / "out" / "summary.csv")["variant"].to_list())
    assert labels == {"separate [policy=bin_packing]", "separate [policy=kube_default]",
                      "separate [policy=LeastAllocated(cpu 2, memory 1)]"}
    runs = pl.read_csv(tmp_path / "out" / "runs.csv")  # the policy's own name stays in its column
    assert runs.filter(pl.col("variant") == "separate [policy=bin_packing]")["policy"].to_list() == [
        "MostAllocated(cpu 1, memory 1, nvidia.com/gpu 3)"]


def test_runs_of_one_trace_with_and_without_services_are_two_settings(tmp_path):
    """A run with a replica autoscaler beside one without (its metrics have no `replicas`): the
    grid sorts the setting that is unset last and names it `none`."""
    for name, replicas in (("with", "hpa"), ("without", None)):
        d = make_run(tmp_path / "runs" / name, loop_cfg("separate"), 0, 100.0, 200.0, 60.0)
        if replicas:
            retouch(d, {"replicas": replicas})
    report.build([tmp_path / "runs"], tmp_path / "out")
    labels = set(pl.read_csv(tmp_path / "out" / "summary.csv")["variant"].to_list())
    assert labels == {"separate [replicas=hpa]", "separate [replicas=none]"}
    grid = (tmp_path / "out" / "summary.md").read_text().split("## Robustness grid", 1)[1]
    assert grid.index("replica autoscaler hpa") < grid.index("replica autoscaler none")


def services_runs(root: Path) -> Path:
    """The runs fixture's separate and merged loops at seeds 0 and 1, each with a services
    timeline (services_timeline.parquet, as Replay writes it) of two services, chat and embed."""
    for i, name in enumerate(["separate", "merged"]):
        for seed in (0, 1):
            d = make_run(root / f"{name}-{seed}", loop_cfg(name), seed, 10.0, 100.0, 60.0)
            t = [0.0, 0.0, 600.0, 600.0]
            pl.DataFrame({"t_s": t, "service": ["chat", "embed"] * 2, "demand": [50.0, 5.0, 400.0, 5.0],
                          "ready_capacity": [0.0, 0.0, 200.0 * (i + 1), 100.0], "ready_replicas": [0, 0, i + 1, 1],
                          "replicas": [1, 1, 2, 1]}).write_parquet(d / "services_timeline.parquet")
            retouch(d, {"demand_unserved_share": 0.25 / (i + 1), "time_to_capacity_p50_s": 600.0,
                        "time_to_capacity_p99_s": 600.0, "cold_starts": 2 + i, "warm_idle_accel_hours": 0.5})
    return root


def test_a_run_with_services_plots_demand_against_each_loops_ready_capacity(tmp_path, monkeypatch):
    """One panel per service (titled by it), the demand and one ready-capacity line per loop;
    only runs with services get the plot (the runs fixture's have none: see
    test_outputs_are_deterministic_and_self_contained)."""
    drawn = []
    png = report._png
    monkeypatch.setattr(report, "_png", lambda fig: drawn.append(fig) or png(fig))
    rep = report.build([services_runs(tmp_path / "runs")], tmp_path / "out")
    assert [f.id for f in rep.figures][-1] == "services"
    assert "| merged | 2 | 0.1250 | 600 | 600 | 3 | 0 |" in (tmp_path / "out" / "summary.md").read_text()
    fig = drawn[-1]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["chat", "embed"]
    for ax in panels:
        assert [line.get_label() for line in ax.get_lines()] == ["separate: ready capacity", "merged: ready capacity"]
    chat_merged = panels[0].get_lines()[1]  # 0 at 0 h, then 400 from the 600 s sample (mean over seeds)
    assert chat_merged.get_xdata().tolist() == [0.0, 600.0 / 3600] and chat_merged.get_ydata().tolist() == [0.0, 400.0]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["demand", "separate: ready capacity",
                                                                 "merged: ready capacity"]
    assert (tmp_path / "out" / "services.png").exists() and "services.png" in (tmp_path / "out" / "summary.md").read_text()


def test_a_services_report_renders_in_chromium(tmp_path):
    rep = report.build([services_runs(tmp_path / "runs")], tmp_path / "out")
    assert "services" in {t.id for t in rep.tables}
    check_rendered(tmp_path / "out" / "report.html", tmp_path, {f.id for f in rep.figures}, {t.id for t in rep.tables})
