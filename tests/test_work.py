"""Equal work, always checked: hand-made run rows whose loops did or did not finish the same work
by the horizon, and what compare's readout, the report and the robustness grid say of them."""

from __future__ import annotations

import html

import polars as pl

from harness import grid, report, work
from harness.summary import readout
from tests.test_report import grid_runs, loop_cfg, make_run, retouch


def row(loop: str, idle: float, seed: int = 0, *, done: int = 3405, pending: int = 0, running: int = 0,
        never_started: int = 0, not_admitted: dict | None = None, **more) -> dict:
    """A metrics row as Replay writes it, its work counts by hand (3,405 pods of the bundled trace)."""
    return {"loop": loop, "seed": seed, "pods": 3405, "jobs": 3349, "idle_accel_hours": idle, "cost_usd": 10 * idle,
            "gang_latency_p99_s": 100.0, "gangs_never_started": never_started, "pods_done": done,
            "pods_running": running, "pods_bound_waiting": 0, "pods_pending": pending, "pods_refused": 0,
            **{f"jobs_not_admitted_{q}": n for q, n in (not_admitted or {}).items()}, **more}


#: Kueue never admits serving-batch's 244 one-pod jobs: 3,161 of 3,405 pods done.
KUEUE = row("separate_kueue", 3088.0, done=3161, pending=244, not_admitted={"serving-batch": 244, "research": 0})


def test_equal_work_leaves_no_marker():
    rows = pl.DataFrame([row("separate", 200.0), row("merged", 150.0)])
    text = readout(rows)
    assert work.MARK not in text
    assert text.splitlines()[2].split() == ["equal", "work", "reference", "yes"]
    assert text.splitlines()[-1].startswith("merged saves 25% of idle accelerator hours over separate (200 -> 150)")


def test_a_loop_with_pods_never_admitted_is_named_first_with_its_counts():
    rows = pl.concat([pl.DataFrame([row("merged", 1707.0)]), pl.DataFrame([KUEUE])], how="diagonal_relaxed")
    last = readout(rows).splitlines()[-1]
    assert last == ("separate_kueue vs merged: NOT EQUAL WORK: separate_kueue left 244 jobs never admitted, 244 pods "
                    "not started; 3,161 of 3,405 pods done in separate_kueue against 3,405 in merged. separate_kueue "
                    "burns 81% more idle accelerator hours than merged (1,707 -> 3,088); cost +81%, "
                    "gang start p99 ±0%")
    assert readout(rows).splitlines()[2].split()[-2:] == ["reference", "NO"]
    # the reference's own shortfall is named as its, the other loop's beside it
    rows = pl.concat([pl.DataFrame([row("separate", 11962.0, done=3398, pending=7, never_started=1)]),
                      pl.DataFrame([KUEUE])], how="diagonal_relaxed")
    assert readout(rows).splitlines()[-1].startswith(
        "separate_kueue vs separate: NOT EQUAL WORK: separate_kueue left 244 jobs never admitted, 244 pods not "
        "started (7 in separate); separate left 1 gang never started; 3,161 of 3,405 pods done in separate_kueue "
        "against 3,398 in separate. separate_kueue saves 74%")


def test_pods_still_running_at_the_horizon_are_not_done():
    """A slower loop leaves more pods running at the horizon: less work done, said with the counts."""
    rows = pl.DataFrame([row("separate", 100.0, done=8057, pods=8152),
                         row("merged", 90.0, done=8046, running=11, pods=8152)])
    assert work.notes(rows, "loop", "separate") == {
        "merged": "NOT EQUAL WORK: merged left 11 pods still running; 8,046 of 8,152 pods done in merged against "
                  "8,057 in separate"}


def test_runs_without_work_counts_are_not_judged():
    rows = pl.DataFrame([{"loop": "separate", "seed": 0, "idle_accel_hours": 2.0},
                         {"loop": "merged", "seed": 0, "idle_accel_hours": 1.0}])
    assert work.notes(rows, "loop", "separate") == {}
    assert "equal work" not in readout(rows)


def test_several_seeds_say_how_many_differ_and_average_those():
    rows = pl.DataFrame([row("separate", 100.0, seed=s) for s in range(3)]
                        + [row("merged", 90.0, seed=0), row("merged", 90.0, seed=1, done=3403, pending=2,
                                                                     never_started=1),
                           row("merged", 90.0, seed=2, done=3401, pending=4, never_started=1)])
    assert work.notes(rows, "loop", "separate")["merged"] == (
        "NOT EQUAL WORK in 2 of 3 runs (means over those): merged left 1 gang never started, 3 pods not started; "
        "3,402 of 3,405 pods done in merged against 3,405 in separate")


