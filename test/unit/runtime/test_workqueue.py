"""The work queue keeps client-go's contract (docs/compatibility.md#kubernetes-api)."""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from machine_controller.runtime.ratelimit import ItemExponentialBackoff, MaxOf, TokenBucket, controller_rate_limiter
from machine_controller.runtime.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def queue(registry: CollectorRegistry):
    q = WorkQueue("test", registry=registry)
    yield q
    q.shutdown()


def drain(q: WorkQueue) -> list[str]:
    keys = []
    while (key := q.get(timeout=0)) is not None:
        keys.append(key)
    return keys


def test_add_dedupes_a_key_already_queued(queue: WorkQueue) -> None:
    for key in ["a", "b", "a", "a", "c", "b"]:
        queue.add(key)
    assert len(queue) == 3
    assert drain(queue) == ["a", "b", "c"]


def test_key_added_while_processing_is_requeued_once_after_done(queue: WorkQueue) -> None:
    queue.add("a")
    assert queue.get(timeout=1) == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0, "a key being processed must not be handed to a second worker"
    assert queue.get(timeout=0.05) is None
    queue.done("a")
    assert drain(queue) == ["a"]
    queue.done("a")
    assert len(queue) == 0


def test_key_is_never_held_by_two_workers_under_concurrency(queue: WorkQueue) -> None:
    holders: dict[str, int] = {}
    lock = threading.Lock()
    violations: list[str] = []
    processed = [0]
    stop = threading.Event()

    def worker() -> None:
        while (key := queue.get()) is not None:
            with lock:
                holders[key] = holders.get(key, 0) + 1
                if holders[key] > 1:
                    violations.append(key)
            time.sleep(0.001)
            with lock:
                holders[key] -= 1
                processed[0] += 1
            queue.done(key)

    def producer() -> None:
        i = 0
        while not stop.is_set():
            queue.add(f"k{i % 5}")
            i += 1
            time.sleep(0.0002)

    workers = [threading.Thread(target=worker) for _ in range(8)]
    producers = [threading.Thread(target=producer) for _ in range(3)]
    for t in workers + producers:
        t.start()
    deadline = time.monotonic() + 10
    while processed[0] < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    for t in producers:
        t.join()
    assert queue.shutdown_with_drain(timeout=5)
    for t in workers:
        t.join(5)
    assert processed[0] >= 300
    assert violations == []


def test_get_blocks_until_add_and_returns_none_on_shutdown(queue: WorkQueue) -> None:
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(queue.get()))
    t.start()
    time.sleep(0.05)
    assert got == []
    queue.add("x")
    t.join(2)
    assert got == ["x"]
    t2 = threading.Thread(target=lambda: got.append(queue.get()))
    t2.start()
    queue.shutdown()
    t2.join(2)
    assert got == ["x", None]


def test_adds_after_shutdown_are_ignored(queue: WorkQueue) -> None:
    queue.shutdown()
    queue.add("a")
    queue.add_after("b", 0.01)
    assert len(queue) == 0
    assert queue.get(timeout=0) is None


def test_add_after_delivers_in_ready_order_and_keeps_earlier_time(queue: WorkQueue) -> None:
    queue.add_after("late", 0.30)
    queue.add_after("early", 0.05)
    queue.add_after("mid", 0.15)
    queue.add_after("mid", 5.0)  # a later time for a waiting key is ignored
    order = [queue.get(timeout=3) for _ in range(3)]
    assert order == ["early", "mid", "late"]


def test_add_after_an_earlier_time_wins(queue: WorkQueue) -> None:
    queue.add_after("a", 60)
    queue.add_after("a", 0.02)
    assert queue.get(timeout=3) == "a"


def test_per_key_backoff_doubles_up_to_the_cap_and_forget_resets() -> None:
    limiter = ItemExponentialBackoff(base=1.0, cap=300.0)
    delays = [limiter.when("a") for _ in range(12)]
    assert delays[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert delays[9:] == [300, 300, 300]
    assert limiter.when("b") == 1.0, "backoff is per key"
    assert limiter.num_requeues("a") == 12
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 1.0


def test_backoff_for_a_key_failing_for_ages_does_not_overflow() -> None:
    limiter = ItemExponentialBackoff(base=0.005, cap=1000.0)
    for _ in range(5000):
        delay = limiter.when("a")
    assert delay == 1000.0


def test_token_bucket_allows_a_burst_then_spreads_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.when("k") for _ in range(3)] == [0, 0, 0]
    waits = [bucket.when("k") for _ in range(3)]
    assert waits == pytest.approx([0.1, 0.2, 0.3])
    clock.now += 10  # refills, but never beyond the burst
    assert [bucket.when("k") for _ in range(3)] == [0, 0, 0]
    assert bucket.when("k") > 0


def test_rate_limiter_takes_the_max_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter = controller_rate_limiter(base=1.0, cap=300.0, qps=1.0, burst=2, clock=clock)
    assert isinstance(limiter, MaxOf)
    assert limiter.when("a") == 1.0  # backoff dominates
    assert limiter.when("b") == 1.0
    # Bucket empty now: a key with no failures still waits for the bucket.
    assert limiter.when("c") == pytest.approx(1.0)
    assert limiter.when("d") == pytest.approx(2.0)
    assert limiter.num_requeues("a") == 1


