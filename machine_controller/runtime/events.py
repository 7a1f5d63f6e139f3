"""Kubernetes Events, as `kubectl describe` shows them: core/v1 Events with an involvedObject.

A reconcile that fails every few seconds would write an Event each time; client-go's EventCorrelator prevents
that flood, and the same three steps are reproduced here (`tools/record/events_cache.go`):

1. Aggregation: more than `aggregate_max` (10) events alike but for the message, for one object within
   `aggregate_window` (10 min), become one event "(combined from similar events): <latest message>".
2. Deduplication: an event identical to one already written (same object, type, reason, message) is not
   written again; the existing Event's `count` and `lastTimestamp` are patched instead.
3. Spam filter: per object and source, a token bucket (burst 25, one token per 5 min) drops the excess.

Recording never blocks or raises in the caller: events go through a bounded queue to a sender thread, and are
dropped when it is full (client-go drops too), because an event is a courtesy to the user, not state.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .kube import EVENTS, ErrorKind, Rest, classify
from .logging import get_logger
from .ratelimit import TokenBucket

NORMAL = "Normal"
WARNING = "Warning"

_CACHE_SIZE = 4096  # client-go's maxLruCacheEntries


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    first_timestamp: str


def _timestamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self,
        api_client: ApiClient,
        component: str,
        host: str | None = None,
        clock: Callable[[], float] = time.time,
        aggregate_max: int = 10,
        aggregate_window: float = 600.0,
        spam_burst: int = 25,
        spam_qps: float = 1.0 / 300.0,
        queue_size: int = 1000,
    ) -> None:
        self.component = component
        self.host = host or socket.gethostname()
        self._rest = Rest(api_client)
        self._clock = clock
        self._aggregate_max = aggregate_max
        self._aggregate_window = aggregate_window
        self._spam_burst = spam_burst
        self._spam_qps = spam_qps
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()  # dedupe cache (LRU)
        self._similar: OrderedDict[tuple[str, ...], tuple[float, set[str]]] = OrderedDict()  # aggregation
        self._buckets: OrderedDict[tuple[str, ...], TokenBucket] = OrderedDict()
        # (involvedObject reference, type, reason, message, when)
        self._queue: queue.Queue[tuple[dict[str, Any], str, str, str, float] | None] = queue.Queue(queue_size)
        self._log = get_logger("events", component=component)
        self._thread = threading.Thread(target=self._send_loop, name="event-recorder", daemon=True)
        self._thread.start()

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an event about `obj` (a dict with apiVersion, kind, metadata). Never blocks, never raises.

        The reference to `obj` is taken now, as client-go takes it: the caller may change its object after this
        returns, and the queue holds a few names instead of the object (a thousand Machines created at once queue a
        thousand events while the sender writes them one by one)."""
        try:
            self._queue.put_nowait((_reference(obj), type_, reason, message, self._clock()))
        except queue.Full:
            self._log.warning("event queue full; dropping event", reason=reason)

    def normal(self, obj: dict[str, Any], reason: str, message: str) -> None:
        self.event(obj, NORMAL, reason, message)

    def warning(self, obj: dict[str, Any], reason: str, message: str) -> None:
        self.event(obj, WARNING, reason, message)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every recorded event has been sent (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.01)
        return False

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass
        self._thread.join(timeout)

    # --- the sender thread ------------------------------------------------------------------------------------

    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._send(*item)
            except Exception as exc:  # noqa: BLE001 - a failed event is logged and forgotten
                self._log.warning("could not write event", error=str(exc)[:300])
            finally:
                self._queue.task_done()

    def _send(self, ref: dict[str, Any], type_: str, reason: str, message: str, now: float) -> None:
        namespace = ref.get("namespace") or "default"  # cluster-scoped objects' events go to default (client-go)
        obj_id = (ref["kind"], namespace, ref["name"], ref.get("uid", ""))

        if not self._allow(obj_id, now):
            self._log.debug("event dropped by spam filter", reason=reason)
            return
        similar_key = obj_id + (type_, reason)
        combined = self._aggregate(similar_key, message, now)
        # Once combined, all similar events share one Event (keyed without the message): its count grows and its
        # message shows the latest, as client-go's aggregator does.
        message = f"(combined from similar events): {message}" if combined else message
        dedupe_key = similar_key if combined else similar_key + (message,)
        seen = self._seen.get(dedupe_key)
        if seen is not None:
            self._seen.move_to_end(dedupe_key)
            patch = {"count": seen.count + 1, "lastTimestamp": _timestamp(now), "message": message}
            try:
                self._rest.merge_patch(EVENTS, seen.name, patch, seen.namespace)
                seen.count += 1
                return
            except ApiException as exc:
                if classify(exc) != ErrorKind.NOT_FOUND:
                    raise
                # The Event expired (the API server keeps them an hour by default): start a new one.
        stamp = _timestamp(now)
        body = {
            "apiVersion": "v1", "kind": "Event",
            # client-go names events `<object>.<hex nanoseconds>`: unique without a server round trip.
            "metadata": {"name": f"{ref['name']}.{int(now * 1e9):x}", "namespace": namespace},
            "involvedObject": ref,
            "type": type_, "reason": reason, "message": message,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component, "reportingInstance": self.host,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        created = self._rest.create(EVENTS, body, namespace)
        self._seen[dedupe_key] = _Seen(created["metadata"]["name"], namespace, 1, stamp)
        while len(self._seen) > _CACHE_SIZE:
            self._seen.popitem(last=False)

    def _allow(self, obj_id: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(obj_id)
        if bucket is None:
            bucket = TokenBucket(self._spam_qps, self._spam_burst, clock=self._clock)
            self._buckets[obj_id] = bucket
            while len(self._buckets) > _CACHE_SIZE:
                self._buckets.popitem(last=False)
        return bucket.allow()

    def _aggregate(self, similar_key: tuple[str, ...], message: str, now: float) -> bool:
        """Whether this event is one too many of its kind in the window and must be combined."""
        started, messages = self._similar.get(similar_key, (now, set()))
        if now - started > self._aggregate_window:
            started, messages = now, set()
        messages.add(message)
        self._similar[similar_key] = (started, messages)
        self._similar.move_to_end(similar_key)
        while len(self._similar) > _CACHE_SIZE:
            self._similar.popitem(last=False)
        return len(messages) > self._aggregate_max


def _reference(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": meta.get("name", ""),
           "namespace": meta.get("namespace"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
    return {k: v for k, v in ref.items() if v}
