"""The control loops a trace is replayed through: the separate loops (a scheduler and an
autoscaler, each with its own view) and the merged loop (one planner), with the autoscalers
and scale-down they are built from."""
