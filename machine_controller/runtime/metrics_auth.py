"""Who may read /metrics, decided by the API server the way controller-runtime's secure metrics serving does
(docs/architecture.md#protected-metrics).

The caller's bearer token is authenticated with a TokenReview; the user it names is then authorized with a
SubjectAccessReview for the non-resource URL `/metrics` and the request's verb (`get`). No token, or one the API
server does not accept: 401. A user without the right: 403. The API server unreachable: 500, never a guess.
Answers are cached as controller-runtime caches them (token reviews 1 min, allowed 5 min, denied 30 s), so a
Prometheus scraping every 30 s costs the API server about one review a minute; failures are never cached.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from .kube import Rest
from .logging import get_logger

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

AUTHN_TTL_S = 60.0
ALLOW_TTL_S = 300.0
DENY_TTL_S = 30.0


@dataclass(frozen=True)
class Verdict:
    status: int  # the HTTP status to answer with: 200 lets the request through
    message: str


class MetricsAuth:
    def __init__(self, rest: Rest, clock: Callable[[], float] = time.monotonic) -> None:
        self._rest = rest
        self._clock = clock
        self._lock = threading.Lock()
        self._users: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._decisions: dict[tuple, tuple[float, bool]] = {}
        self._log = get_logger("metrics-auth")

    def check(self, authorization: str | None, method: str, path: str) -> Verdict:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Verdict(401, "Unauthorized")
        try:
            user = self._authenticate(token)
            if user is None:
                return Verdict(401, "Unauthorized")
            allowed = self._authorize(user, method.lower(), path)
        except Exception as exc:  # noqa: BLE001 - any failure to ask is an error, never a decision
            self._log.error("metrics authentication or authorization failed", error=str(exc))
            return Verdict(500, "Authentication or authorization failed")
        name = user.get("username", "")
        return Verdict(200, "ok") if allowed else Verdict(403, f"Authorization denied for user {name}")

    def _cached(self, cache: dict, key: Any) -> tuple[bool, Any]:
        with self._lock:
            entry = cache.get(key)
            if entry is not None and entry[0] > self._clock():
                return True, entry[1]
            cache.pop(key, None)
            return False, None

    def _store(self, cache: dict, key: Any, value: Any, ttl: float) -> None:
        now = self._clock()
        with self._lock:
            if len(cache) > 1024:  # bound the memory a stream of random tokens could take
                for k in [k for k, (expiry, _) in cache.items() if expiry <= now] or list(cache)[:512]:
                    cache.pop(k, None)
            cache[key] = (now + ttl, value)

    def _authenticate(self, token: str) -> dict[str, Any] | None:
        key = hashlib.sha256(token.encode()).hexdigest()  # the token itself is never kept
        hit, user = self._cached(self._users, key)
        if hit:
            return user
        review = self._rest.request("POST", TOKEN_REVIEWS, body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        status = review.get("status") or {}
        user = (status.get("user") or {}) if status.get("authenticated") else None
        self._store(self._users, key, user, AUTHN_TTL_S)
        return user

    def _authorize(self, user: dict[str, Any], verb: str, path: str) -> bool:
        extra = {k: tuple(v) for k, v in sorted((user.get("extra") or {}).items())}
        key = (user.get("username"), user.get("uid"), tuple(user.get("groups") or ()), tuple(extra.items()),
               verb, path)
        hit, allowed = self._cached(self._decisions, key)
        if hit:
            return bool(allowed)
        spec: dict[str, Any] = {"user": user.get("username"), "groups": list(user.get("groups") or []),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if extra:
            spec["extra"] = {k: list(v) for k, v in extra.items()}
        review = self._rest.request("POST", SUBJECT_ACCESS_REVIEWS, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._store(self._decisions, key, allowed, ALLOW_TTL_S if allowed else DENY_TTL_S)
        return allowed
