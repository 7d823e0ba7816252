"""Compiling a trace against a cluster: model bits, partition profiles, pods that never fit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.workload import compile_workload, unique_rows
from tests import scenarios as sc


def test_models_profiles_and_never_fits():
    cl = Cluster(node_types=[sc.node_type("h", gpu_model="H100", partition_profiles=["1g"]),
                             {**sc.node_type("l"), "gpu_model": "L4"}],
                 pools=[sc.pool("h", "h"), sc.pool("l", "l")], partition_profiles={"1g": 143, "7g": 1000})
    table = sc.trace([
        {"gpu_models": []},                       # any model
        {"gpu_models": ["L4", "A100"]},           # A100 unknown: L4 only
        {"gpu_models": ["A100"]},                 # no such model here: never fits
        {"gpu_milli": 0, "gpu_partition": "1g"},  # 143 milli of one GPU, H100 nodes only
        {"gpu_milli": 0, "gpu_partition": "9g"},  # unknown profile: never fits
        {"gpu_milli": 0, "gpu_partition": "7g"},  # known profile no node type offers: never fits
        {"gpu_count": 9},                         # larger than any node: never fits
    ])
    w = compile_workload(table, cl)
    h100, l4 = cl.model_bit("H100"), cl.model_bit("L4")
    assert w.model_mask.tolist() == [0, l4, 0, 0, 0, 0, 0]
    assert w.milli.tolist() == [1000, 1000, 1000, 143, 0, 1000, 1000]
    assert w.profile_bit.tolist()[3] == 1 << cl.profiles.index("1g") and w.profile_bit.tolist()[4] == 0
    assert w.never_fits.tolist() == [False, False, True, False, True, True, True]
    assert h100 != l4


def test_pods_of_jobs_follow_the_jobs_in_the_order_asked():
    cl = Cluster(node_types=[sc.node_type("h")], pools=[sc.pool("h", "h")])
    # jobs interleaved in the trace: job "b" has pods 0 and 3, "a" pods 1 and 4, "c" pod 2
    w = compile_workload(sc.trace([{"job_id": j} for j in ["b", "a", "c", "b", "a"]]), cl)
    a, b, c = (list(w.job_id).index(j) for j in "abc")
    assert w.pods_of(np.array([b, c, a])).tolist() == [0, 3, 2, 1, 4]
    assert w.pods_of(np.array([c])).tolist() == [2] and len(w.pods_of(np.zeros(0, np.int64))) == 0
    for j in range(w.n_jobs):
        assert w.pods_of(np.array([j])).tolist() == w.job_pods[j].tolist()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(1, 9), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_unique_rows_is_numpys_row_unique(n, k, spread, seed):
    """`unique_rows` (a lexsort of the columns) gives what np.unique(axis=0) gives: the same
    distinct rows in the same order (shape ids follow it), inverse and counts; negative values
    and repeated rows included."""
    key = np.random.default_rng(seed).integers(-spread, spread + 1, (n, k))
    rows, inverse, counts = unique_rows(key)
    want_rows, want_inverse, want_counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    assert rows.tolist() == want_rows.tolist()
    assert inverse.tolist() == want_inverse.ravel().tolist() and counts.tolist() == want_counts.tolist()
