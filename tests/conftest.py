"""Hypothesis explores new examples on developers' machines; CI (CI=true) replays a fixed
set, so a red CI run always points at a change, never at a lucky draw. Kernels cached from
other kernel sources are dropped before any test calls one (harness/kernel_cache.py)."""

from __future__ import annotations

import os

from hypothesis import settings

from harness.kernel_cache import drop_stale_once

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")

drop_stale_once()