def test_the_report_states_unequal_work_before_the_saving(tmp_path):
    for name, h, counts in (("separate", 100.0, {}), ("separate_kueue", 60.0, {"pods_done": 3161, "pods_pending": 244,
                                                                                "jobs_not_admitted_serving-batch": 244}),
                            ("merged", 50.0, {})):
        d = make_run(tmp_path / "runs" / name, loop_cfg(name), 0, h, 10 * h, 60.0)
        retouch(d, {"pods": 3405, "pods_done": 3405, "pods_pending": 0, "pods_bound_waiting": 0, "pods_running": 0,
                    "pods_refused": 0, "gangs_never_started": 0, **counts})
    report.build([tmp_path / "runs"], tmp_path / "out", "work")
    kueue = ("separate_kueue vs separate: NOT EQUAL WORK: separate_kueue left 244 jobs never admitted, 244 pods not "
             "started; 3,161 of 3,405 pods done in separate_kueue against 3,405 in separate. separate_kueue saves 40%")
    md = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert md[2].startswith(f"- {kueue}") and md[3].startswith("- merged saves 50%")
    assert f"<li>{html.escape(kueue)}" in (tmp_path / "out" / "report.html").read_text()
    table = next(t for t in report.build([tmp_path / "runs"], tmp_path / "again").tables if t.id == "work")
    assert table.note.endswith("NOT EQUAL WORK to separate (on some seed; the verdicts say how): separate_kueue.")
    assert [r[2] for r in table.rows] == ["3,405", "3,161", "3,405"]  # pods done: separate, separate_kueue, merged


def test_the_grid_counts_a_cell_of_unequal_work_apart(tmp_path):
    """grid_runs' 4 cells; separate leaves a gang unstarted in cell (A, error) on seed 1: the
    steps over separate are not counted there, and the headline leaves that cell out."""
    root = grid_runs(tmp_path / "runs")
    for d in root.iterdir():
        short = d.name.startswith("A-error-separate-1")
        retouch(d, {"pods": 10, "pods_done": 8 if short else 10, "pods_pending": 2 if short else 0,
                    "pods_bound_waiting": 0, "pods_running": 0, "pods_refused": 0,
                    "gangs_never_started": 1 if short else 0})
    rep = report.build([root], tmp_path / "out", "grid")
    across = {r[0]: r for r in rep.tables[3].rows}
    assert across["sees"] == ["sees", "separate_sees over separate", "5%", "3/3", "1", "no"]
    steps = pl.read_csv(tmp_path / "out" / "steps.csv").filter(step="sees")
    assert steps["equal_work"].to_list() == [False, True, True, True] and steps["holds"].to_list()[0] is False
    detail = {(r[0], r[1]): r for r in rep.tables[2].rows}
    assert detail[("sees", "scoring A, provider refuses at once")][-1] == "no: unequal work"
    # the work table says so too (it once said every variant did the baseline's work in a grid)
    table = next(t for t in rep.tables if t.id == "work")
    assert table.note.endswith("NOT EQUAL WORK to separate in the same setting (on some seed; the verdicts say how): "
                               "merged, separate_prefers, separate_sees.")
    # merged saves 28.6% (A, silent), 38.1% (B, error), 19.0% (B, silent); (A, error) apart
    assert ("merged vs separate: NOT EQUAL WORK in 1 of 8 runs: separate left 1 gang never started, 2 pods not "
            "started; 10 of 10 pods done in merged against 8 in separate. 1 of 4 settings are counted apart "
            "(scoring A, provider refuses at once). In the other 3: merged saves 19-38% of idle accelerator hours over "
            "separate, depending on scoring and provider (3 settings). It saves the least (19%) with scoring B, "
            "provider fails silently.") in rep.verdict


def test_a_grid_with_no_cell_of_equal_work_states_no_saving():
    rows = pl.DataFrame([row("separate", 100.0, policy=p) for p in "AB"]
                        + [row("merged", 50.0, done=3400, pending=5, policy=p) for p in "AB"])
    per_cell = grid.savings(rows, ["policy"], "merged", "separate")
    assert per_cell["equal_work"].to_list() == [False, False] and per_cell["holds"].to_list() == [False, False]
    assert grid.ranges_verdict("merged", "separate", per_cell, ["policy"],
                               unequal=grid.work_note(rows, ["policy"], "merged", "separate")) == (
        "merged vs separate: NOT EQUAL WORK in 2 of 2 runs (means over those): merged left 5 pods not started; "
        "3,400 of 3,405 pods done in merged against 3,405 in separate. 2 of 2 settings are counted apart "
        "(scoring A; scoring B). No saving is stated: no setting did equal work.")
