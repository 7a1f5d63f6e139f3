"""A shared informer: LIST, then WATCH from the list's resourceVersion, keeping a cache of plain dicts and calling
event handlers (client-go's Reflector + Indexer + SharedInformer, docs/compatibility.md#kubernetes-api).

Why not `kubernetes.watch.Watch`: on an ERROR 410 it silently retries once with the RV it already had, and with
`timeout_seconds` it never reconnects; either way the caller cannot tell "the stream ended" from "my RV is gone and
I missed changes". And `kubernetes.informer` (new in 37) asks for no bookmarks and runs handlers without any
queue. So the stream is read here directly (`kube.Rest.open_stream`) and every event type is handled explicitly:

- ADDED/MODIFIED/DELETED update the cache, then the handlers; the RV is taken from each object.
- BOOKMARK only advances the RV (so a reconnect after a quiet period does not start from an ancient RV).
- ERROR with code 410 (or an HTTP 410 on connect): the RV was compacted away; relist and emit the diff as
  synthetic adds, updates and deletes so handlers see what was missed.
- The server ends each watch after `timeoutSeconds`; we reconnect from the last RV. Errors the server answers
  with reconnect with exponential backoff (client-go: 800 ms doubling to 30 s); an unreachable server (restarting)
  is retried at most every 2 s, so the controller resumes within seconds of the API coming back.
"""

from __future__ import annotations

import builtins
import json
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .bounds import check_number
from .kube import Resource, Rest, Stream, object_key
from .logging import get_logger

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], Iterable[str]]


