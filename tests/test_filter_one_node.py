"""The Filter on one node of a pod with claims (`filters._claims_feasible_at`: the compiled pass's
checks in Python, the compiled search only where the claims' stamp cache does not know the node)
answers as the compiled pass over every node does, at every such call of a replay that asks it
in every situation: DRA claims on the scale cluster, gangs queued, nodes coming and going."""

from __future__ import annotations

from collections import Counter

import harness.filters as filters
from harness.config import compose
from harness.replay import build
from tests.test_pinned_outputs import TRACE


def test_the_filter_on_one_node_is_the_filter_over_all_nodes(monkeypatch):
    asked: list[tuple[bool, bool]] = []
    answers: Counter = Counter()
    one_node, look_up = filters._claims_feasible_at, filters.cached_answer

    def counted(*args):
        known = look_up(*args)
        answers[known] += 1
        return known

    def checked(state, w, pod, claims, usable, n):
        got = one_node(state, w, pod, claims, usable, n)
        asked.append((got, bool(filters._claims_feasible(state, w, pod, claims, usable, None)[n])))
        return got

    monkeypatch.setattr(filters, "_claims_feasible_at", checked)
    monkeypatch.setattr(filters, "cached_answer", counted)
    sim, loop = build(compose("config", ["loop=separate_workload", "cluster=scale", f"trace.path={TRACE}",
                                         "horizon_s=3600"]))
    sim.run(loop)
    assert answers[-1] and answers[0] and answers[1], answers  # searched, and known either way
    assert sum(got for got, _ in asked) and not all(got for got, _ in asked)
    assert [got for got, _ in asked] == [whole for _, whole in asked]
