"""Conformance: a CapacityBuffer's count of fake pods (harness/services/buffers.py
`CapacityBuffer.pods`) against kubernetes/autoscaler
cluster-autoscaler/capacitybuffer/translators/replicas_test.go (TestGetBufferNumberOfPods,
TestReplicasFromPercentage).

Upstream's pod template requests 1 CPU and its limits are in CPU; ours are in GPUs (the
replica's accelerators, `limit_gpus`): a 1-GPU replica under a limit of 20 GPUs is upstream's
1-CPU pod under 20 CPUs. The scalable object is the service's Deployment, whose replicas
(spec.replicas) always exist: upstream's "percentage present but scalableReplicas nil" has no
counterpart.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.services.buffers import CapacityBuffer

ONE_GPU = np.array([1.0])


@pytest.mark.parametrize(("case", "spec", "scalable", "expected"), [
    ("Only Replicas", {"replicas": 5}, 0, 5),
    ("Only Percentage", {"replicas": None, "percentage": 200}, 10, 20),
    ("Replicas and Percentage (Replicas larger)", {"replicas": 25, "percentage": 200}, 10, 25),
    ("Replicas and Percentage (Percentage larger)", {"replicas": 15, "percentage": 200}, 10, 20),
    ("Replicas and Limits (Limits smaller)", {"replicas": 25, "limit_gpus": 20}, 0, 20),
    ("Replicas and Limits (Replicas smaller)", {"replicas": 15, "limit_gpus": 20}, 0, 15),
    ("Percentage and Limits (Limits smaller)", {"replicas": None, "percentage": 250, "limit_gpus": 20}, 10, 20),
    ("Only Limits", {"replicas": None, "limit_gpus": 20}, 0, 20),
])
def test_get_buffer_number_of_pods(case, spec, scalable, expected):
    """replicas_test.go TestGetBufferNumberOfPods, case `case`."""
    assert CapacityBuffer(**spec).pods(np.array([scalable]), ONE_GPU).tolist() == [expected]


def test_get_buffer_number_of_pods_nothing_specified():
    """replicas_test.go TestGetBufferNumberOfPods "Nothing specified": an error upstream (the
    buffer is not provisioned); refused here, naming the key."""
    with pytest.raises(ConfigError, match="^buffer"):
        CapacityBuffer(replicas=None)


@pytest.mark.parametrize(("percentage", "scalable", "expected"), [
    (200, 10, 20), (50, 10, 5), (0, 10, 0), (50, 0, 0), (33, 10, 3)])
def test_replicas_from_percentage(percentage, scalable, expected):
    """replicas_test.go TestReplicasFromPercentage: 200% of 10, 50% of 10, 0% of 10, 50% of 0,
    rounding down (3.3 -> 3); one service per case, all at once."""
    buffer = CapacityBuffer(replicas=None, percentage=percentage)
    assert buffer.pods(np.array([scalable, scalable]), np.ones(2)).tolist() == [expected, expected]


def test_a_limit_counts_a_replica_s_gpus():
    """Ours: a 2-GPU replica under a 5-GPU limit is 2 fake pods; a replica without GPUs is
    none (upstream: "resources in configured limits not found in the pod template")."""
    assert CapacityBuffer(replicas=9, limit_gpus=5).pods(np.zeros(2, np.int64), np.array([2.0, 0.0])).tolist() == [2, 0]
