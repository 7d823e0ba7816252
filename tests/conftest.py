"""Hypothesis explores new examples on developers' machines; CI (CI=true) replays a fixed
set, so a red CI run always points at a change, never at a lucky draw. Kernels cached from
other kernel sources are dropped before any test calls one (harness/kernel_cache.py), and
Hydra compositions and YAML loads are remembered (tests/compose_memo.py), before any test module imports them."""

from __future__ import annotations

import os

from hypothesis import settings

from harness.kernel_cache import drop_stale_once
from tests import compose_memo

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")

drop_stale_once()
compose_memo.install()
