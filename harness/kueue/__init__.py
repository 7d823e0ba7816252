"""A Kueue-like admission layer in front of any loop.

`queues` reads the `kueue:` section of the cluster YAML (ResourceFlavors, ClusterQueues with
their cohorts and quotas, LocalQueues); `admission` keeps the quota books and runs Kueue's
admission cycle; `loop.KueueLoop` wraps a loop: a job's pods reach its scheduler only once
Kueue admitted the job whole.
"""
