"""bench_scale's verdicts: which target a run is judged against, at which sizes."""

from __future__ import annotations

from benchmarks.bench_scale import verdict


def run(finished: bool = True, peak_mib: float = 500.0) -> dict:
    return {"finished": finished, "peak_mib": peak_mib}


def test_merged_and_native_gangs_are_judged_per_100k_pods_at_every_size():
    # 25 units per 100k pods: 75 at 300k, 250 at 1M
    assert verdict("merged", 300_000, 74.0, run()) == "met (<= 75)"
    assert verdict("merged", 1_000_000, 251.0, run()) == "MISSED (<= 250)"
    assert verdict("separate_workload", 100_000, 26.0, run()) == "MISSED (<= 25)"
    assert verdict("separate_workload", 10_000, 2.4, run()) == "met (<= 2.5)"


def test_the_other_separate_loops_are_judged_at_100k_only():
    assert verdict("separate", 100_000, 149.0, run()) == "met (<= 150)"
    assert verdict("separate_karpenter", 100_000, 151.0, run()) == "MISSED (<= 150)"
    assert verdict("separate_provreq", 1_000_000, 5_000.0, run()) == "-"
    assert verdict("separate", 100_000, 40.0, run(finished=False)) == "MISSED (stopped; <= 150 units)"


def test_memory_is_judged_for_every_loop_first():
    assert verdict("separate_2026", 10_000, 1.0, run(peak_mib=2049)) == "MISSED (over 2,048 MiB)"
    assert verdict("separate_2026", 10_000, 1.0, run()) == "-"
