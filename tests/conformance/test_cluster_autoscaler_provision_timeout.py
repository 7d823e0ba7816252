"""Cluster Autoscaler's scale-up timeout (--max-node-provision-time, 15 min by default): a node
that has not come up that long after it was asked for is deleted and its node group backed off;
until then it counts as capacity on its way. Against a `silent` provider (harness/cloud.py),
whose shortage shows only as nodes that never come up.

Upstream: kubernetes/autoscaler cluster-autoscaler/clusterstate/clusterstate.go (scale-up
requests expire after MaxNodeProvisionTime, RegisterFailedScaleUp with reason Timeout backs the
node group off; GetUpcomingNodes stops counting nodes unregistered that long) and
core/static_autoscaler.go (removeOldUnregisteredNodes deletes them); the best-effort-atomic
ProvisioningRequest class (provisioningrequest/besteffortatomic/provisioning_class.go) admits
the workload once the scale-up is requested, without waiting for the nodes.
"""

from __future__ import annotations

import numpy as np

from harness.autoscalers.expanders import Chain, Price
from harness.cluster import Cluster
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc


def replay(pools: list[dict], pods: list[dict], horizon_s: float, **autoscaler) -> Simulation:
    cl = Cluster(node_types=[sc.node_type("h100")], pools=pools, autoscaling=True, name="timeout")
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=horizon_s)
    autoscaler.setdefault("expander", Chain([Price()]))
    sim.run(sc.separate(**autoscaler))
    return sim


def records(sim: Simulation, pool: int = 0) -> list[tuple[float, float]]:
    """(requested, removed) of each node of the pool, in request order (nan: still there)."""
    return [(r.requested_at, r.removed_at) for r in sim.nodes if r.pool == pool]


#: four pods of 8 GPUs: one new node each
FOUR = [{"gpu_count": 8}] * 4


def test_expired_scale_up_deletes_the_nodes_and_backs_the_pool_off():
    """clusterstate_test.go TestExpiredScaleUp: MaxNodeProvisionTime 2 min, a scale-up of 4
    nodes of ng1 that never registered -> RegisterFailedScaleUp(Timeout) and ng1 unhealthy (backed
    off). Here: 4 asked at 0 of a silent pool with no stock; at the 120 s scan they are deleted
    and the pool backed off 300 s (the initial backoff), so nothing is asked before 420 s."""
    pool = sc.pool("gpu", "h100", max_size=8, stock=0, shortage="silent")
    sim = replay([pool], FOUR, horizon_s=410.0, max_node_provision_time_s=120.0)
    assert records(sim) == [(0.0, 120.0)] * 4  # and none asked by 410 s: backed off to 420 s


def test_backoff_after_a_timeout_runs_out_and_the_pool_is_asked_again():
    """After the backoff (300 s from the 120 s timeout) the pool is an option again: 4 more asked
    at 420 s, which time out at 540 s, and the next backoff doubles (600 s: asked again at 1140 s)."""
    pool = sc.pool("gpu", "h100", max_size=8, stock=0, shortage="silent")
    sim = replay([pool], FOUR, horizon_s=1200.0, max_node_provision_time_s=120.0)
    assert records(sim) == [(0.0, 120.0)] * 4 + [(420.0, 540.0)] * 4 + [(1140.0, 1200.0)] * 4


def test_booting_nodes_count_as_upcoming_until_the_timeout():
    """clusterstate_test.go TestUnregisteredNodes / TestUpcomingNodes: a node asked for and not
    yet up is upcoming capacity, so the pods it would take ask for nothing more meanwhile; past
    MaxNodeProvisionTime it is no longer counted (here: deleted). No second request before 900 s."""
    pool = sc.pool("gpu", "h100", max_size=8, stock=0, shortage="silent")
    sim = replay([pool], FOUR, horizon_s=899.0)
    assert records(sim) == [(0.0, 899.0)] * 4  # still there at the horizon, nothing asked twice


def test_a_real_node_slower_than_the_timeout_is_given_up_too():
    """The timeout does not know why a node is late: a real node booting 1,000 s (an `error`
    pool with stock) is deleted at the 900 s scan, its ready event void, and the pool backed off."""
    pool = sc.pool("gpu", "h100", boot_s=1000.0, max_size=8)
    sim = replay([pool], [{"gpu_count": 8}], horizon_s=1100.0)
    first = sim.nodes[0]
    assert (first.requested_at, first.removed_at) == (0.0, 900.0) and np.isnan(first.ready_at)


def test_pods_wait_on_capacity_that_stock_allowed_and_the_phantoms_go():
    """Stock 2 of 4 asked, silently: two nodes come up at 300 s and run two pods; the two
    phantoms are deleted at 900 s and the pool backed off; the other two pods stay pending."""
    pool = sc.pool("gpu", "h100", max_size=8, stock=2, shortage="silent")
    sim = replay([pool], FOUR, horizon_s=1000.0)
    assert records(sim) == [(0.0, 1000.0)] * 2 + [(0.0, 900.0)] * 2
    assert (sim.pod_status == 3).sum() == 2  # RUNNING


def test_provisioning_request_on_phantoms_moves_on_once_the_pool_is_backed_off():
    """best-effort-atomic admits a gang once its scale-up is requested (provisioning_class.go:
    "without waiting to verify that resources started"); the booking lasts its 10 min
    (BookingExpired) whatever the nodes do, and upcoming nodes count as capacity, as upstream.
    A gang of 2 x 8 GPUs, a cheap silent pool with no stock and a dear one, by hand:
      0      cheap asked for 2 (phantoms), booked to 600; at 610 the gang fits the upcoming
             phantoms: booked again to 1210;
      900    the phantoms time out: deleted, cheap backed off 300 s (to 1200);
      1220   the booking over, cheap is an option again: 2 more phantoms, booked to 1820, again
             at 1830 to 2430;
      2120   they time out: cheap backed off 600 s (doubled: to 2720);
      2440   the booking over, cheap backed off: dear asked; up at 2740, the gang starts."""
    cheap = sc.pool("cheap", "h100", max_size=4, stock=0, shortage="silent", price_on_demand=1.0)
    dear = sc.pool("dear", "h100", max_size=4, price_on_demand=2.0)
    gang = [{"gpu_count": 8, "job_id": "g", "min_member": 2}] * 2
    sim = replay([cheap, dear], gang, horizon_s=3600.0, provisioning_request=True, gang_aware=True)
    assert records(sim, 0) == [(0.0, 900.0)] * 2 + [(1220.0, 2120.0)] * 2
    assert records(sim, 1) == [(2440.0, 3600.0)] * 2
    assert sim.job_started[0] == 2740.0
