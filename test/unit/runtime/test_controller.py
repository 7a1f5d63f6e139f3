"""The controller loop: parallel workers, no head-of-line blocking, errors back off, requeue_after honoured."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from itertools import pairwise

import pytest
import structlog
from prometheus_client import CollectorRegistry

from machine_controller.runtime.controller import (
    Controller,
    Result,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    running,
)
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.testing import wait_until
from machine_controller.runtime.workqueue import WorkQueue


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def make(registry: CollectorRegistry, reconcile, workers: int = 4, base: float = 0.01, cap: float = 0.5):
    queue = WorkQueue("c", rate_limiter=controller_rate_limiter(base=base, cap=cap), registry=registry)
    return Controller("c", queue, reconcile, workers=workers, registry=registry)


def test_workers_reconcile_different_keys_in_parallel(registry: CollectorRegistry) -> None:
    barrier = threading.Barrier(3, timeout=5)
    seen: list[str] = []

    def reconcile(key: str) -> Result:
        barrier.wait()  # only passes if three reconciles run at the same time
        seen.append(key)
        return Result()

    with running(make(registry, reconcile, workers=3)) as c:
        for key in ("ns/a", "ns/b", "ns/c"):
            c.queue.add(key)
        assert wait_until(lambda: len(seen) == 3)
    assert sorted(seen) == ["ns/a", "ns/b", "ns/c"]


def test_a_slow_key_does_not_block_the_others(registry: CollectorRegistry) -> None:
    release = threading.Event()
    done: list[str] = []

    def reconcile(key: str) -> Result:
        if key == "ns/slow":
            release.wait(10)
        done.append(key)
        return Result()

    with running(make(registry, reconcile, workers=2)) as c:
        c.queue.add("ns/slow")
        assert wait_until(lambda: c.queue.processing() == {"ns/slow"})
        for i in range(20):
            c.queue.add(f"ns/fast-{i}")
        assert wait_until(lambda: len(done) == 20)
        assert "ns/slow" not in done
        release.set()
        assert wait_until(lambda: "ns/slow" in done)


def test_the_same_key_is_never_reconciled_concurrently(registry: CollectorRegistry) -> None:
    active: dict[str, int] = defaultdict(int)
    overlap: list[str] = []
    calls = [0]
    lock = threading.Lock()

    def reconcile(key: str) -> Result:
        with lock:
            active[key] += 1
            calls[0] += 1
            if active[key] > 1:
                overlap.append(key)
        time.sleep(0.002)
        with lock:
            active[key] -= 1
        return Result()

    with running(make(registry, reconcile, workers=6)) as c:
        for i in range(400):
            c.queue.add(f"ns/k{i % 3}")
            time.sleep(0.0005)
        assert wait_until(lambda: len(c.queue) == 0 and not c.queue.processing())
    assert overlap == []
    assert calls[0] < 400, "adds during processing coalesce"


def test_errors_requeue_with_growing_backoff_then_success_forgets(registry: CollectorRegistry) -> None:
    times: list[float] = []

    def reconcile(key: str) -> Result:
        times.append(time.monotonic())
        if len(times) < 4:
            raise RuntimeError("engine busy")
        return Result()

    with running(make(registry, reconcile, workers=1, base=0.05, cap=10)) as c:
        c.queue.add("ns/a")
        assert wait_until(lambda: len(times) == 4)
        assert wait_until(lambda: c.queue.num_requeues("ns/a") == 0)
    gaps = [b - a for a, b in pairwise(times)]
    # backoff 0.05, 0.1, 0.2: each wait at least its backoff (a lower bound only; no upper speed assertion)
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "c"}) == 3
    assert registry.get_sample_value("controller_runtime_reconcile_total",
                                     {"controller": "c", "result": "error"}) == 3
    assert registry.get_sample_value("controller_runtime_reconcile_total",
                                     {"controller": "c", "result": "success"}) == 1
    assert registry.get_sample_value("controller_runtime_reconcile_time_seconds_count", {"controller": "c"}) == 4


def test_requeue_after_is_honoured_and_resets_backoff(registry: CollectorRegistry) -> None:
    times: list[float] = []

    def reconcile(key: str) -> Result:
        times.append(time.monotonic())
        if len(times) == 1:
            raise RuntimeError("first try fails")
        return Result(requeue_after=0.2) if len(times) < 4 else Result()

    with running(make(registry, reconcile, workers=1, base=0.01)) as c:
        c.queue.add("ns/vm")
        assert wait_until(lambda: len(times) == 4)
        assert c.queue.num_requeues("ns/vm") == 0
        time.sleep(0.3)
    assert len(times) == 4, "a plain Result() does not requeue"
    assert times[2] - times[1] >= 0.2 and times[3] - times[2] >= 0.2
    assert registry.get_sample_value("controller_runtime_reconcile_total",
                                     {"controller": "c", "result": "requeue_after"}) == 2


def test_reconcile_runs_with_key_and_reconcile_id_in_log_context(registry: CollectorRegistry) -> None:
    contexts: list[dict] = []

    def reconcile(key: str) -> Result:
        contexts.append(structlog.contextvars.get_contextvars())
        return Result()

    with running(make(registry, reconcile, workers=1)) as c:
        c.queue.add("ns/a")
        c.queue.add("ns/b")
        assert wait_until(lambda: len(contexts) == 2)
    assert [ctx["key"] for ctx in contexts] == ["ns/a", "ns/b"]
    assert all(ctx["controller"] == "c" for ctx in contexts)
    assert contexts[0]["reconcile_id"] != contexts[1]["reconcile_id"]
    assert structlog.contextvars.get_contextvars().get("key") is None


def test_stop_drains_in_flight_reconciles(registry: CollectorRegistry) -> None:
    finished = threading.Event()
    started = threading.Event()

    def reconcile(key: str) -> Result:
        started.set()
        time.sleep(0.1)
        finished.set()
        return Result()

    c = make(registry, reconcile, workers=1)
    c.start()
    c.queue.add("ns/a")
    assert started.wait(5)
    assert c.stop(timeout=5) is True
    assert finished.is_set()


def test_mapping_handlers_enqueue_the_right_keys(registry: CollectorRegistry) -> None:
    q = WorkQueue("m", registry=registry)
    machine = {"metadata": {"name": "m1", "namespace": "ns", "ownerReferences": [
        {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "set", "controller": True},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "controller": False}]}}
    enqueue_object(q).on_add(machine)
    enqueue_owner(q, "MachineSet", "machine.openshift.io").on_delete(machine)
    node_old = {"metadata": {"name": "n1", "annotations": {"machine": "ns/m-old"}}}
    node_new = {"metadata": {"name": "n1", "annotations": {"machine": "ns/m-new"}}}
    by_annotation = enqueue_mapped(q, lambda n: [n["metadata"]["annotations"]["machine"]])
    by_annotation.on_update(node_old, node_new)
    keys = []
    while (k := q.get(timeout=0)) is not None:
        keys.append(k)
    assert keys == ["ns/m1", "ns/set", "ns/m-new", "ns/m-old"]
    q.shutdown()
