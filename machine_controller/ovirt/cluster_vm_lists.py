"""One list of a cluster's VMs serves every Machine of that cluster that is waiting on its VM.

A Machine being created is looked at again and again until its VM's disks are copied, it boots and its guest
reports an address. Asking for each VM on its own costs the engine one request per Machine per look; one list of
the cluster's VMs, with their reported devices inlined (`follow`), answers all of them at once. A look uses the
newest list when it is recent enough and was started after the caller's own last action on the VM (so a VM just
started is never judged by a list taken before the start); otherwise it takes a new list. Callers arriving meanwhile
share it: those that cannot wait (a status read) wait for it, those that can (`NotYet`) are told to come back
when it should have come, so no worker of the controller is held for the seconds a long list takes.

A list grows with the cluster: a thousand VMs cost the engine (and this process) a good part of a second to render
and parse, more under load. So a list counts as recent, after it came, for `cost_factor` times what it took (at
least `max_age_s`, which is what a small cluster sees): with the default 3 the engine spends at most a quarter of
its time listing for us however many Machines wait. A smaller factor brings a waiting step's list sooner but not
its Machine: the extra lists cost the engine and this process CPU that every other step needs, so Machines come up
slower overall (docs/benchmarks.md#figures-behind-the-codes-choices). A caller whose last action is newer than
the recent list and that can wait (`NotYet`) is told when the next list may be taken; the callers told so come
back together and share it.

A caller that can wait and names itself (`waiter`) is never told a time to come back: it is woken, by the callback
given to `wake_with` (the Machine controller's work queue), when a list that will do for it has come, and told to
come back only after `WAKE_FALLBACK_S` more in case the wake is lost. A caller that knows when it will next need a
list (a VM just started is first looked at after its poll interval, actuator.py) asks to be woken by the first
list started after its action that comes after that moment (`wake_by_list`), and is not looked at in between. The
lists those waiters need are taken by a lister thread of this object as soon as the earliest of them is due and the
recent list's time is over, and each list wakes every waiter it does for, whoever took it. A Machine that came back
at its poll instead would find the recent list older than its action, ask to be woken, and be woken: two passes for
each step. Told a time, it would come back when the list should have come, and again while the list runs late.

A Machine about to create its VM looks for it by name first. Any list, however old, may tell it that no such VM
exists: the engine refuses a second VM of the same name, so a stale "absent" costs one refused create and the
adoption of the VM found then (actuator.py `_create`), never a duplicate. Only a VM found there must come from a
recent list. At a thousand Machines this spares one list per creation.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import structlog

from .client import OvirtClient
from .vm_list_reader import ListedVm, VmListReader

# How long after its list should have come a caller woken by it is told to look anyway, in case the wake is lost: a
# list of a thousand VMs takes well under a second on this project's simulator, and an engine's seconds.
WAKE_FALLBACK_S = 10.0
# The longest the lister sleeps before it looks at the time again (a clock other than the wall's, in tests).
_LISTER_NAP_S = 1.0
# How long a caller woken by a list is remembered as such (it comes back well before, or it is gone).
_WOKEN_KEPT_S = 60.0

log = structlog.get_logger(__name__)


class NotYet(Exception):
    """The newest list predates the caller's last action, and the next one may only be taken in `after_s`; with
    `woken`, the caller will be woken when a list that does for it comes, and `after_s` is only a fallback."""

    def __init__(self, after_s: float, woken: bool = False):
        super().__init__(f"the next list of VMs {'(woken when it comes) ' if woken else ''}in {after_s:.2f} s")
        self.after_s = after_s
        self.woken = woken


@dataclass(frozen=True, slots=True)
class _Wish:
    fresh_after: float
    not_before: float

    def done_by(self, started: float, came: float) -> bool:
        """Whether a list started at `started` that came at `came` does for this wish."""
        return self.fresh_after <= started and self.not_before <= came


@dataclass
class _Snapshot:
    started: float
    cost: float = 0.0  # seconds the list took
    by_id: dict[str, ListedVm] = field(default_factory=dict)
    by_name: dict[str, list[ListedVm]] = field(default_factory=dict)

    @property
    def came(self) -> float:
        return self.started + self.cost


class ClusterVmLists:
    def __init__(self, client: OvirtClient, max_age_s: float = 0.5, cost_factor: float = 3.0,
                 clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._max_age = max_age_s
        self._cost_factor = cost_factor
        self._clock = clock
        self._guard = threading.Lock()
        self._due = threading.Condition(self._guard)  # the lister sleeps on it until a waiter is due
        self._locks: dict[str, threading.Lock] = {}
        self._snaps: dict[str, _Snapshot] = {}
        self._listing: dict[str, float] = {}  # cluster -> when the list being taken was asked for
        # cluster -> caller -> (the moment its list must have started at or after, the moment before which it does
        # not want to look again): it is woken by the first list that started after the first and came after the
        # second, whoever took it (a status read's list that came just after a waiter's moment wakes it, instead
        # of making it wait for that list's recent time to be over before the lister may take another).
        self._waiters: dict[str, dict[str, _Wish]] = {}
        # (cluster, caller) -> when the list that woke it started: its next look is served by that list (or a newer
        # one) even when its recent time is over, as long as it came at most WAKE_FALLBACK_S ago. A list wakes
        # hundreds of Machines at a thousand, the last of them seconds later through the work queue; judged by the
        # recent time, they would find the list too old, ask to be woken again and come back for the next list:
        # three passes per Machine created instead of one.
        self._woken: dict[tuple[str, str], float] = {}
        self._wake: Callable[[Iterable[str]], None] | None = None
        self._lister: threading.Thread | None = None
        # When the lister, asleep, will look again by itself (None while it is not asleep: it looks at every waiter
        # before it sleeps). A new waiter wakes it only when due before that: woken at every registration, it went
        # through all the waiters each time, a thousand of them while a thousand Machines were created.
        self._lister_looks_at: float | None = None

    def wake_with(self, wake: Callable[[Iterable[str]], None]) -> None:
        """`wake(waiters)` is called, from the thread that took a list, with the callers it does for."""
        self._wake = wake

    def wake_by_list(self, cluster_name: str, waiter: str, fresh_after: float, not_before: float) -> float | None:
        """`waiter` is to be woken by the first list of the cluster started after `fresh_after` (its last action) that
        came at or after `not_before` (when it wants to look again), on this object's clock: the lister takes one
        when `not_before` has come and the recent list's time is over. Returns the seconds after which the caller
        should look anyway, in case the wake is lost; None when callers are not woken (no `wake_with`), and it comes
        back in its own time."""
        with self._guard:
            if self._wake is None:
                return None
            return self._await_locked(cluster_name, waiter, _Wish(fresh_after, not_before))

    def by_id(self, cluster_name: str, vm_id: str, fresh_after: float = 0.0, may_defer: bool = False,
              waiter: str | None = None) -> ListedVm | None:
        """The VM as the engine lists it now, or None when the cluster has no VM of that id. With `may_defer`, a
        caller that acted after the recent list raises NotYet instead of taking a list before its time; with
        `waiter` too, it is woken by name when a list that does for it has come."""
        return self._snapshot(cluster_name, fresh_after, may_defer, waiter).by_id.get(vm_id)

    def by_name(self, cluster_name: str, name: str, fresh_after: float = 0.0,
                absent_may_be_stale: bool = False) -> list[ListedVm]:
        """The VMs of that exact name. With `absent_may_be_stale` (a look before creating), the newest list of the
        cluster answers "none" whatever its age; a VM found always comes from a recent list."""
        if absent_may_be_stale:
            with self._guard:
                newest = self._snaps.get(cluster_name)
            if newest is not None and name not in newest.by_name:
                return []
        return self._snapshot(cluster_name, fresh_after, False, None).by_name.get(name, [])

    def seen(self, vm_id: str | None = None, name: str | None = None, within_s: float = 15.0) -> list[ListedVm]:
        """The VMs of that id or exact name in a list of any cluster taken in the last `within_s`, without asking
        the engine: proof that a VM exists and what its id is, never that one is missing."""
        now = self._clock()
        with self._guard:
            snaps = [s for s in self._snaps.values() if now - s.started <= within_s]
        found: list[ListedVm] = []
        for snap in snaps:
            if vm_id is not None and vm_id in snap.by_id:
                found.append(snap.by_id[vm_id])
            if name is not None:
                found.extend(snap.by_name.get(name, []))
        return found

    def now(self) -> float:
        return self._clock()

    def _lock_of(self, cluster_name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(cluster_name, threading.Lock())

    def _snapshot(self, cluster_name: str, fresh_after: float, may_defer: bool, waiter: str | None) -> _Snapshot:
        lock = self._lock_of(cluster_name)
        # The list that came is read without the lock: while one caller takes a list, another may be served by
        # the one before it.
        snap = self._usable(cluster_name, fresh_after, may_defer, waiter)
        if snap is not None:
            return snap
        # A caller that can wait is not held while a list is taken (a list of a thousand VMs takes seconds, and
        # every worker of the controller would be held with it): it is woken when a list that does for it comes, or
        # comes back when it should have come, and finds it. Callers that cannot wait share the list being taken.
        if not (may_defer and lock.acquire(blocking=False)):
            if may_defer:
                raise self._defer(cluster_name, fresh_after, waiter)
            lock.acquire()
        try:
            snap = self._usable(cluster_name, fresh_after, may_defer, waiter)  # one may have come while we waited
            if snap is not None:
                return snap
            return self._take(cluster_name)
        finally:
            lock.release()

    def _take(self, cluster_name: str) -> _Snapshot:
        """A new list of the cluster (under its lock); the waiters it does for are woken, also when it failed (they
        take the next one, and meet the failure themselves)."""
        started = self._clock()
        with self._guard:
            self._listing[cluster_name] = started
        woken: list[str] = []
        try:
            vms = self._client.cluster_vms(cluster_name, VmListReader)
            snap = _Snapshot(started, cost=self._clock() - started)
            for vm in vms:
                # The engine lists every VM with its id and name; one without could not be asked for by either.
                if vm.id is not None:
                    snap.by_id[vm.id] = vm
                if vm.name is not None:
                    snap.by_name.setdefault(vm.name, []).append(vm)
            self._snaps[cluster_name] = snap
            return snap
        finally:
            with self._guard:  # with `_defer`'s registration: a caller is either woken or waits for a later list
                self._listing.pop(cluster_name, None)
                woken = self._done_for_locked(cluster_name, started, self._clock())
                self._due.notify()
            if woken and self._wake is not None:
                self._wake(woken)
            log.debug("listed the cluster's VMs", cluster=cluster_name, took_s=round(self._clock() - started, 3),
                      woken=len(woken))

    def _defer(self, cluster_name: str, fresh_after: float, waiter: str | None) -> NotYet:
        """What a caller that can wait is told when the recent list predates its last action: woken by the first
        list started after that action, when it can be woken by name; else when to come back (`_wait_for`)."""
        with self._guard:
            if waiter is not None and self._wake is not None:
                return NotYet(self._await_locked(cluster_name, waiter, _Wish(fresh_after, fresh_after)), woken=True)
            return NotYet(self._wait_for(cluster_name, fresh_after))

    def _await_locked(self, cluster_name: str, waiter: str, wish: _Wish) -> float:
        """`waiter` waits for a list that does for `wish` (its latest wish replaces any earlier one); the lister is
        started or told. Returns the fallback: when the list should have come, and `WAKE_FALLBACK_S` more."""
        self._waiters.setdefault(cluster_name, {})[waiter] = wish
        snap = self._snaps.get(cluster_name)
        if self._lister is None:
            self._lister = threading.Thread(target=self._list_when_due, name="vm-lister", daemon=True)
            self._lister.start()
        elif self._lister_looks_at is not None and (
                self._wish_due_at_locked(snap, wish, self._clock()) < self._lister_looks_at
                or self._lister_looks_at <= self._clock()):
            self._due.notify()
        comes = max(wish.not_before, self._recent_until(snap)) + (snap.cost if snap else self._max_age)
        return max(comes - self._clock(), 0.0) + WAKE_FALLBACK_S

    def _done_for_locked(self, cluster_name: str, started: float, came: float) -> list[str]:
        """The waiters a list started at `started` that came at `came` does for, no longer waiting."""
        waiting = self._waiters.get(cluster_name)
        if not waiting:
            return []
        done = sorted(w for w, wish in waiting.items() if wish.done_by(started, came))
        for w in done:
            del waiting[w]
        if not waiting:
            del self._waiters[cluster_name]
        if done:
            # Those woken and never come (a Machine deleted meanwhile) are forgotten once no list could serve them.
            for key in [k for k, at in self._woken.items() if at < started - _WOKEN_KEPT_S]:
                del self._woken[key]
            self._woken.update(((cluster_name, w), started) for w in done)
        return done

    def _wish_due_at_locked(self, snap: _Snapshot | None, wish: _Wish, now: float) -> float:
        """When a list for this one wish is due (`_due_at_locked` for a cluster whose only waiter it is)."""
        if snap is not None and now <= self._recent_until(snap) and wish.done_by(snap.started, snap.came):
            return float("-inf")
        return max(wish.not_before, self._recent_until(snap))

    def _recent_until(self, snap: _Snapshot | None) -> float:
        if snap is None:
            return float("-inf")
        return snap.came + max(self._max_age, self._cost_factor * snap.cost)

    def _list_when_due(self) -> None:
        """The lister thread: a cluster's list is taken once its earliest waiter is due and its recent list's time
        is over (as a caller that could wait would have been told to come back then); the thread ends when no one
        waits, and the next waiter starts another."""
        while True:
            with self._guard:
                if not self._waiters:
                    self._lister = None
                    return
                cluster, at = self._next_due_locked()
                sleep = _LISTER_NAP_S if cluster is None else at - self._clock()
                if sleep > 0:
                    nap = min(sleep, _LISTER_NAP_S)
                    self._lister_looks_at = self._clock() + nap
                    try:
                        self._due.wait(nap)
                    finally:
                        self._lister_looks_at = None
                    continue
            assert cluster is not None
            self._list_for(cluster)

    def _next_due_locked(self) -> tuple[str | None, float]:
        """The cluster whose list is due first, and when; None while every cluster waited on is being listed (that
        list wakes whom it does for, and the lister then looks again)."""
        best: tuple[str | None, float] = (None, float("inf"))
        for cluster in self._waiters:
            if cluster in self._listing:
                continue
            at = self._due_at_locked(cluster)
            if at < best[1]:
                best = (cluster, at)
        return best

    def _due_at_locked(self, cluster_name: str) -> float:
        """When the cluster's next list is due for its earliest waiter: once that waiter's moment has come and the
        recent list's time is over; at once (-inf) when the recent list does for someone (it came while they
        asked); never (inf) when no one waits."""
        waiting = self._waiters.get(cluster_name)
        snap, now = self._snaps.get(cluster_name), self._clock()
        return min((self._wish_due_at_locked(snap, w, now) for w in (waiting or {}).values()), default=float("inf"))

    def _list_for(self, cluster_name: str) -> None:
        with self._lock_of(cluster_name):  # a caller may be taking one: it is waited for, and may do
            with self._guard:
                snap = self._snaps.get(cluster_name)
                done = self._done_for_locked(cluster_name, snap.started, snap.came) \
                    if snap is not None and self._clock() <= self._recent_until(snap) else []
                due = self._due_at_locked(cluster_name) <= self._clock()
            if done and self._wake is not None:
                self._wake(done)
            if not due:
                return
            try:
                self._take(cluster_name)
            except Exception as e:  # noqa: BLE001 - its waiters were woken, and meet the failure in their passes
                log.info("the VM list for the waiting Machines failed; they take the next one", cluster=cluster_name,
                         error=str(e)[:300])

    def _usable(self, cluster_name: str, fresh_after: float, may_defer: bool, waiter: str | None) -> _Snapshot | None:
        """The newest list when it is recent and newer than `fresh_after`; None when a new one must be taken. A
        caller that can wait for a newer list than the recent one is woken by it or told when (NotYet). Asking spends
        the waiter's wake (`_serves_the_woken`): a woken Machine is served past the recent time once."""
        snap = self._snaps.get(cluster_name)
        if snap is None:
            return None
        now = self._clock()
        if now > self._recent_until(snap) and not self._serves_the_woken(cluster_name, waiter, snap, now):
            return None
        if snap.started >= fresh_after:
            return snap
        if may_defer:
            raise self._defer(cluster_name, fresh_after, waiter)
        return None

    def _serves_the_woken(self, cluster_name: str, waiter: str | None, snap: _Snapshot, now: float) -> bool:
        """Whether `waiter` was woken by `snap` (or an older list) and this is its first look since, within
        WAKE_FALLBACK_S of the list's coming. The mark is removed by asking, whatever the answer."""
        if waiter is None:
            return False
        with self._guard:
            woken_by = self._woken.pop((cluster_name, waiter), None)
        return woken_by is not None and snap.started >= woken_by and now <= snap.came + WAKE_FALLBACK_S

    def _wait_for(self, cluster_name: str, fresh_after: float) -> float:
        """Seconds until a caller that needs a list started after `fresh_after` and cannot be woken should come
        back (at least a moment). While one is being taken: when that list should come (as long as the last one
        took) if it started after `fresh_after`; else when the list after it may be taken, once the one being taken
        has been recent for its time. Coming back when the older list comes would only find it too old, and be told
        to wait again: at a thousand Machines most of the controller's passes were such (hack/bench/machines.py)."""
        since = self._listing.get(cluster_name)
        last = self._snaps.get(cluster_name)
        if since is None:  # none is being taken: the next may be once the recent one's time is over
            return max(self._recent_until(last) - self._clock(), self._max_age / 5)
        cost = last.cost if last is not None else self._max_age
        now = self._clock()
        if since + cost <= now:
            # Late: a list grows with the cluster, and while Machines are created each is longer than the one
            # before. Asked again every moment, the waiters would cost the controller a pass each time; a quarter of
            # what it has taken so far is at most a quarter more wait, and few passes.
            cost = (now - since) * 1.25
        comes = since + cost
        if since < fresh_after:
            comes += max(self._max_age, self._cost_factor * cost)
        return max(comes - now, self._max_age / 5)

