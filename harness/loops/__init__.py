"""The control loops a trace is replayed through: the separate loops (a scheduler and an
autoscaler, each with its own view) and the merged loop (one planner). base.py says what a loop
provides and what it may ask of the simulation; a new loop is a class meeting `Loop` and a
conf/loop/*.yaml. The autoscalers the loops are built from are in harness/autoscalers/."""
