"""Kueue TAS conformance: upstream's own topology assignment cases, translated.

Upstream: kubernetes-sigs/kueue, pkg/cache/tas_cache_test.go `TestFindTopologyAssignment`
(the BestFit cases; BestFit is the default profile). Its `defaultNodes`, kept as is:

         b1                  b2
      /      \\            /      \\
     r1       r2         r1       r2
     |      /  |  \\       |        |
     x1    x2  x3  x4     x5       x6

every node 1 cpu, but x6 2 cpu; each pod asks 1 cpu, so a node takes as many pods as its cpus.
Levels (block, rack) unless said. A leaf here is a node: `paths` gives each node's block and
rack, numbered in label order (b1 < b2; b1/r1 < b1/r2 < b2/r1 < b2/r2); the assignment is
compared per rack, as upstream's (block, rack) domains.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.kueue.tas import Topology

BLOCK, RACK = 0, 1
#                    x1  x2  x3  x4  x5  x6
COUNTS = np.array([1, 1, 1, 1, 1, 2])
PATHS = np.array([[0, 0], [0, 1], [0, 1], [0, 1], [1, 2], [1, 3]])
NAMES = {0: ("b1", "r1"), 1: ("b1", "r2"), 2: ("b2", "r1"), 3: ("b2", "r2")}


def by_rack(got, paths=PATHS) -> dict[tuple[str, str], int] | None:
    if got is None:
        return None
    out: dict[tuple[str, str], int] = {}
    for leaf, k in got:
        key = NAMES[int(paths[leaf, RACK])]
        out[key] = out.get(key, 0) + k
    return out


@pytest.mark.parametrize("level, required, count, want", [
    # "rack required; multiple Pods fit in some racks; BestFit": racks hold 1, 3, 1, 2: the
    # least room that still holds 2 is b2/r2
    (RACK, True, 2, {("b2", "r2"): 2}),
    # "rack required; too many pods to fit in any rack; BestFit": at most 3 in a rack
    (RACK, True, 4, None),
    # "block required; single Pod fits in a block and a single rack; BestFit": blocks hold 4
    # and 3: best fit b2, then its racks r2 (2) and r1 (1): best fit r1
    (BLOCK, True, 1, {("b2", "r1"): 1}),
    # "block required; Pods fit in a block spread across two racks; BestFit"
    (BLOCK, True, 4, {("b1", "r2"): 3, ("b1", "r1"): 1}),
    # "block required; too many Pods to fit requested; BestFit": at most 4 in a block
    (BLOCK, True, 5, None),
    # "rack preferred; but only block can accommodate the workload; BestFit"
    (RACK, False, 4, {("b1", "r2"): 3, ("b1", "r1"): 1}),
    # "rack preferred; but only multiple blocks can accommodate the workload; BestFit": no
    # block holds 6: blocks b1 (4) then b2 (2), then their racks roomiest first
    (RACK, False, 6, {("b1", "r2"): 3, ("b2", "r2"): 2, ("b1", "r1"): 1}),
    # "block preferred; but only multiple blocks can accommodate the workload; BestFit"
    (BLOCK, False, 6, {("b1", "r2"): 3, ("b2", "r2"): 2, ("b1", "r1"): 1}),
    # "block preferred; but the workload cannot be accommodate in entire topology; BestFit":
    # 7 pods fit in all
    (BLOCK, False, 10, None),
])
def test_find_topology_assignment_default_nodes(level, required, count, want):
    """kubernetes-sigs/kueue pkg/cache/tas_cache_test.go TestFindTopologyAssignment, the
    cases named in the parameters' comments (defaultNodes, two levels)."""
    assert by_rack(Topology(PATHS).assign(COUNTS, level, count, required)) == want


def test_minimize_the_number_of_used_racks_before_optimizing_the_number_of_nodes():
    """kubernetes-sigs/kueue pkg/cache/tas_cache_test.go TestFindTopologyAssignment "minimize
    the number of used racks before optimizing the number of nodes; BestFit": block b1 with
    racks r1 (x1: 2 cpu), r2 (x2: 2 cpu), r3 (x3..x6: 1 cpu each); block required, 4 pods of
    1 cpu, three levels (block, rack, hostname): one rack, r3, on its four nodes (not two
    racks of two nodes)."""
    counts = np.array([2, 2, 1, 1, 1, 1])
    paths = np.array([[0, 0, 0], [0, 1, 1], [0, 2, 2], [0, 2, 3], [0, 2, 4], [0, 2, 5]])
    got = Topology(paths).assign(counts, BLOCK, 4, required=True)
    assert sorted(got) == [(2, 1), (3, 1), (4, 1), (5, 1)]
