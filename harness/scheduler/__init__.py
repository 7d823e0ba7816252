"""The kube-scheduler-like scheduler, a framework of extension points that run lists of plugins
(framework.py; what a plugin is: plugin.py), with one module per kind of plugin: queue_sort,
filter, capacity (PreFilter), gang (PreFilter, Permit and PostFilter), preemption
(PostFilter), bind; Score plugins are the policies of harness.scores."""

from harness.scheduler.framework import Scheduler

__all__ = ["Scheduler"]
