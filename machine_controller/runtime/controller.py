"""The controller loop: N workers pop keys from a WorkQueue and call `reconcile(key)` docs/architecture.md,
docs/compatibility.md#kubernetes-api).

Reconcile is level-triggered: it receives only the key and reads the current object from an informer cache. It
never sleeps waiting for the outside world; it returns `Result(requeue_after=...)` instead, so a slow VM holds no
worker and other keys keep flowing. Errors go back to the queue, which owns the backoff.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from . import metrics
from .bounds import check_number
from .informer import EventHandler
from .kube import object_key
from .logging import get_logger
from .workqueue import WorkQueue
from .writes import Conflict, Gone


@dataclass(frozen=True)
class Result:
    """What the reconcile wants next. `requeue_after`: look again in that many seconds (polling an external
    system), with the backoff reset; `requeue`: try again soon with backoff, without it being an error."""

    requeue_after: float | None = None
    requeue: bool = False


class TerminalError(Exception):
    """controller-runtime's `reconcile.TerminalError`: the object can never reconcile as it is written, so
    retrying with backoff is pointless. The reconciler reports it (an event, a condition) before raising; the
    controller counts it and forgets the key. An edit of the object enqueues it again through its informer."""


Reconcile = Callable[[str], "Result | None"]

# controller-runtime's histogram buckets for reconcile time (pkg/internal/controller/metrics).
_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
                      0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
                      40, 50, 60)


class _ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter("controller_runtime_reconcile", "Total number of reconciliations per controller.",
                             ["controller", "result"], registry=registry)
        self.errors = Counter("controller_runtime_reconcile_errors", "Total number of reconciliation errors.",
                              ["controller"], registry=registry)
        self.terminal = Counter("controller_runtime_terminal_reconcile_errors",
                                "Total number of terminal reconciliation errors.", ["controller"], registry=registry)
        self.time = Histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation.",
                              ["controller"], buckets=_RECONCILE_BUCKETS, registry=registry)
        self.active = Gauge("controller_runtime_active_workers", "Number of currently used workers.",
                            ["controller"], registry=registry)
        self.max_workers = Gauge("controller_runtime_max_concurrent_reconciles", "Maximum number of workers.",
                                 ["controller"], registry=registry)


class Controller:
    def __init__(
        self,
        name: str,
        queue: WorkQueue,
        reconcile: Reconcile,
        workers: int = 1,
        registry: CollectorRegistry | None = None,
        conflict_requeue_s: float = 0.5,
    ) -> None:
        """`conflict_requeue_s`: how soon a pass whose write lost to a newer version (`writes.Conflict`) is repeated
        on the newer one."""
        check_number("Controller workers", workers, 1, integer=True, why="with none, no key is ever reconciled")
        self.conflict_requeue_s = conflict_requeue_s
        self.name = name
        self.queue = queue
        self.reconcile = reconcile
        self.workers = workers
        self._threads: list[threading.Thread] = []
        self._log = get_logger("controller", controller=name)
        m = metrics.family(registry, "controller", _ControllerMetrics)
        self._m_total = {r: m.total.labels(name, r) for r in ("success", "error", "requeue", "requeue_after")}
        self._m_errors = m.errors.labels(name)
        self._m_terminal = m.terminal.labels(name)
        self._m_time = m.time.labels(name)
        self._m_active = m.active.labels(name)
        m.max_workers.labels(name).set(workers)

    def start(self) -> None:
        if self._threads:
            return
        for i in range(self.workers):
            thread = threading.Thread(target=self._worker, name=f"{self.name}-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._log.info("controller started", workers=self.workers)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop taking keys and wait (up to `timeout`) for reconciles in flight. True if all finished."""
        drained = self.queue.shutdown_with_drain(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if not drained:
            self._log.warning("reconciles still running at shutdown", keys=sorted(self.queue.processing()))
        return drained

    def _worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: str) -> None:
        """One reconcile of `key` with its bookkeeping; the caller owns `queue.done`."""
        # Bound into contextvars so every log line the reconcile writes, at any depth, carries the key and id.
        with structlog.contextvars.bound_contextvars(controller=self.name, key=key,
                                                     reconcile_id=uuid.uuid4().hex[:12]):
            self._m_active.inc()
            started = time.monotonic()
            try:
                result = settle(self.reconcile, key, self.conflict_requeue_s) or Result()
            except TerminalError as exc:
                self._m_errors.inc()
                self._m_terminal.inc()
                self._m_total["error"].inc()
                self.queue.forget(key)
                self._log.warning("reconcile failed terminally; not retried until the object changes",
                                  error=str(exc))
                return
            except Exception as exc:  # noqa: BLE001 - any failure is retried with backoff, never kills a worker
                self._m_errors.inc()
                self._m_total["error"].inc()
                self.queue.add_rate_limited(key)
                self._log.warning("reconcile failed", error=str(exc), error_type=type(exc).__name__,
                                  requeues=self.queue.num_requeues(key), exc_info=_want_traceback(exc))
                return
            finally:
                self._m_time.observe(time.monotonic() - started)
                self._m_active.dec()
            if result.requeue_after is not None and result.requeue_after > 0:
                self.queue.forget(key)
                self.queue.add_after(key, result.requeue_after)
                self._m_total["requeue_after"].inc()
            elif result.requeue:
                self.queue.add_rate_limited(key)
                self._m_total["requeue"].inc()
            else:
                self.queue.forget(key)
                self._m_total["success"].inc()


