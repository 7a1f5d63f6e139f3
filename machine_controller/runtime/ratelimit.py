"""Rate limiters for the work queue, after client-go's `util/workqueue/default_rate_limiters.go`
(docs/compatibility.md#kubernetes-api).

A limiter answers "how long must this key wait before it is retried?". The controller's default is the max of a
per-key exponential backoff (so one failing object backs off alone) and an overall token bucket (so a storm of
failures cannot hammer the API server or oVirt).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Protocol

from .bounds import check_number

Clock = Callable[[], float]


class RateLimiter(Protocol):
    def when(self, key: str) -> float:
        """Seconds to wait before `key` may be processed again; records one more failure for it."""

    def forget(self, key: str) -> None:
        """The key succeeded: its failure history is cleared."""

    def num_requeues(self, key: str) -> int: ...


class ItemExponentialBackoff:
    """`base * 2**failures`, capped. client-go defaults: 5 ms base, 1000 s cap."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        check_number("ItemExponentialBackoff base", base, 0, above=True, why="the first retry delay, in seconds")
        check_number("ItemExponentialBackoff cap", cap, base, why="the longest retry delay, never below base")
        self.base = base
        self.cap = cap
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def when(self, key: str) -> float:
        with self._lock:
            exp = self._failures.get(key, 0)
            self._failures[key] = exp + 1
        # Compare exponents rather than computing 2**exp blindly: a key failing for days must not overflow.
        if exp >= 64:
            return self.cap
        return min(self.base * float(2**exp), self.cap)

    def forget(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class TokenBucket:
    """An overall limit shared by all keys: `qps` tokens a second, at most `burst` saved up.

    Like golang.org/x/time/rate's Reserve: every call takes a token now, possibly going into debt, and the wait is
    how long until that debt is repaid. So N simultaneous failures beyond the burst are spread out at `qps`.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = time.monotonic) -> None:
        check_number("TokenBucket qps", qps, 0, above=True, why="tokens a second")
        check_number("TokenBucket burst", burst, 1, integer=True, why="tokens saved up")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def when(self, key: str) -> float:
        with self._lock:
            self._refill()
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def allow(self) -> bool:
        """Take a token if one is there now; unlike `when`, never goes into debt (for dropping, not delaying)."""
        with self._lock:
            self._refill()
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def forget(self, key: str) -> None:
        pass

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOf:
    """The longest wait any of the limiters asks for (client-go's MaxOfRateLimiter)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: str) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: str) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def controller_rate_limiter(
    base: float = 0.005, cap: float = 1000.0, qps: float = 10.0, burst: int = 100, clock: Clock = time.monotonic
) -> MaxOf:
    """client-go's DefaultControllerRateLimiter, with its numbers as overridable defaults."""
    return MaxOf(ItemExponentialBackoff(base, cap), TokenBucket(qps, burst, clock))
