"""Answers kept for a while, asked once per key at a time: what a thousand Machines of one MachineSet would
otherwise each ask (the engine's cluster and template, the MachineSet's user-data Secret) is asked once per burst."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


class TtlCache(Generic[T]):
    """Only what exists is kept: a falsy answer (a missing object) and an exception are asked again at the next
    call, so an object created meanwhile is seen at once. A kept answer expires after `ttl_s`, or at `forget`."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self._ttl = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[Hashable, tuple[float, Any]] = {}
        self._fetching: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, fetch: Callable[[], T]) -> T:
        with self._lock:
            key_lock = self._fetching.setdefault(key, threading.Lock())
        # One fetch per key at a time: workers starting together wait for the first answer instead of all asking;
        # different keys do not wait for each other.
        with key_lock:
            now = self._clock()
            with self._lock:
                hit = self._kept.get(key)
                if hit is not None and now - hit[0] < self._ttl:
                    return hit[1]
            value = fetch()
            if value:
                with self._lock:
                    self._kept[key] = (now, value)
            return value

    def forget(self) -> None:
        with self._lock:
            self._kept.clear()
