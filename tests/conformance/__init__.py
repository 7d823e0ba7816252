"""Upstream conformance: each test translates one upstream table-driven case (see docs/conformance.md)."""
