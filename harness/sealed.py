"""`Sealed`: a field of what the simulation hands loops that no loop may read (any use raises)."""

from __future__ import annotations

from typing import NoReturn

from harness.errors import LoopbenchError


class Sealed:
    """Stands in for a secret field (a pod's duration, a service's demand): any use raises."""

    def __init__(self, what: str):
        self._what = what

    def _refuse(self, *_) -> NoReturn:
        raise LoopbenchError(f"a loop may not read {self._what} (issue 18: no loop knows what a real one could not)")

    __getitem__ = __array__ = __len__ = __iter__ = _refuse
