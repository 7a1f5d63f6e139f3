"""Generic controller machinery: informers, work queue, controller loop, leader election, events, health and
metrics, logging. Knows nothing of oVirt or Machines (layering: docs/architecture.md; enforced by import-linter).

Module map:
- `kube`: `Resource` (group/version/plural/kind → REST paths), `Rest` (JSON requests through an ApiClient),
  `load_api_client`, `object_key`/`split_key`, `classify` → `ErrorKind` (with `is_not_found`, `is_conflict`).
- `writes`: `write` (the one way a reconciler writes its object: the changed fields only, optionally guarded),
  `changed_fields`, and the lost races `Conflict` and `Gone` the controller loop ends a pass with.
- `informer`: `Informer` (list+watch with bookmarks, 410 → relist with a diff, resync), `Store` (indexed cache),
  `EventHandler`.
- `ratelimit`: `ItemExponentialBackoff`, `TokenBucket`, `MaxOf`, `controller_rate_limiter`.
- `workqueue`: `WorkQueue` (client-go semantics and metric names).
- `controller`: `Controller`, `Result`, `TerminalError`, and the enqueue helpers `enqueue_object`, `enqueue_owner`,
  `enqueue_mapped`, `owner_keys`.
- `leader_election`: `LeaderElector`, `LeaderElectionConfig` (coordination.k8s.io/v1 Lease).
- `events`: `EventRecorder` (core/v1 Events with client-go's aggregation and spam filter).
- `server`: `HealthServer` (/healthz, /readyz, /metrics).
- `logging`: `configure_logging`, `get_logger`, `redact_secrets`.
- `manager`: `Manager` (lifecycle, leader election, SIGTERM).
- `metrics`: per-registry metric families (internal); `testing`: `wait_until` for tests.
"""

from .controller import Controller, Result, TerminalError, enqueue_mapped, enqueue_object, enqueue_owner, owner_keys
from .events import NORMAL, WARNING, EventRecorder
from .informer import EventHandler, Informer, Store
from .kube import ErrorKind, Resource, Rest, classify, is_conflict, is_not_found, load_api_client, object_key, split_key
from .leader_election import LeaderElectionConfig, LeaderElector
from .manager import Manager
from .ratelimit import controller_rate_limiter
from .server import HealthServer
from .workqueue import WorkQueue
from .writes import Conflict, Gone, changed_fields, write

__all__ = [
    "Controller", "Result", "TerminalError", "enqueue_mapped", "enqueue_object", "enqueue_owner", "owner_keys",
    "NORMAL", "WARNING", "EventRecorder",
    "EventHandler", "Informer", "Store",
    "ErrorKind", "Resource", "Rest", "classify", "is_conflict", "is_not_found", "load_api_client", "object_key",
    "split_key",
    "LeaderElectionConfig", "LeaderElector",
    "Manager",
    "controller_rate_limiter",
    "HealthServer",
    "WorkQueue",
    "Conflict", "Gone", "changed_fields", "write",
]
