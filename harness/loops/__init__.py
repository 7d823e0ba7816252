"""The control loops a trace is replayed through: the separate loops (a scheduler and an
autoscaler, each with its own view) and the merged loop (one planner), with the autoscalers
and scale-down they are built from. base.py says what a loop and an autoscaler provide and what
they may ask of the simulation; a new loop is a class meeting `Loop` and a conf/loop/*.yaml."""
