"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics (`tools/leaderelection`).

- A candidate takes the Lease when it has no holder, or when the record has not changed for `lease_duration`
  as measured on *our* clock since we first saw that record (not the renewTime written by another host: clocks
  differ between nodes, local observation does not care).
- The leader rewrites renewTime every `retry_period`; if it cannot renew for `renew_deadline` it has lost and must
  stop working, before anyone else may take over (renew_deadline < lease_duration leaves the margin).
- Writes are PUTs carrying the resourceVersion read, so two candidates racing for an expired Lease cannot both
  win: the loser gets 409 and tries again next period.
- On graceful shutdown the leader releases: holder "" and leaseDurationSeconds 1, so a successor takes over at
  its next retry instead of waiting out the lease (client-go's ReleaseOnCancel).

Defaults follow the oVirt provider's manager (docs/architecture.md#deployment-modes): lease 120 s, renew deadline 110 s,
retry period 20 s.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .bounds import check_number
from .kube import LEASES, ErrorKind, Rest, classify
from .logging import get_logger

_JITTER = 1.2  # client-go's JitterFactor for the acquire loop


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 120.0
    renew_deadline: float = 110.0
    retry_period: float = 20.0
    release_on_stop: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election identity must not be empty")
        # client-go's rule, also checked by the flags (config.py) in their names.
        for name in ("lease_duration", "renew_deadline", "retry_period"):
            check_number(f"LeaderElectionConfig {name}", getattr(self, name), 0, above=True, why="seconds")
        if self.renew_deadline >= self.lease_duration:
            raise ValueError(f"LeaderElectionConfig renew_deadline must be below lease_duration "
                             f"({self.lease_duration:g}), got {self.renew_deadline:g} (client-go's rule)")
        if self.renew_deadline <= _JITTER * self.retry_period:
            raise ValueError(f"LeaderElectionConfig retry_period: {_JITTER:g} times it must be below renew_deadline "
                             f"({self.renew_deadline:g}), got {self.retry_period:g} (client-go's rule)")


def _micro_time(moment: datetime) -> str:
    # metav1.MicroTime's wire format: RFC 3339 with exactly six fractional digits.
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        api_client: ApiClient,
        config: LeaderElectionConfig,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        # Bound every request by the renew deadline, as client-go's context does: a hung renew must not outlive it.
        request_timeout = min(30.0, config.renew_deadline / 2)
        self._rest = Rest(api_client, timeout=(min(10.0, request_timeout), request_timeout))
        self._stop = threading.Event()
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0  # time.monotonic() when the record last changed
        self._observed_rv: str | None = None
        self._reported_leader: str | None = None
        self._lock = threading.Lock()  # one tryAcquireOrRenew at a time (the loop and release may race)
        self._log = get_logger("leader_election", lease=f"{config.namespace}/{config.name}",
                               identity=config.identity)

    def is_leader(self) -> bool:
        return self._leading.is_set()

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=f"leader-election-{self.config.name}", daemon=True)
        self._thread.start()

    def stop(self, release: bool | None = None, timeout: float | None = 10.0) -> None:
        """Stop campaigning. With `release` (default: config.release_on_stop) a leader frees the Lease at once;
        without it the Lease simply expires, as if this process had died."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.config.release_on_stop if release is None else release:
            self.release()
        if self._leading.is_set():
            self._lost()

    def run(self) -> None:
        """Campaign until leading, then renew until lost or stopped (blocking)."""
        if not self._acquire():
            return
        self._renew()

    def _acquire(self) -> bool:
        while not self._stop.is_set():
            if self._try_acquire_or_renew():
                self._leading.set()
                self._log.info("became leader")
                if self.on_started_leading:
                    self.on_started_leading()
                return True
            self._stop.wait(self.config.retry_period * random.uniform(1.0, _JITTER))
        return False

    def _renew(self) -> None:
        last_renew = time.monotonic()
        while not self._stop.wait(self.config.retry_period):
            if self._try_acquire_or_renew():
                last_renew = time.monotonic()
                continue
            # Retry within the deadline at the retry period; past it, we are no longer safely the leader.
            while not self._stop.is_set() and time.monotonic() - last_renew < self.config.renew_deadline:
                if self._stop.wait(min(self.config.retry_period,
                                       self.config.renew_deadline - (time.monotonic() - last_renew))):
                    return
                if self._try_acquire_or_renew():
                    last_renew = time.monotonic()
                    break
            else:
                if not self._stop.is_set():
                    self._log.error("failed to renew lease within the deadline; leadership lost",
                                    renew_deadline=self.config.renew_deadline)
                    self._lost()
                    return

    def _lost(self) -> None:
        if self._leading.is_set():
            self._leading.clear()
            if self.on_stopped_leading:
                self.on_stopped_leading()

    def _try_acquire_or_renew(self) -> bool:
        try:
            return self._try_acquire_or_renew_once()
        except Exception as exc:  # noqa: BLE001 - a network error is one failed attempt, not the end of the loop
            self._log.warning("lease attempt failed", error=str(exc)[:300], error_type=type(exc).__name__)
            return False

    def _try_acquire_or_renew_once(self) -> bool:
        cfg = self.config
        with self._lock:
            now = datetime.now(timezone.utc)
            try:
                lease = self._rest.get(LEASES, cfg.name, cfg.namespace)
            except ApiException as exc:
                if classify(exc) != ErrorKind.NOT_FOUND:
                    self._log.warning("cannot read lease", error=str(exc.reason), status=exc.status)
                    return False
                return self._create(now)
            spec = lease.get("spec") or {}
            record = {k: spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                                               "renewTime", "leaseTransitions")}
            if record != self._observed_spec:
                self._observed_spec = record
                self._observed_at = time.monotonic()
                self._note_leader(record.get("holderIdentity") or "")
            holder = record.get("holderIdentity") or ""
            duration = record.get("leaseDurationSeconds") or cfg.lease_duration
            # Ours already (a renewal, or this identity restarted): keep acquireTime and the transition count.
            ours = holder == cfg.identity
            if holder and holder != cfg.identity and time.monotonic() < self._observed_at + duration:
                return False  # somebody else holds an unexpired lease
            transitions = int(record.get("leaseTransitions") or 0)
            new_spec = {
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": int(cfg.lease_duration),
                "renewTime": _micro_time(now),
                "acquireTime": record.get("acquireTime") if ours else _micro_time(now),
                "leaseTransitions": transitions if ours else transitions + 1,
            }
            lease["spec"] = {**spec, **new_spec}
            return self._write(lease)

    def _create(self, now: datetime) -> bool:
        cfg = self.config
        body = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
            "spec": {"holderIdentity": cfg.identity, "leaseDurationSeconds": int(cfg.lease_duration),
                     "acquireTime": _micro_time(now), "renewTime": _micro_time(now), "leaseTransitions": 0},
        }
        try:
            created = self._rest.create(LEASES, body, cfg.namespace)
        except ApiException as exc:
            self._log.info("lease create lost", status=exc.status)  # 409: another candidate created it first
            return False
        self._remember(created)
        return True

    def _write(self, lease: dict[str, Any]) -> bool:
        try:
            updated = self._rest.replace(LEASES, lease)  # carries metadata.resourceVersion: 409 if it moved
        except Exception as exc:  # noqa: BLE001 - 409 (lost the race) or a network error: this attempt failed
            self._log.info("lease update failed", status=getattr(exc, "status", None), kind=classify(exc).value)
            return False
        self._remember(updated)
        return True

    def _remember(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        self._observed_spec = {k: spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                                                         "renewTime", "leaseTransitions")}
        self._observed_at = time.monotonic()
        self._note_leader(spec.get("holderIdentity") or "")

    def _note_leader(self, holder: str) -> None:
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            self._log.info("leader observed", leader=holder)
            if self.on_new_leader:
                self.on_new_leader(holder)

    def release(self) -> bool:
        """Give the Lease up if we hold it. True if released (or nothing to release)."""
        cfg = self.config
        if not self._leading.is_set():
            return True
        with self._lock:
            try:
                lease = self._rest.get(LEASES, cfg.name, cfg.namespace)
            except Exception as exc:  # noqa: BLE001 - the lease then expires by itself
                self._log.warning("cannot read lease to release it", error=str(exc)[:300])
                return False
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != cfg.identity:
                return True
            now = _micro_time(datetime.now(timezone.utc))
            lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now,
                             "acquireTime": now}
            released = self._write(lease)
        if released:
            self._log.info("released lease")
            self._lost()
        return released
