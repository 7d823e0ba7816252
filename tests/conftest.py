"""Hypothesis explores new examples on developers' machines; CI (CI=true) replays a fixed
set, so a red CI run always points at a change, never at a lucky draw."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")
