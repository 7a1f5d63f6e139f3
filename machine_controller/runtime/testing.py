"""Helpers for tests of code built on the runtime (like `kopf.testing`): bounded polling instead of sleeps."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.02) -> bool:
    """Poll `predicate` until it is truthy or `timeout` seconds pass; its last verdict, as a bool.

    Tests assert on the returned value, so a timeout fails with the test's own message rather than here.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
