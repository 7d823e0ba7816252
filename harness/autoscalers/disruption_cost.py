"""Karpenter's disruption cost of nodes (its consolidation's candidate order): the summed
eviction costs of the pods on each, in one compiled pass over the pods (a kernel of its own
module, so that an edit of the consolidation does not recompile every kernel)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def disruption_costs(pod_node, eviction_cost, nodes, n_slots):
    """Per node of `nodes`, the eviction costs of the pods on it (`pod_node`: each pod's node,
    -1 for none) summed in pod order from 0.0, as a weighted bincount adds them, so the same
    floats; in one pass over the pods that writes only the nodes asked about (a poll asks about
    a few hundred nodes and numpy built three arrays over every pod for them)."""
    asked = np.zeros(n_slots, np.bool_)
    for n in nodes:
        asked[n] = True
    total = np.zeros(n_slots)
    for p in range(len(pod_node)):
        n = pod_node[p]
        if n >= 0 and asked[n]:
            total[n] += eviction_cost[p]
    out = np.empty(len(nodes))
    for i in range(len(nodes)):
        out[i] = total[nodes[i]]
    return out
