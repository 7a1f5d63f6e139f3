"""What a controller has written but its informer cache does not show yet (client-go's ControllerExpectations).

A MachineSet reconcile that creates 3 Machines is followed at once by another reconcile (each create is an event);
if the cache does not list the new Machines yet, that pass would count too few and create 3 more. So every
create and delete is remembered by Machine name, and the reconciler does not scale a set while any is pending.

Unlike client-go, which counts adds/deletes in the informer's event handlers, this checks the cache itself by name
when asked: nothing has to be wired into handlers, and a Machine created and seen between two checks is not
missed. An expectation the cache never confirms (a watch event lost, or the object gone again before it was seen)
expires after `ttl` seconds, client-go's 5 minutes, so a set is never stuck.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import structlog

log = structlog.get_logger(__name__)

EXPECTATION_TTL_S = 300.0

Lookup = Callable[[str], "dict[str, Any] | None"]  # a Machine by name, from the cache


class Expectations:
    def __init__(self, ttl: float = EXPECTATION_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        # owner key -> {machine name: (True for a create / False for a delete, deadline)}
        self._pending: dict[str, dict[str, tuple[bool, float]]] = {}

    def expect_created(self, owner: str, name: str) -> None:
        self._expect(owner, name, created=True)

    def expect_deleted(self, owner: str, name: str) -> None:
        self._expect(owner, name, created=False)

    def _expect(self, owner: str, name: str, created: bool) -> None:
        with self._lock:
            self._pending.setdefault(owner, {})[name] = (created, self._clock() + self._ttl)

    def pending(self, owner: str, lookup: Lookup) -> float | None:
        """Drop what the cache confirms or what expired; the seconds until the last remaining one expires, or None
        when nothing is pending (the owner may be scaled)."""
        now = self._clock()
        with self._lock:
            entries = self._pending.get(owner, {})
            for name, (created, deadline) in list(entries.items()):
                if _confirmed(lookup(name), created):
                    del entries[name]
                elif deadline <= now:
                    log.warning("expectation expired unconfirmed", owner=owner, machine=name,
                                operation="create" if created else "delete")
                    del entries[name]
            if not entries:
                self._pending.pop(owner, None)
                return None
            return max(deadline for _, deadline in entries.values()) - now

    def forget(self, owner: str) -> None:
        with self._lock:
            self._pending.pop(owner, None)


def _confirmed(cached: dict[str, Any] | None, created: bool) -> bool:
    if created:
        return cached is not None
    return cached is None or bool((cached.get("metadata") or {}).get("deletionTimestamp"))
