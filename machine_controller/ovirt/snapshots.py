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
its time listing for us however many Machines wait. With 1 (half its time) a thousand Machines were all Running in
67 s instead of 55 s on this project's two-core machine (hack/bench/machines.py, wake on list included): the
lists cost the simulator and this process CPU that the API server was short of, and a step waited a little longer
but every step of every Machine went faster. A caller whose last action is newer than the recent list and that can
wait (`NotYet`) is told when the next list may be taken; the callers told so come back together and share it.

A caller that can wait for the list being taken, and names itself (`waiter`), is not told a time to come back:
it is woken when that list has come (or failed), by the callback given to `wake_with` (the Machine controller's
work queue), and told to come back only after `WAKE_FALLBACK_S` in case the wake is lost. Told a time, it came
back when the list should have come, and again while it ran late: at a thousand Machines being deleted that was
two dozen passes per Machine, most of them to be told to wait (hack/bench/machines.py).

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

from .client import OvirtClient
from .listed_vms import ListedVm, read_vms


# How long a caller woken by the list it waits for is told to wait, in case the wake is lost: a list of a thousand
# VMs takes well under a second on this project's simulator, and an engine's seconds.
WAKE_FALLBACK_S = 10.0


class NotYet(Exception):
    """The newest list predates the caller's last action, and the next one may only be taken in `after_s`; with
    `woken`, the caller will be woken when the list being taken comes, and `after_s` is only a fallback."""

    def __init__(self, after_s: float, woken: bool = False):
        super().__init__(f"the {'list being taken (woken when it comes)' if woken else 'next list'} of VMs"
                         f" in {after_s:.2f} s")
        self.after_s = after_s
        self.woken = woken


@dataclass
class _Snapshot:
    started: float
    cost: float = 0.0  # seconds the list took: it came at `started + cost`
    by_id: dict[str, ListedVm] = field(default_factory=dict)
    by_name: dict[str, list[ListedVm]] = field(default_factory=dict)


class VmSnapshots:
    def __init__(self, client: OvirtClient, max_age_s: float = 0.5, cost_factor: float = 3.0,
                 clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._max_age = max_age_s
        self._cost_factor = cost_factor
        self._clock = clock
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._snaps: dict[str, _Snapshot] = {}
        self._listing: dict[str, float] = {}  # cluster -> when the list being taken was asked for
        self._waiters: dict[str, set[str]] = {}  # cluster -> callers woken when the list being taken comes
        self._wake: Callable[[Iterable[str]], None] | None = None

    def wake_with(self, wake: Callable[[Iterable[str]], None]) -> None:
        """`wake(waiters)` is called, from the thread that took a list, with the callers waiting for it."""
        self._wake = wake

    def by_id(self, cluster_name: str, vm_id: str, fresh_after: float = 0.0, may_defer: bool = False,
              waiter: str | None = None) -> ListedVm | None:
        """The VM as the engine lists it now, or None when the cluster has no VM of that id. With `may_defer`, a
        caller that acted after the recent list raises NotYet instead of taking a list before its time; with
        `waiter` too, it is woken by name when the list being taken will do for it."""
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

    def _snapshot(self, cluster_name: str, fresh_after: float, may_defer: bool, waiter: str | None) -> _Snapshot:
        with self._guard:
            lock = self._locks.setdefault(cluster_name, threading.Lock())
        # The list that came is read without the lock: while one caller takes a list, another may be served by
        # the one before it.
        snap = self._usable(cluster_name, fresh_after, may_defer, waiter)
        if snap is not None:
            return snap
        # A caller that can wait is not held while a list is taken (a list of a thousand VMs takes seconds, and
        # every worker of the controller would be held with it): it is woken when the list comes, or comes back
        # when it should have come, and finds it. Callers that cannot wait share the list being taken.
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
        """A new list of the cluster (under its lock); whoever waited for it is woken, also when it failed (they
        take the next one, and meet the failure themselves)."""
        started = self._clock()
        with self._guard:
            self._listing[cluster_name] = started
        try:
            vms = self._client.cluster_vms(cluster_name, read_vms)
            snap = _Snapshot(started, cost=self._clock() - started)
            for vm in vms:
                snap.by_id[vm.id] = vm
                snap.by_name.setdefault(vm.name, []).append(vm)
            self._snaps[cluster_name] = snap
            return snap
        finally:
            with self._guard:  # with `_defer`'s check: a caller is either woken or sees no list being taken
                self._listing.pop(cluster_name, None)
                waiters = self._waiters.pop(cluster_name, set())
            if waiters and self._wake is not None:
                self._wake(sorted(waiters))

    def _defer(self, cluster_name: str, fresh_after: float, waiter: str | None) -> NotYet:
        """What a caller that can wait is told while a list is taken: woken when it comes, when it will do for
        the caller (it started after the caller's last action) and the caller can be woken by name; else when to
        come back (`_wait_for`)."""
        with self._guard:
            since = self._listing.get(cluster_name)
            if since is not None and since >= fresh_after and waiter is not None and self._wake is not None:
                self._waiters.setdefault(cluster_name, set()).add(waiter)
                return NotYet(WAKE_FALLBACK_S, woken=True)
        return NotYet(self._wait_for(cluster_name, fresh_after))

    def _usable(self, cluster_name: str, fresh_after: float, may_defer: bool, waiter: str | None) -> _Snapshot | None:
        """The newest list when it is recent and newer than `fresh_after`; None when a new one must be taken. A
        caller that can wait for a newer list than the recent one is told when (NotYet)."""
        snap = self._snaps.get(cluster_name)
        if snap is None:
            return None
        now = self._clock()
        recent_until = snap.started + snap.cost + max(self._max_age, self._cost_factor * snap.cost)
        if now > recent_until:
            return None
        if snap.started >= fresh_after:
            return snap
        if may_defer:
            if self._listing.get(cluster_name) is not None:
                raise self._defer(cluster_name, fresh_after, waiter)
            raise NotYet(recent_until - now)
        return None

    def _wait_for(self, cluster_name: str, fresh_after: float) -> float:
        """Seconds until a caller that needs a list started after `fresh_after` should come back, while one is
        being taken (at least a moment): when that list should come (as long as the last one took) if it started
        after `fresh_after`; else when the list after it may be taken, once the one being taken has been recent
        for its time. Coming back when the older list comes would only find it too old, and be told to wait again:
        at a thousand Machines most of the controller's passes were such (hack/bench/machines.py)."""
        since = self._listing.get(cluster_name)
        if since is None:
            return self._max_age / 5
        last = self._snaps.get(cluster_name)
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

