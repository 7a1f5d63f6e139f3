"""What a MachineSet remembers of its new Machines that failed, so that it does not make the next one at once
(docs/architecture.md#acting-only-on-what-is-ours: what cannot succeed is not repeated).

Under a MachineHealthCheck a Failed Machine is deleted within a second, and a set one Machine short would make the
next at once: an invalid template would churn Machines as fast as the controllers can create and delete them. Two
rules, per set:

- A Machine stamped with the set's *current* template hash (`keys.ANNOTATION_TEMPLATE_HASH`, set at creation) that
  fails as `InvalidConfiguration` proves the template cannot make a valid Machine: the set says so
  (`TemplateValid=False`) and creates nothing more until `spec.template` changes (its hash differs). A Machine
  without the stamp (made by MAO's MachineSet controller, adopted, or written by hand) proves nothing of the
  template: its failure only delays. A Machine stamped with an earlier template is ignored.
- A new Machine of the set that fails otherwise, or that someone else deletes before it ever got a Node (the
  health check's node-startup timeout, a user), delays the next create: 10 s after the first, doubled with each
  further one up to 5 minutes, the kubelet's CrashLoopBackOff and the Job controller's pod-failure back-off bounds
  (quick enough after one bad VM, at most one round of creates per 5 minutes when nothing works). A Machine of the
  set that gets a Node resets it: the infrastructure makes working Machines again.

Failures are learnt from the Machine watch (`observe`, called before the event enqueues the set), not from the cache
at reconcile time: the health check deletes a Failed Machine so soon that the set's next pass may find it gone,
but the informer hands its Failed status to the handlers before its store shows the deletion. The memory is the
process's: after a restart the set learns again from the Failed Machines still listed, or from at most one round
of `replicas` new Machines.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from api import keys
from api.machine import MachineAuthority, MachineErrorReason, MachinePhase
from api.meta import Condition, ConditionSeverity, false_condition, true_condition

FIRST_DELAY_S = 10.0
MAX_DELAY_S = 300.0

TEMPLATE_VALID = "TemplateValid"  # the MachineSet condition type this project adds
INVALID_TEMPLATE_EVENT = "InvalidTemplate"


def template_hash(machineset: dict[str, Any]) -> str:
    """A short digest of `spec.template`, stamped on each Machine the set creates (like a Deployment's
    pod-template-hash): a Machine's failure is the current template's only when the hashes agree."""
    template = (machineset.get("spec") or {}).get("template") or {}
    spec = template.get("spec") or {}
    if spec.get("authoritativeAPI") == MachineAuthority.MACHINE_API:
        # The CRD's default, which the API server writes into every stored template once the field exists: the
        # same template as before it (docs/compatibility.md#authoritativeapi), so its Machines' failures still count.
        template = {**template, "spec": {k: v for k, v in spec.items() if k != "authoritativeAPI"}}
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Hold:
    """Why the set creates no Machine now: `failures` new Machines failed, `machine` the last of them, for `reason`;
    either the template is `invalid` (nothing is created until it changes) or creation waits `delay_s` more
    seconds of a `backoff_s` back-off."""

    machine: str
    reason: str
    failures: int
    invalid: bool = False
    backoff_s: float = 0.0
    delay_s: float = 0.0


def template_valid(hold: Hold | None) -> Condition:
    """The set's `TemplateValid` condition: False while a Machine of its current template proved it invalid."""
    if hold is None or not hold.invalid:
        return true_condition(TEMPLATE_VALID)
    return false_condition(
        TEMPLATE_VALID, MachineErrorReason.INVALID_CONFIGURATION, ConditionSeverity.ERROR,
        f"machine {hold.machine} of this template failed: {hold.reason}; no machine is created until "
        "spec.template changes")


@dataclass
class _SetFailures:
    template: str  # the template hash these failures are about
    names: set[str] = field(default_factory=set)  # failed Machines already counted
    last: float = 0.0  # clock() at the last one
    last_name: str = ""
    last_reason: str = ""
    invalid: tuple[str, str] | None = None  # the Machine that proved the template invalid, and why
    told: int = 0  # failures already reported by a Hold


