"""A work queue of object keys with client-go's semantics (`util/workqueue`, docs/compatibility.md#kubernetes-api).

- `add` is a no-op while the key is already queued (the *dirty* set), so N events collapse into one reconcile.
- A key handed out by `get` is *processing* until `done`; adding it meanwhile marks it dirty and it is queued again
  only at `done`. So no two workers ever hold the same key, and no change is lost.
- `add_after` parks a key in a heap until its time; re-adding keeps the earlier time.
- `add_rate_limited` = `add_after(key, limiter.when(key))`; `forget` clears the key's backoff.
- After `shutdown`, `add` is ignored and `get` returns None at once. (client-go keeps handing out items already
  queued; we stop sooner on purpose, see `shutdown_with_drain`.) `shutdown_with_drain` additionally waits for
  the keys in flight to be `done`.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import weakref
from collections import deque
from typing import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from . import metrics
from .ratelimit import Clock, RateLimiter, controller_rate_limiter

# client-go: prometheus.ExponentialBuckets(10e-9, 10, 10), i.e. 10ns .. 10s... wide on purpose, since queue and
# work durations range from microseconds (a no-op reconcile) to minutes (a backed-off key).
_DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(10))


class _InFlightCollector(Collector):
    """client-go refreshes these two gauges every 500 ms from a goroutine; computing them at scrape time from the
    live queues gives the same numbers without a thread."""

    def __init__(self) -> None:
        self.queues: "weakref.WeakSet[WorkQueue]" = weakref.WeakSet()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; large values mean stuck workers.",
            labels=["name"],
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest running processor for the queue has been running.",
            labels=["name"],
        )
        for queue in list(self.queues):
            total, oldest = queue.in_flight_seconds()
            unfinished.add_metric([queue.name], total)
            longest.add_metric([queue.name], oldest)
        yield unfinished
        yield longest


class _QueueMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.depth = Gauge("workqueue_depth", "Current depth of the work queue.", ["name"], registry=registry)
        self.adds = Counter("workqueue_adds", "Total adds handled by the work queue.", ["name"], registry=registry)
        self.latency = Histogram(
            "workqueue_queue_duration_seconds", "Seconds an item stays in the queue before being requested.",
            ["name"], buckets=_DURATION_BUCKETS, registry=registry,
        )
        self.work = Histogram(
            "workqueue_work_duration_seconds", "Seconds processing an item from the queue takes.",
            ["name"], buckets=_DURATION_BUCKETS, registry=registry,
        )
        self.retries = Counter("workqueue_retries", "Total retries handled by the work queue.", ["name"],
                               registry=registry)
        self.in_flight = _InFlightCollector()
        registry.register(self.in_flight)


class WorkQueue:
    def __init__(
        self,
        name: str,
        rate_limiter: RateLimiter | None = None,
        registry: CollectorRegistry | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.name = name
        self.rate_limiter: RateLimiter = rate_limiter if rate_limiter is not None else controller_rate_limiter()
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: dict[str, float] = {}  # key -> when get() handed it out
        self._added_at: dict[str, float] = {}  # key -> when it entered the queue (for queue_duration)
        self._shutting_down = False

        # Delayed adds: a heap of (ready_at, seq, key) with lazy deletion; `_waiting` holds each key's live time.
        self._delay_cond = threading.Condition()
        self._heap: list[tuple[float, int, str]] = []
        self._waiting: dict[str, float] = {}
        self._seq = itertools.count()
        self._delay_thread = threading.Thread(target=self._delay_loop, name=f"workqueue-{name}-delay", daemon=True)
        self._delay_thread.start()

        m = metrics.family(registry, "workqueue", _QueueMetrics)
        self._m_depth = m.depth.labels(name)
        self._m_adds = m.adds.labels(name)
        self._m_latency = m.latency.labels(name)
        self._m_work = m.work.labels(name)
        self._m_retries = m.retries.labels(name)
        m.in_flight.queues.add(self)

    # --- the plain queue -------------------------------------------------------------------------------------

    def add(self, key: str) -> None:
        with self._cond:
            if self._shutting_down or key in self._dirty:
                return
            self._m_adds.inc()
            self._dirty.add(key)
            if key in self._processing:
                return  # queued again by done()
            self._push(key)

    def _push(self, key: str) -> None:
        self._queue.append(key)
        self._added_at[key] = self._clock()
        self._m_depth.inc()
        self._cond.notify()

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, blocking; None on shutdown (or when `timeout` passes with nothing queued)."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._queue and not self._shutting_down:
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            if not self._queue or self._shutting_down:
                return None
            key = self._queue.popleft()
            self._m_depth.dec()
            now = self._clock()
            self._m_latency.observe(now - self._added_at.pop(key, now))
            self._processing[key] = now
            self._dirty.discard(key)
            return key

    def done(self, key: str) -> None:
        with self._cond:
            started = self._processing.pop(key, None)
            if started is not None:
                self._m_work.observe(self._clock() - started)
            if key in self._dirty and not self._shutting_down:
                self._push(key)  # wakes one getter for it
            elif self._shutting_down and not self._processing:
                # The one thing a done key changes for a waiter besides a push: shutdown_with_drain's end. Waking
                # every getter at every done would send all of a controller's idle workers through the GIL each
                # time a pass ends, for nothing to get.
                self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def processing(self) -> set[str]:
        with self._cond:
            return set(self._processing)

    def in_flight_seconds(self) -> tuple[float, float]:
        """(sum, max) of how long the keys now being processed have been running."""
        with self._cond:
            now = self._clock()
            ages = [now - started for started in self._processing.values()]
        return (sum(ages), max(ages, default=0.0))

    def shutdown(self) -> None:
        """Stop handing out keys; workers blocked in `get` return None."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
        with self._delay_cond:
            self._delay_cond.notify_all()

    def shutdown_with_drain(self, timeout: float | None = None) -> bool:
        """Shut down, then wait until every key handed out has been `done`. True if drained within `timeout`.

        Unlike client-go (which keeps serving queued items while draining), keys still waiting in the queue are
        dropped: on SIGTERM we want in-flight reconciles to finish, not new ones to start; the next leader will
        list everything again anyway.
        """
        self.shutdown()
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while self._processing:
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    # --- delays and rate limiting ----------------------------------------------------------------------------

    def add_after(self, key: str, delay: float) -> None:
        if self.shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock() + delay
        with self._delay_cond:
            current = self._waiting.get(key)
            if current is not None and current <= ready_at:
                return  # already due sooner: keep the earlier time
            self._waiting[key] = ready_at
            entry = (ready_at, next(self._seq), key)
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:
                # Only a new earliest time changes when the delay thread must wake; woken at every requeue (a
                # Machine's every pass at a thousand), it went through the GIL to sleep again.
                self._delay_cond.notify()

    def add_rate_limited(self, key: str) -> None:
        self._m_retries.inc()
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: str) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.num_requeues(key)

    def _delay_loop(self) -> None:
        while True:
            due: list[str] = []
            with self._delay_cond:
                if self.shutting_down:
                    return
                now = self._clock()
                while self._heap and self._heap[0][0] <= now:
                    ready_at, _, key = heapq.heappop(self._heap)
                    if self._waiting.get(key) == ready_at:  # else a stale entry, superseded by an earlier time
                        del self._waiting[key]
                        due.append(key)
                if not due:
                    timeout = self._heap[0][0] - now if self._heap else None
                    if timeout is not None and self._clock is not time.monotonic:
                        timeout = min(timeout, 0.01)  # a fake clock in tests can jump without notifying us
                    self._delay_cond.wait(timeout)
                    continue
            for key in due:
                self.add(key)