@dataclass
class EventHandler:
    """Callbacks an Informer invokes, in event order, on its own thread. They must be quick (enqueue a key) and
    should not raise; an exception is logged and the next handler still runs."""

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class Store:
    """A thread-safe cache of objects keyed `namespace/name`, with secondary indexes.

    Readers get the stored dicts themselves, not copies: treat them as read-only (copy before mutating), as
    with client-go's cache.
    """

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, Obj] = {}
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Index the objects by `func` from now on, those already cached included (client-go's AddIndexers): a
        controller that maps events of another kind to these objects asks the index instead of scanning them all
        (a thousand Machines scanned at each Node event cost more than the Nodes' reconciles). Adding the same
        name again keeps the first."""
        with self._lock:
            if name in self._indexers:
                return
            self._indexers[name] = func
            self._indices[name] = {}
            for key, obj in self._items.items():
                for value in func(obj):
                    self._indices[name].setdefault(value, set()).add(key)

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        """Objects whose index function yields `value`, e.g. `by_index("nodeName", "worker-0")`."""
        with self._lock:
            keys = self._indices[index].get(value, set())
            return [self._items[k] for k in sorted(keys)]

    def put(self, obj: Obj) -> Obj | None:
        """Insert or replace; returns the previous object."""
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
            self._items[key] = obj
            self._index(key, obj)
            return old

    def remove(self, key: str) -> Obj | None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def _index(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                keys = self._indices[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indices[name][value]


UNREACHABLE_RETRY_CAP_S = 2.0


def without_managed_fields(obj: Obj) -> Obj:
    """A transform for informers whose readers never look at `metadata.managedFields`: the field managers'
    bookkeeping of every write is often as large as the rest of a Machine, and a cache holds thousands."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


SHARED_STRING_MAX = 64  # longer strings (a user-data reference, a message) rarely repeat across objects


def compact(obj: Obj) -> Obj:
    """`without_managed_fields`, and every key and short string shared with the equal ones of the other cached
    objects (`sys.intern`). A thousand Machines repeat the same keys, namespace, labels, condition types and
    provider spec values a thousand times over: shared, the Machine and Node caches of a 1000-Machine cluster
    take about half the memory (hack/bench/machines.py), for some 40 us per object received."""
    return _shared(without_managed_fields(obj))


def _shared(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(k): _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    if isinstance(value, str) and len(value) <= SHARED_STRING_MAX:
        return sys.intern(value)
    return value


def _server_answered(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and bool(exc.status)


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): only a relist can recover."""


def _rv(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


class Informer:
    def __init__(
        self,
        api_client: ApiClient,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff: tuple[float, float] = (0.8, 30.0),
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        """`transform` (client-go's SetTransform) trims each object before it is cached and handed to handlers:
        what no reader needs is not kept a thousand times over. `resync_period`: seconds, None or 0 for none (as
        client-go's 0); a negative one made the resync loop spin, so it is refused here, not only by the flag."""
        if resync_period:
            check_number("Informer resync_period", resync_period, 0, above=True,
                         why="seconds between resyncs; None or 0 for none")
        self.resource = resource
        self.transform = transform
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resync_period = resync_period
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.store = Store(indexers)
        self.name = f"{resource.plural}.{resource.group or 'core'}" + (f"/{namespace}" if namespace else "")
        self._rest = Rest(api_client)
        self._handlers: list[EventHandler] = []
        # Handlers see one event at a time, watch and resync alike. Reentrant: a handler may add a handler.
        self._dispatch_lock = threading.RLock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._stream: Stream | None = None
        self._stream_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._resource_version: str | None = None
        self.list_count = 0  # how many full LISTs were made; tests and logs use it to see relists
        self._log = get_logger("informer", informer=self.name)

    # --- public API ------------------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Register handlers. One added after sync first receives an add for every cached object."""
        with self._dispatch_lock:
            self._handlers.append(handler)
            if self._synced.is_set() and handler.on_add:
                for obj in self.store.list():
                    self._call(handler.on_add, obj)

    def add_event_handler(self, on_add: Callable[[Obj], None] | None = None,
                          on_update: Callable[[Obj, Obj], None] | None = None,
                          on_delete: Callable[[Obj], None] | None = None) -> None:
        self.add_handler(EventHandler(on_add, on_update, on_delete))

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self._resource_version

    def start(self, resume_from: str | None = None) -> None:
        """Start listing and watching in a background thread.

        After `stop()`, `start()` resumes the watch from the last RV seen, with the cache kept, as a reconnect
        would. `resume_from` overrides that RV (tests use a too-old one to force the 410 path).
        """
        if any(t.is_alive() for t in self._threads):
            return
        self._stop.clear()
        if resume_from is not None:
            self._resource_version = resume_from
        self._threads = [threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)]
        if self.resync_period:
            self._threads.append(threading.Thread(target=self._resync_loop, name=f"resync-{self.name}",
                                                  daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        with self._stream_lock:
            if self._stream is not None:
                self._stream.close()
        for thread in self._threads:
            thread.join(timeout)

    # --- list and watch --------------------------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.backoff[0]
        while not self._stop.is_set():
            try:
                if self._resource_version is None:
                    self._relist()
                started = time.monotonic()
                self._watch()
                if time.monotonic() - started > 1.0:
                    delay = self.backoff[0]  # a watch that ran and ended normally resets the backoff
                else:
                    # A server that closes every watch at once would otherwise be hammered in a tight loop.
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.backoff[1])
            except _Gone as exc:
                self._log.info("resourceVersion too old, relisting", resource_version=self._resource_version,
                               detail=str(exc))
                self._resource_version = None
            except Exception as exc:  # noqa: BLE001 - any failure: back off and try again until stopped
                if self._stop.is_set():
                    return
                # A server that answers (429, 5xx) is struggling: back off up to the full cap. One that cannot be
                # reached (restarting, connection refused) costs nothing to knock on, and the controller should
                # resume within seconds of it coming back, so those retries stay short.
                cap = self.backoff[1] if _server_answered(exc) else min(self.backoff[1], UNREACHABLE_RETRY_CAP_S)
                delay = min(delay, cap)
                self._log.warning("list/watch failed, retrying", error=str(exc)[:500],
                                  error_type=type(exc).__name__, retry_in=round(delay, 2))
                self._stop.wait(delay * random.uniform(1.0, 1.2))
                delay = min(delay * 2, cap)

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    def _relist(self) -> None:
        items: dict[str, Obj] = {}
        token: str | None = None
        path = self.resource.path(self.namespace)
        while True:
            try:
                page = self._rest.request("GET", path, {**self._selectors(), "limit": self.page_size,
                                                        "continue": token})
            except ApiException as exc:
                if exc.status == 410 and token:
                    # The continue token expired mid-list; a consistent snapshot needs a fresh start.
                    items, token = {}, None
                    continue
                raise
            for obj in page.get("items") or []:
                # List items carry no kind/apiVersion; fill them in so cached objects look like watched ones.
                obj.setdefault("kind", self.resource.kind)
                obj.setdefault("apiVersion", self.resource.api_version)
                items[object_key(obj)] = self.transform(obj) if self.transform else obj
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                list_rv = (page.get("metadata") or {}).get("resourceVersion")
                break
        self.list_count += 1
        self._replace(items)
        self._resource_version = list_rv
        self._log.debug("listed", count=len(items), resource_version=list_rv)

    def _replace(self, items: dict[str, Obj]) -> None:
        """Make the cache equal to a fresh list, telling handlers what changed since they last heard."""
        with self._dispatch_lock:
            for key in self.store.keys():
                if key not in items:
                    old = self.store.remove(key)
                    if old is not None:
                        self._emit_delete(old)
            for obj in items.values():
                old = self.store.put(obj)
                if old is None:
                    self._emit_add(obj)
                elif _rv(old) != _rv(obj):
                    self._emit_update(old, obj)
            self._synced.set()

    def _watch(self) -> None:
        # client-go's reflector spreads watch timeouts over [t, 2t) so many informers do not reconnect in step.
        timeout = int(self.watch_timeout * random.uniform(1.0, 2.0))
        query = {**self._selectors(), "watch": "true", "allowWatchBookmarks": "true",
                 "resourceVersion": self._resource_version, "timeoutSeconds": timeout}
        try:
            # The read timeout outlives the server's own timeout, so only a dead connection trips it.
            stream = self._rest.open_stream(self.resource.path(self.namespace), query, read_timeout=timeout + 30)
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone(exc.reason) from exc
            raise
        with self._stream_lock:
            if self._stop.is_set():
                stream.close()
                return
            self._stream = stream
        try:
            for line in stream.lines():
                if self._stop.is_set():
                    return
                self._handle_event(json.loads(line))
        finally:
            with self._stream_lock:
                self._stream = None
            stream.close()

    def _handle_event(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Gone(obj.get("message", "Gone"))
            raise ApiException(status=code, reason=f"watch error: {obj.get('reason')}: {obj.get('message')}")
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self._resource_version = rv
            return
        if self.transform and kind in ("ADDED", "MODIFIED", "DELETED"):
            obj = self.transform(obj)
        with self._dispatch_lock:
            if kind in ("ADDED", "MODIFIED"):
                old = self.store.put(obj)
                if old is None:
                    self._emit_add(obj)
                else:
                    self._emit_update(old, obj)
            elif kind == "DELETED":
                self.store.remove(object_key(obj))
                self._emit_delete(obj)
            else:
                self._log.warning("unknown watch event type", type=kind)
        if rv:
            self._resource_version = rv

    # --- resync and dispatch ---------------------------------------------------------------------------------

    def _resync_loop(self) -> None:
        """Re-emit every cached object as an update, so level-triggered controllers look at everything again even
        when nothing changed (e.g. a VM that changed in oVirt, which no watch reports)."""
        assert self.resync_period
        while not self._stop.wait(self.resync_period):
            if not self._synced.is_set():
                continue
            with self._dispatch_lock:
                for obj in self.store.list():
                    self._emit_update(obj, obj)

    def _emit_add(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_add:
                self._call(handler.on_add, obj)

    def _emit_update(self, old: Obj, new: Obj) -> None:
        for handler in self._handlers:
            if handler.on_update:
                self._call(handler.on_update, old, new)

    def _emit_delete(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_delete:
                self._call(handler.on_delete, obj)

    def _call(self, func: Callable[..., None], *args: Obj) -> None:
        try:
            func(*args)
        except Exception:  # noqa: BLE001 - one faulty handler must not stop the informer or the others
            self._log.exception("event handler failed", key=object_key(args[-1]))
