"""The autoscalers the separate loops pair with the scheduler, and their parts: Cluster
Autoscaler (its estimator, ProvisioningRequests, expanders, node-group backoff), Karpenter, and
the scale-down both the separate and the merged loop use. A loop (harness/loops/) is built from
these; none of them knows which loop drives it."""
