"""`Simulation.unbind_many` is `unbind` pod after pod, bit for bit: every array, counter, float
sum, queue and set of the simulation, its cluster state and its accounting ends the same.
The pods sit on shared nodes (a node's fragmentation is re-measured after each of its pods:
`frag_ready` is a running float sum), some bound and waiting for their gang, some running, some
ready service replicas and running overprovisioning placeholders."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from harness.config import compose
from harness.replay import build
from harness.status import BOUND, RUNNING
from tests import scenarios as sc


def settled():
    """Three 8-GPU nodes: gang j0 (3 x 4 GPUs) runs, gang j1 (4 x 3 GPUs) has 3 members bound
    and waiting (no gang plugin releases them), two GPU shares run on the GPUs left."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=3, max_size=3)], autoscaling=False)
    pods = ([{"job_id": "j0", "gpu_count": 4, "min_member": 3}] * 3 + [{"job_id": "j1", "gpu_count": 3, "min_member": 4}] * 4
            + [{"job_id": "s0", "gpu_milli": 500}, {"job_id": "s1", "gpu_milli": 500, "submit_s": 10.0}])
    _, sim = sc.run(sc.trace(pods), cl, sc.separate("none"), horizon_s=600.0)
    return sim


def serving():
    """The bundled services with HPA and two overprovisioning placeholders each, after 30 min:
    ready replicas (their readiness ends when unbound) and running placeholders (their held
    room is the buffer's) on shared nodes."""
    sim, loop = build(compose("config", ["trace=services", "replicas=hpa", "horizon_s=1800", "loop=separate_preemption",
                                         "buffer=overprovisioning", "buffer.placeholders=2"]))
    sim.run(loop)
    return sim


def snapshot(sim) -> dict:
    """Everything unbinding may change, as plain values."""
    out = {}
    extensions = () if sim.replicasets is None else (("replicas", sim.replicasets), ("replicas.acct", sim.replicasets.acct))
    for owner, obj in (("sim", sim), ("state", sim.state), ("acct", sim.acct), ("ledger", sim.ledger), *extensions):
        for name, value in vars(obj).items():
            if isinstance(value, np.ndarray):
                out[f"{owner}.{name}"] = value.copy()
            elif isinstance(value, (int, float, list, tuple, dict)) and not name.startswith("_frag_memo"):
                out[f"{owner}.{name}"] = copy.deepcopy(value)
    out["sim.node_pods"] = [sorted(s) for s in sim.node_pods]
    out["sim.pod_gpus"] = [None if g is None else g.tolist() for g in sim.pod_gpus]
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=key, strict=True)
        else:
            # repr: floats bit for bit, nan equal to nan; events name their simulation by address
            assert re.sub(" at 0x[0-9a-f]+", "", repr(x)) == re.sub(" at 0x[0-9a-f]+", "", repr(y)), key


@pytest.mark.parametrize("which", ["waiting gang", "all, node by node", "services, node by node"])
def test_unbind_many_is_unbind_in_turn(which, monkeypatch):
    monkeypatch.setattr("harness.sim.UNBIND_IN_TURN_BELOW", 2)  # the vector steps, even for these few pods
    sim = serving() if which.startswith("services") else settled()
    status = sim.pod_status
    if which.startswith("services"):
        on = (status == RUNNING) & (sim.w.job_placeholder[sim.w.job] | np.isfinite(sim.replicasets.ready_at[sim.w.job]))
        assert sim.placeholder[on].sum() >= 2 and (on & ~sim.placeholder).sum() >= 2  # the scene is as described
    else:
        assert (status == RUNNING).sum() == 5 and (status == BOUND).sum() == 3
    pods = np.flatnonzero(status == BOUND)  # Coscheduling's release of a waiting gang
    if which != "waiting gang":
        pods = np.flatnonzero((status == BOUND) | (status == RUNNING))
        pods = pods[np.lexsort((-pods, sim.pod_node[pods]))]  # a node's pods one after another, shares first
        assert len(np.unique(sim.pod_node[pods])) < len(pods)
    batched, stepped = sim, copy.deepcopy(sim)
    batched.unbind_many(pods)
    for p in pods.tolist():
        stepped.unbind(p)
    assert_same(snapshot(batched), snapshot(stepped))
    assert (batched.pod_status[pods] != RUNNING).all()
