"""Faults injected by tests into the wire path, and the per-template request counters.

A rule matches a request by method (`*` for any) and a glob on the path, written either relative to the API
(`/vms/*/start`) or absolute (`/ovirt-engine/sso/oauth/token`). It fires `count` times (None: forever), each time
with `probability`, and then does one of: answer `status` with an engine-shaped fault, drop the connection without
an answer, only delay the request by `delay` seconds before normal processing (a request held on its way: the
engine sees nothing of it until then, and carries it out even if its client gave up), or (`slow`) take the request
at once and carry it out `delay` seconds later, as an engine whose command hangs on its host does: the action's
job is `started` from its arrival, and its effect and the answer come after the delay.
"""

from __future__ import annotations

import fnmatch
import itertools
import random
import threading
from collections import Counter
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from hack.ovirtsim.config import API_PREFIX


class FaultKind(str, Enum):
    STATUS = "status"  # answer with `status` and a fault body (empty body if `reason` is None and status 404)
    DROP = "drop"  # close the connection without an answer (the client sees an empty reply)
    DELAY = "delay"  # sleep `delay` seconds, then process the request normally
    SLOW = "slow"  # an action: its job is started at once, its effect and answer come `delay` seconds later


@dataclass
class FaultRule:
    path: str
    method: str = "*"
    kind: FaultKind = FaultKind.STATUS
    status: int = 500
    reason: str | None = "Operation Failed"
    detail: str | None = "[Internal Engine Error]"
    delay: float = 0.0
    count: int | None = 1
    probability: float = 1.0
    id: int = 0
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method != "*" and self.method.upper() != method.upper():
            return False
        relative = path[len(API_PREFIX):] if path.startswith(API_PREFIX) else None
        return fnmatch.fnmatchcase(path, self.path) or (relative is not None
                                                          and fnmatch.fnmatchcase(relative, self.path))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "FaultRule":
        known = {k: v for k, v in data.items() if k in FaultRule.__dataclass_fields__ and k not in ("id", "fired")}
        if "kind" in known:
            known["kind"] = FaultKind(known["kind"])
        if "path" not in known:
            raise ValueError("a fault rule needs a 'path' glob")
        return FaultRule(**known)


class FaultInjector:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._rng = rng or random.Random()

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            rule.id = next(self._ids)
            self._rules.append(rule)
        return rule

    def clear(self, rule_id: int | None = None) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if rule_id is not None and r.id != rule_id]

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def take(self, method: str, path: str) -> FaultRule | None:
        """The first live rule matching the request, consuming one of its shots."""
        with self._lock:
            for rule in self._rules:
                if rule.count is not None and rule.count <= 0:
                    continue
                if not rule.matches(method, path):
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                if rule.count is not None:
                    rule.count -= 1
                rule.fired += 1
                return rule
        return None


class RequestCounters:
    """Every request by `METHOD template` (e.g. `GET /vms/{vm}`), exact, for tests and benchmarks."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, method: str, template: str) -> None:
        with self._lock:
            self._counts[f"{method} {template}"] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self, counts: dict[str, int] | None = None) -> None:
        with self._lock:
            self._counts = Counter(counts or {})
