"""The compiled resource-allocation scores (`scores.allocation_scores`: kube-scheduler's
NodeResourcesFit LeastAllocated / MostAllocated and NodeResourcesBalancedAllocation) equal,
bit for bit, the same formulas written as whole-array numpy below (the form they had before
they were compiled), on random nodes, pods and resource configurations: the kernel walks one
node and one resource at a time, so its sums must keep numpy's order to keep its roundings."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scores import BALANCED, LEAST, MOST, RESOURCES, allocation_scores


def reference(strategy, resources, weights, nodes, cpu_cap, cpu_free, mem_cap, mem_free, gpu_cap, gpu_used,
              cpu, mem, gpu, gpu_milli):
    rows, allocs = [], []
    for r in resources:
        if r == 0:
            alloc = cpu_cap[nodes].astype(np.int64)
            req = alloc - cpu_free[nodes] + cpu
        elif r == 1:
            alloc = mem_cap[nodes].astype(np.int64)
            req = alloc - mem_free[nodes] + mem
        elif gpu:
            alloc = gpu_cap[nodes].astype(np.int64) * 1000
            req = gpu_used[nodes] + gpu_milli
        else:
            alloc = req = np.zeros(len(nodes), np.int64)
        rows.append(np.asarray(req, np.int64))
        allocs.append(alloc)
    req, alloc, wt = np.array(rows), np.array(allocs), np.asarray(weights, np.int64)[:, None]
    has = alloc > 0
    if strategy == BALANCED:
        frac = np.where(has, np.minimum(req / np.maximum(alloc, 1), 1.0), 0.0)
        n = has.sum(axis=0)
        mean = frac.sum(axis=0) / np.maximum(n, 1)
        std = np.sqrt((((frac - mean) ** 2) * has).sum(axis=0) / np.maximum(n, 1))
        spread = np.where(has, frac, -np.inf).max(axis=0) - np.where(has, frac, np.inf).min(axis=0)
        std = np.where(n == 2, spread / 2, np.where(n > 2, std, 0.0))
        return np.trunc((1.0 - std) * 100)
    if strategy == LEAST:
        per = np.where(req <= alloc, (alloc - req) * 100 // np.maximum(alloc, 1), 0)
    else:
        per = np.minimum(req, alloc) * 100 // np.maximum(alloc, 1)
    total, weights_had = (per * wt * has).sum(axis=0), (wt * has).sum(axis=0)
    return np.where(weights_had > 0, total // np.maximum(weights_had, 1), 0).astype(np.float64)


@st.composite
def cases(draw):
    k = draw(st.integers(1, 12))
    cpu_cap = np.array(draw(st.lists(st.sampled_from([0, 4000, 16000, 96000]), min_size=k, max_size=k)), np.int64)
    mem_cap = np.array(draw(st.lists(st.sampled_from([0, 8192, 65536, 1 << 20]), min_size=k, max_size=k)), np.int64)
    gpu_cap = np.array(draw(st.lists(st.sampled_from([0, 1, 2, 4, 8]), min_size=k, max_size=k)), np.int32)
    cpu_free = np.array([draw(st.integers(0, int(c))) for c in cpu_cap], np.int64)
    mem_free = np.array([draw(st.integers(0, int(m))) for m in mem_cap], np.int64)
    gpu_used = np.array([draw(st.integers(0, int(g) * 1000)) for g in gpu_cap], np.int64)
    resources = draw(st.permutations(range(len(RESOURCES))))[:draw(st.integers(1, 3))]
    weights = draw(st.lists(st.integers(1, 100), min_size=len(resources), max_size=len(resources)))
    gpus = draw(st.integers(0, 4))
    milli = draw(st.sampled_from([143, 500, 1000])) if gpus else 0
    nodes = np.array(draw(st.permutations(range(k))), np.int64)
    return (draw(st.sampled_from([LEAST, MOST, BALANCED])), np.array(resources, np.int64),
            np.array(weights, np.int64), nodes, cpu_cap, cpu_free, mem_cap, mem_free, gpu_cap, gpu_used,
            draw(st.integers(0, 20000)), draw(st.integers(0, 70000)), gpus > 0, gpus * milli)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_compiled_scores_equal_the_numpy_formulas(case):
    got, want = allocation_scores(*case), reference(*case)
    assert got.tobytes() == want.tobytes()  # bit for bit, -0.0 and all