def settle(reconcile: Reconcile, key: str, conflict_requeue_s: float = 0.5) -> Result | None:
    """One pass of `reconcile` with a lost race ended as controller-runtime's loop ends it
    (docs/architecture.md#writing-an-object): a write that met a newer version (`writes.Conflict`) is a short
    requeue, one that met a deleted object (`writes.Gone`) is done. Any other exception is the caller's."""
    try:
        return reconcile(key)
    except Conflict:
        return Result(requeue_after=conflict_requeue_s)
    except Gone:
        get_logger("controller").debug("object deleted during the reconcile", key=key)
        return None


def _want_traceback(exc: BaseException) -> bool:
    # Expected, classified failures (an object with a `transient` or `reason` attribute set by the layer that
    # understood the fault) are logged as one line; anything else is a bug and deserves its traceback.
    return not (hasattr(exc, "transient") or hasattr(exc, "reason"))


# --- cross-kind triggers: informer event handlers that only enqueue keys ------------------------------------------

def enqueue_mapped(queue: WorkQueue, mapper: Callable[[dict[str, Any]], Iterable[str]]) -> EventHandler:
    """Enqueue whatever keys `mapper(obj)` names, for adds, deletes, and both sides of an update (a label change
    can move an object from one owner to another, and both must look again)."""

    def enqueue(obj: dict[str, Any]) -> None:
        for key in mapper(obj):
            queue.add(key)

    def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        keys = set(mapper(old)) | set(mapper(new))
        for key in sorted(keys):
            queue.add(key)

    return EventHandler(on_add=enqueue, on_update=on_update, on_delete=enqueue)




def when_changed(handler: EventHandler, *views: Any) -> EventHandler:
    """Pass an update on only when one of the `views` of the object differs, or on a resync (the informer re-emits
    an object as its own update); adds and deletes always pass. A view is a path such as `("spec", "providerID")`
    or a function of the object. controller-runtime's predicates: a Node's heartbeat rewrites its status every
    few seconds, and a controller that does not read the heartbeat must not pay an oVirt lookup for each one."""

    def view(obj: dict[str, Any], v: Any) -> Any:
        if callable(v):
            return v(obj)
        value: Any = obj
        for part in v:
            value = (value or {}).get(part) if isinstance(value, dict) else None
        return value

    def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        if handler.on_update and (old is new or any(view(old, v) != view(new, v) for v in views)):
            handler.on_update(old, new)

    return EventHandler(on_add=handler.on_add, on_update=on_update, on_delete=handler.on_delete)


class OwnWrites:
    """The resourceVersions a reconciler's own writes produced, per object key. The watch event of such a write
    shows the object exactly as the pass that wrote it left it (any other change makes another resourceVersion),
    so it has nothing to tell that pass's reconciler; a reconciler that uses this continues its pass after a write
    instead of waiting for the write's event. A thousand Machines with ten writes each otherwise queue ten
    thousand passes that find nothing to do, ahead of the ones that do (hack/bench/machines.py)."""

    def __init__(self, keep: int = 8):
        self._keep = keep
        self._lock = threading.Lock()
        self._rvs: dict[str, list[str]] = {}

    def record(self, written: dict[str, Any]) -> None:
        """`written`: the object as the API server answered the write."""
        rv = (written.get("metadata") or {}).get("resourceVersion")
        if rv:
            with self._lock:
                rvs = self._rvs.setdefault(object_key(written), [])
                rvs.append(rv)
                del rvs[:-self._keep]  # events lost to a relist never come: keep the newest few

    def is_echo(self, obj: dict[str, Any]) -> bool:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        key = object_key(obj)
        with self._lock:
            rvs = self._rvs.get(key)
            if not rv or not rvs or rv not in rvs:
                return False
            rvs.remove(rv)
            if not rvs:
                del self._rvs[key]
            return True

    def forget(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self._rvs.pop(object_key(obj), None)


def unless_own_write(handler: EventHandler, writes: OwnWrites) -> EventHandler:
    """Drop updates that are the echo of the reconciler's own write (`OwnWrites`); resyncs, adds and deletes
    always pass."""

    def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        if handler.on_update and (old is new or not writes.is_echo(new)):
            handler.on_update(old, new)

    def on_delete(obj: dict[str, Any]) -> None:
        writes.forget(obj)
        if handler.on_delete:
            handler.on_delete(obj)

    return EventHandler(on_add=handler.on_add, on_update=on_update, on_delete=on_delete)


def enqueue_object(queue: WorkQueue) -> EventHandler:
    """The object's own key (controller-runtime's EnqueueRequestForObject)."""
    return enqueue_mapped(queue, lambda obj: [object_key(obj)])


def owner_keys(obj: dict[str, Any], owner_kind: str, owner_group: str, controller_only: bool = True) -> list[str]:
    """Keys of `obj`'s owners of the given kind and API group (owners live in the object's namespace)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    keys = []
    for ref in meta.get("ownerReferences") or []:
        group = ref.get("apiVersion", "").rpartition("/")[0]
        if ref.get("kind") != owner_kind or group != owner_group:
            continue
        if controller_only and not ref.get("controller"):
            continue
        keys.append(f"{namespace}/{ref['name']}" if namespace else ref["name"])
    return keys


def enqueue_owner(queue: WorkQueue, owner_kind: str, owner_group: str, controller_only: bool = True) -> EventHandler:
    """Enqueue the owner (e.g. a Machine event enqueues its MachineSet); controller-runtime's EnqueueRequestForOwner
    with OnlyControllerOwner by default."""
    return enqueue_mapped(queue, lambda obj: owner_keys(obj, owner_kind, owner_group, controller_only))


@contextlib.contextmanager
def running(controller: Controller, timeout: float | None = 10.0) -> Any:
    """Start a controller for the duration of a block (tests, simple tools)."""
    controller.start()
    try:
        yield controller
    finally:
        controller.stop(timeout)
