"""The FGD fragmentation measure F_n (harness/fragmentation.py), golden numbers by hand.

Target workload of four shapes (popularity in brackets), model bits A=1, B=2:
  m0 CPU-only, 1000 CPU                     (0.1)  -> always all idle GPU milli
  m1 share 500 of 1 GPU, 2000 CPU, any model  (0.4)
  m2 2 whole GPUs, 4000 CPU, any model        (0.2)
  m3 share 300 of 1 GPU, 1000 CPU, model B    (0.3)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.fragmentation import TargetWorkload, node_fragmentation

A, B = 1, 2
TARGET = TargetWorkload(cpu=np.array([1000, 2000, 4000, 1000]), gpus=np.array([0, 1, 2, 1], np.int32),
                        milli=np.array([0, 500, 1000, 300], np.int32), model_mask=np.array([0, 0, 0, B]),
                        popularity=np.array([0.1, 0.4, 0.2, 0.3]))


def frag(free: list[int], cap: int, cpu: int, model: int, target=TARGET) -> float:
    row = np.zeros((1, 4), np.int32)
    row[0, :len(free)] = free
    return float(node_fragmentation(row, np.array([cap]), np.array([cpu]), np.array([model]), target)[0])


def test_every_branch_on_one_node():
    # free [1000, 600, 200, 0] on model A, G = 1800:
    #   m0 no GPU -> 1800; m1 fits (1000, 600) -> leftover 200 + 0 = 200;
    #   m2 needs 2 whole GPUs, has 1 -> 1800; m3 model B not allowed -> 1800
    assert frag([1000, 600, 200, 0], 4, 8000, A) == pytest.approx(0.1 * 1800 + 0.4 * 200 + 0.2 * 1800 + 0.3 * 1800)


def test_cpu_lacking_counts_all_idle():
    # model B, free [1000, 1000], G = 2000, only 1500 CPU free: m1 (2000) and m2 (4000) lack CPU;
    # m3 fits (1000 CPU, model B) with no GPU below 300 -> 0
    assert frag([1000, 1000], 2, 1500, B) == pytest.approx(0.1 * 2000 + 0.4 * 2000 + 0.2 * 2000 + 0.0)


def test_not_enough_fitting_gpus_and_leftover_sum():
    # model B, free [1000, 250, 100, 400], G = 1750:
    #   m1: fits on 1000 -> leftover 250 + 100 + 400 = 750; m2: one whole GPU < 2 -> 1750;
    #   m3: fits (1000, 400) -> leftover 250 + 100 = 350
    assert frag([1000, 250, 100, 400], 4, 8000, B) == pytest.approx(175 + 0.4 * 750 + 0.2 * 1750 + 0.3 * 350)


def test_all_idle_when_no_shape_fits():
    assert frag([250, 100], 2, 8000, B) == pytest.approx(350.0)


def test_full_node_and_node_without_gpus_contribute_zero():
    assert frag([0, 0], 2, 8000, A) == 0.0
    assert frag([], 0, 32000, 0) == 0.0


def test_vectorized_over_nodes_matches_single_rows():
    rows = np.array([[1000, 600, 200, 0], [1000, 1000, 0, 0], [1000, 250, 100, 400], [0, 0, 0, 0]], np.int32)
    caps, cpu, model = np.array([4, 2, 4, 0]), np.array([8000, 1500, 8000, 32000]), np.array([A, B, B, 0])
    got = node_fragmentation(rows, caps, cpu, model, TARGET)
    assert got == pytest.approx([1160.0, 1400.0, 930.0, 0.0])


def test_target_keeps_most_frequent_shapes_until_coverage():
    # shapes by count: X x5, Y x3, Z x1, W x1 (10 pods)
    cpu = np.array([1] * 5 + [2] * 3 + [3, 4])
    zeros = np.zeros(10, np.int64)
    t = TargetWorkload.from_pods(cpu, zeros, zeros, zeros, coverage=0.75)
    assert list(t.cpu) == [1, 2]  # 50% then 80% >= 75%
    assert t.popularity == pytest.approx([5 / 8, 3 / 8])
    assert len(TargetWorkload.from_pods(cpu, zeros, zeros, zeros, coverage=0.95)) == 4


TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-gpu-v2023"


@pytest.mark.shared_traces
def test_default_trace_typical_shapes_as_published():
    """FGD.md: top 35 of 91 shapes, covering 7,766 of 8,152 pods."""
    if not TRACES.exists():
        pytest.skip(f"public traces not found at {TRACES} (the shared folder beside the repo)")
    from harness.importers.openb import read_openb_pods

    t = read_openb_pods(TRACES / "openb_pod_list_default.csv")
    cpu, gpus, milli = (t.column(c).to_numpy() for c in ("cpu_milli", "gpu_count", "gpu_milli"))
    models = np.zeros(len(cpu), np.int64)  # the default trace has no gpu_spec
    _, counts = np.unique(np.stack([cpu, milli, gpus], axis=1), axis=0, return_counts=True)
    target = TargetWorkload.from_pods(cpu, gpus, milli, models)
    assert (len(counts), len(target)) == (91, 35)
    assert np.sort(counts)[::-1][:35].sum() == 7766
