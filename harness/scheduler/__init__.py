"""The kube-scheduler-like scheduler, a framework of named extension points (framework.py),
with one module per kind of plugin: queue_sort, filter, capacity (PreFilter), gang (Permit and
PostFilter); Score plugins are the policies of harness.scores."""

from harness.scheduler.framework import Scheduler

__all__ = ["Scheduler"]
