"""`buffer=`: composed by replay beside `replicas=`, refused with one line naming the key where it
cannot be had (numbers of the buffers themselves: tests/test_buffers_golden.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.config import compose
from harness.errors import ConfigError, LoopbenchError
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.summary import readout

SERVICES = ["trace=services", "replicas=hpa", "horizon_s=600"]


def built(*overrides: str):
    return build(compose("config", [*SERVICES, *overrides]))


def test_overprovisioning_adds_one_placeholder_per_service_and_copy():
    """The bundled services (chat, large, embed; lowest priority 200) with 2 placeholders each:
    6 pause pods `<service>/pause-<k>` of the replica's shape, at priority -1, arriving at 0."""
    sim, _ = built("loop=separate_preemption", "buffer=overprovisioning", "buffer.placeholders=2")
    w = sim.w
    pause = w.job_placeholder.nonzero()[0]
    assert sorted(w.job_id[pause]) == [f"{s}/pause-{k}" for s in ("chat", "embed", "large") for k in (0, 1)]
    assert (w.job_priority[pause] == -1).all() and (w.job_submit[pause] == 0).all()
    slot0 = w.services.slot_job[w.services.slot_bounds[:-1]]  # each service's first replica slot
    by_service = {str(w.job_id[j]).split("/")[0]: w.shape[w.job_pods[j][0]] for j in slot0}
    assert all(w.shape[w.job_pods[j][0]] == by_service[str(w.job_id[j]).split("/")[0]] for j in pause)


def test_placeholders_do_not_set_the_default_horizon():
    """A services-only trace ends at its services' last demand window; placeholders arrive at 0
    but are none of the trace's pods, so they do not make it a day after 0 (the replay of a
    5.9 h services trace with placeholders ran 24 h, its replicas idling). The window: a
    services table cut to demand before 3 h."""
    from harness.replay import default_horizon

    sim, _ = build(compose("config", ["trace=services", "replicas=hpa", "loop=separate_preemption",
                                      "buffer=overprovisioning"]))
    w = replace(sim.w, services=replace(sim.replicasets.svc, demand_start=np.minimum(sim.replicasets.svc.demand_start, 3 * 3600.0)))
    assert w.job_placeholder.any() and default_horizon(w) == 3 * 3600.0


@pytest.mark.parametrize(("overrides", "key"), [
    (["trace=default", "replicas=none", "buffer=overprovisioning"], "buffer"),  # no services
    (["buffer=overprovisioning"], "loop.scheduler.post_filter"),  # loop=separate: no preemption
    (["loop=merged", "buffer=overprovisioning"], "buffer"),
    (["loop=separate_preemption", "buffer=overprovisioning", "buffer.priority=200"], "buffer.priority"),
    (["loop=separate_preemption", "buffer=overprovisioning", "buffer.priority=-11"], "buffer.priority"),
    (["loop=separate_preemption", "buffer=overprovisioning", "buffer.placeholders=0"], "buffer.placeholders"),
    (["loop=separate_karpenter", "buffer=capacity_buffer"], "buffer"),  # only the CA-like autoscaler reads it
    (["loop=merged", "buffer=capacity_buffer"], "buffer"),
    (["loop=separate_kueue", "buffer=capacity_buffer"], "buffer"),  # behind Kueue: neither
    (["loop=separate_kueue", "buffer=overprovisioning"], "buffer"),
    (["buffer=capacity_buffer", "buffer.replicas=null"], "buffer"),  # nothing specified
    (["buffer=capacity_buffer", "buffer.percentage=-5"], "buffer.percentage"),
])
def test_a_buffer_it_cannot_have_is_refused_by_key(overrides, key):
    """One line, starting with the key (a setting's rule, or the buffer's own refusal)."""
    with pytest.raises(LoopbenchError) as err:
        build(compose("config", [*SERVICES, *overrides]))
    assert str(err.value).startswith(key) and "\n" not in str(err.value)
    assert isinstance(err.value, ConfigError)


def test_the_readout_prints_the_buffer_row():
    sim, loop = built("loop=separate_preemption", "buffer=overprovisioning")
    sim.run(loop)
    text = readout(summary_row(sim, jobs_frame(sim), nodes_frame(sim), {"loop": loop.name}))
    assert "idle: buffer placeholders" in text


def test_a_capacity_buffer_joins_the_cluster_autoscaler_without_pods():
    """buffer=capacity_buffer on the plain separate loops (no preemption needed): no placeholder
    in the workload; the autoscaler keeps one fake pod per service."""
    sim, loop = built("buffer=capacity_buffer")
    assert not sim.w.job_placeholder.any()
    assert loop.inner.autoscaler.buffer is not None and loop.inner.autoscaler.buffer.replicas == 1


def test_a_services_trace_given_as_its_pods_alone_names_the_files_beside_it():
    """traces/services.parquet has no pods: without trace.services and trace.demand it cannot
    replay, and the message names the two tables beside it."""
    with pytest.raises(LoopbenchError) as err:
        build(compose("config", ["trace.path=traces/services.parquet"]))
    message = str(err.value)
    assert "trace has no pods, only services" in message and "\n" not in message
    assert "trace.services=" in message and message.count("services.services.parquet") == 2
    assert "trace.demand=" in message and message.count("services.demand.parquet") == 2