class CreationGuard:
    """Per MachineSet key: the failures of its new Machines, fed by the Machine watch, read by the reconciler.
    Thread-safe (the informer's thread writes, the workers read)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, first_delay_s: float = FIRST_DELAY_S,
                 max_delay_s: float = MAX_DELAY_S):
        self._clock = clock
        self._first = first_delay_s
        self._max = max_delay_s
        self._lock = threading.Lock()
        self._sets: dict[str, _SetFailures] = {}
        self._chosen: dict[str, set[str]] = {}  # Machines the set deletes itself (scale-down): no failure

    def observe(self, set_key: str, current: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A watch event of a Machine the set controls (`old` None: just listed or created; `new` None: gone);
        `current`: the set's template hash now."""
        machine = new or old or {}
        meta = machine.get("metadata") or {}
        name = meta.get("name", "")
        if _got_node(new) and not _got_node(old):
            self._reset(set_key)
            return
        stamped = (meta.get("annotations") or {}).get(keys.ANNOTATION_TEMPLATE_HASH)
        # A Machine of an earlier template says nothing of this one (the fixed template must not wait for the
        # broken one's Machines being deleted).
        failure = _failure(old, new) if stamped in (None, current) else None
        with self._lock:
            chosen = self._chosen.get(set_key, set())
            if failure is not None and failure.deleted and name in chosen:
                failure = None
            if new is None:
                chosen.discard(name)
            if failure is None:
                return
            failures = self._current(set_key, current) or self._sets.setdefault(set_key, _SetFailures(current))
            if name in failures.names:
                return
            failures.names.add(name)
            failures.last, failures.last_name, failures.last_reason = self._clock(), name, failure.reason
            if stamped == current and failure.error_reason == MachineErrorReason.INVALID_CONFIGURATION:
                failures.invalid = failures.invalid or (name, failure.reason)

    def chose(self, set_key: str, name: str) -> None:
        """The set deletes this Machine itself (scale-down): its deletion is no failure."""
        with self._lock:
            self._chosen.setdefault(set_key, set()).add(name)

    def hold(self, set_key: str, current: str) -> Hold | None:
        """Why the set must not create a Machine now, or None."""
        with self._lock:
            failures = self._current(set_key, current)
            if failures is None:
                return None
            count = len(failures.names)
            if failures.invalid:
                return Hold(*failures.invalid, count, invalid=True)
            # The exponent is bounded: a set that fails for days must not overflow a float.
            backoff = min(self._first * 2 ** min(count - 1, 32), self._max)
            left = backoff - (self._clock() - failures.last)
            if left <= 0:
                return None
            return Hold(failures.last_name, failures.last_reason, count, backoff_s=backoff, delay_s=left)

    def news(self, set_key: str, hold: Hold) -> bool:
        """Whether `hold` is worth an event: the first time a hold after this many failures is reported."""
        with self._lock:
            failures = self._sets.get(set_key)
            if failures is None or failures.told >= hold.failures:
                return False
            failures.told = hold.failures
            return True

    def forget(self, set_key: str) -> None:
        with self._lock:
            self._sets.pop(set_key, None)
            self._chosen.pop(set_key, None)

    def _reset(self, set_key: str) -> None:
        with self._lock:
            failures = self._sets.get(set_key)
            if failures is not None and failures.invalid is None:  # only a new template fixes an invalid one
                del self._sets[set_key]

    def _current(self, set_key: str, current: str) -> _SetFailures | None:
        failures = self._sets.get(set_key)
        if failures is not None and failures.template != current:
            del self._sets[set_key]  # a new template gets a fresh start
            return None
        return failures


@dataclass(frozen=True)
class _Failure:
    reason: str
    error_reason: str = ""
    deleted: bool = False


def _failure(old: dict[str, Any] | None, new: dict[str, Any] | None) -> _Failure | None:
    """How this event shows a *new* Machine (one that never got a Node) failing: it is Failed, or someone deletes it
    (seen live: a Machine listed already deleting after a restart is not counted). A Machine that ran and fails
    later is the health check's ordinary business, no reason to wait with its replacement."""
    if _got_node(old) or _got_node(new):
        return None
    status = (new or {}).get("status") or {}
    if status.get("phase") == MachinePhase.FAILED:
        return _Failure(status.get("errorMessage") or status.get("errorReason") or "failed",
                        status.get("errorReason") or "")
    if old is None:
        return None
    # Gone without a finalizer, or marked for deletion; a Machine already marked was counted then.
    deleted = not _deleting(old) if new is None else _deleting(new) and not _deleting(old)
    return _Failure("deleted before it got a node", deleted=True) if deleted else None


def _got_node(machine: dict[str, Any] | None) -> bool:
    status = (machine or {}).get("status") or {}
    return bool((status.get("nodeRef") or {}).get("name")) or status.get("phase") == MachinePhase.RUNNING


def _deleting(machine: dict[str, Any]) -> bool:
    return bool((machine.get("metadata") or {}).get("deletionTimestamp"))
