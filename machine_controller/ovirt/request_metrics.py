"""Every request the controllers send to the engine, counted by operation and outcome and timed: what the engine
alerts of config/monitoring watch (docs/runbooks/README.md).

Both labels are bounded by the code, never by user input. `operation` is the name of the OvirtClient method that
made the request (or, through `OvirtClient.call`, of the function that called it): the `what` texts of the client
carry VM and disk names and ids, which would make a series per object. `outcome` is the class `errors.classify`
put the failure in.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from machine_controller.runtime.metrics import family

from .connection import NoCredentials
from .errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    MissingDependencyError,
    NotFoundError,
    OvirtError,
    TransientError,
)

OK = "ok"
# The most specific class first: outcome() takes the first class of the error's MRO found here.
_OUTCOMES: dict[type[BaseException], str] = {
    NoCredentials: "no_credentials",  # no usable secret: nothing reached the engine
    ConflictError: "conflict",  # 409: the object's state refuses it now
    TransientError: "transient",  # timeouts, lost connections, 5xx, locked objects
    NotFoundError: "not_found",  # often expected: a lookup of what may be gone
    MissingDependencyError: "missing_dependency",
    BadRequestError: "bad_request",
    AuthenticationError: "unauthorized",
    OvirtError: "error",
}
OUTCOMES = (OK, *_OUTCOMES.values())
# Engine calls take from a few ms (a GET) to tens of seconds (a create under load, up to --ovirt-timeout).
_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def outcome(err: BaseException | None) -> str:
    if err is None:
        return OK
    for cls in type(err).__mro__:
        if cls in _OUTCOMES:
            return _OUTCOMES[cls]
    return "error"


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter("ovirt_engine_requests", "Requests sent to the oVirt engine, by operation and outcome.",
                                ["operation", "outcome"], registry=registry)
        self.duration = Histogram("ovirt_engine_request_duration_seconds",
                                  "Time from sending a request to the oVirt engine to its answer or failure.",
                                  ["operation"], buckets=_BUCKETS, registry=registry)

    @classmethod
    def of(cls, registry: CollectorRegistry | None) -> "RequestMetrics":
        """One set per registry, shared by every client reporting into it."""
        return family(registry, "ovirt_engine_requests", cls)

    def observe(self, operation: str, err: BaseException | None, seconds: float) -> None:
        self.requests.labels(operation, outcome(err)).inc()
        self.duration.labels(operation).observe(seconds)