def test_add_rate_limited_delays_by_backoff_and_counts_retries(registry: CollectorRegistry) -> None:
    q = WorkQueue("rl", rate_limiter=controller_rate_limiter(base=0.05, cap=0.2), registry=registry)
    try:
        q.add_rate_limited("a")
        assert q.num_requeues("a") == 1
        assert q.get(timeout=0.01) is None, "not before its backoff"
        assert q.get(timeout=2) == "a"
        q.done("a")
        q.forget("a")
        assert q.num_requeues("a") == 0
        assert registry.get_sample_value("workqueue_retries_total", {"name": "rl"}) == 1
    finally:
        q.shutdown()


def test_shutdown_with_drain_waits_for_in_flight_keys(queue: WorkQueue) -> None:
    queue.add("a")
    queue.add("b")
    assert queue.get(timeout=1) == "a"
    finished = threading.Event()

    def finish_later() -> None:
        time.sleep(0.1)
        queue.done("a")
        finished.set()

    threading.Thread(target=finish_later).start()
    assert queue.shutdown_with_drain(timeout=5)
    assert finished.is_set()
    assert queue.get(timeout=0) is None, "queued keys are not handed out after shutdown"


def test_a_done_key_wakes_no_idle_worker_unless_it_is_queued_again(queue: WorkQueue) -> None:
    """Idle workers wait in `get`; a pass that ends with nothing to hand out must not wake them all."""
    wakes = []

    class Counting(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            woken = super().wait(timeout)
            wakes.append(woken)
            return woken
    queue._cond = Counting()  # before any worker waits on it
    queue.add("a")
    assert queue.get(timeout=1) == "a"
    got: list[str | None] = []
    workers = [threading.Thread(target=lambda: got.append(queue.get())) for _ in range(4)]
    for w in workers:
        w.start()
    time.sleep(0.1)  # all four wait

    queue.done("a")
    time.sleep(0.1)
    assert wakes == [], "done() woke idle workers for nothing"

    queue.add("a")  # queued again: exactly one worker is woken for it
    deadline = time.monotonic() + 2
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    assert got == ["a"] and wakes.count(True) == 1
    queue.shutdown()
    for w in workers:
        w.join(2)
    assert got == ["a", None, None, None]


def test_shutdown_with_drain_times_out_on_a_stuck_key(queue: WorkQueue) -> None:
    queue.add("stuck")
    assert queue.get(timeout=1) == "stuck"
    assert queue.shutdown_with_drain(timeout=0.05) is False
    assert queue.processing() == {"stuck"}


def test_metrics_use_client_go_names(registry: CollectorRegistry) -> None:
    q = WorkQueue("named", registry=registry)
    try:
        q.add("a")
        q.add("b")
        assert registry.get_sample_value("workqueue_depth", {"name": "named"}) == 2
        assert registry.get_sample_value("workqueue_adds_total", {"name": "named"}) == 2
        key = q.get(timeout=1)
        assert registry.get_sample_value("workqueue_queue_duration_seconds_count", {"name": "named"}) == 1
        time.sleep(0.02)
        assert registry.get_sample_value("workqueue_unfinished_work_seconds", {"name": "named"}) >= 0.02
        assert registry.get_sample_value("workqueue_longest_running_processor_seconds", {"name": "named"}) >= 0.02
        q.done(key)
        assert registry.get_sample_value("workqueue_work_duration_seconds_count", {"name": "named"}) == 1
        assert registry.get_sample_value("workqueue_depth", {"name": "named"}) == 1
        # A second queue reports into the same families under its own name.
        q2 = WorkQueue("other", registry=registry)
        q2.add("x")
        assert registry.get_sample_value("workqueue_depth", {"name": "other"}) == 1
        q2.shutdown()
    finally:
        q.shutdown()


def test_a_requeue_later_than_the_earliest_does_not_wake_the_delay_thread(registry: CollectorRegistry,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pass of a Machine being created ends in a requeue: only one due before the delay thread's own wake
    changes when it must wake."""
    woken: list[bool] = []

    class Counting(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            came = super().wait(timeout)
            if came and threading.current_thread().name.endswith("-delay"):
                woken.append(came)
            return came
    monkeypatch.setattr(threading, "Condition", Counting)  # the queue's conditions, made in its constructor
    q = WorkQueue("test", registry=registry)
    try:
        q.add_after("first", 0.5)
        time.sleep(0.05)  # the delay thread now sleeps until "first" is due
        woken.clear()
        for i in range(20):
            q.add_after(f"later-{i}", 1 + i / 10)
        time.sleep(0.05)
        assert woken == [], "requeues due after the earliest woke the delay thread"
        q.add_after("soon", 0.05)
        assert q.get(timeout=1) == "soon"
        assert woken == [True]
        assert q.get(timeout=1) == "first"
    finally:
        q.shutdown()
