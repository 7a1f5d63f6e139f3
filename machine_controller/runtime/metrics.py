"""Prometheus metric families shared by every queue/controller that reports into one registry.

prometheus-client refuses to register the same metric name twice in a registry, while client-go and
controller-runtime report all queues and controllers under one family each, told apart by a label. So families
are built once per registry and cached here; the registry is injectable so tests get a fresh one.
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry

T = TypeVar("T")

_lock = threading.Lock()
_families: "weakref.WeakKeyDictionary[CollectorRegistry, dict[str, object]]" = weakref.WeakKeyDictionary()


def family(registry: CollectorRegistry | None, name: str, build: Callable[[CollectorRegistry], T]) -> T:
    """The metric set `name` for `registry` (the global default when None), built on first use."""
    registry = registry if registry is not None else REGISTRY
    with _lock:
        per_registry = _families.setdefault(registry, {})
        if name not in per_registry:
            per_registry[name] = build(registry)
        return per_registry[name]  # type: ignore[return-value]
