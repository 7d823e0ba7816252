"""loopbench: replay GPU workload traces through Kubernetes' scheduler and autoscalers."""

import os

# polars splits a group-by over threads and adds the partial sums in whatever order they finish,
# so a mean's last digit varies from run to run; one thread makes every table reproducible to
# the bit. Set before polars is first imported (a user's own setting wins).
os.environ.setdefault("POLARS_MAX_THREADS", "1")
