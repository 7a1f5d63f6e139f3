"""What the oVirt actuator remembers between the passes of a Machine, in one place.

The engine and the Machine are the truth; this memory only spares requests and avoids judging a VM by a list of
the cluster's VMs older than our own last act on it (docs/architecture.md#from-a-machine-to-a-vm-and-back). A
restarted controller starts with none of it and loses nothing but requests: every step it guards is idempotent.

Per VM (by its engine id), each entry with why it exists and [when it is dropped]:
- acted at: a list must have started after our last change of the VM to judge it (a VM just started is not judged
  by a list taken before the start). [`forget`]
- looks in a state: the poll interval doubles while the VM stays in one state. [`provisioned`, `forget`]
- configured: consoles, NICs, tag and affinity groups are set once per VM in this process (vm_configuration.py).
  [`provisioned`, `forget`]
- OS disk ok: the OS disk was seen at its size and unlocked. [`provisioned`, `forget`]
- without an address since: a running VM seen without an address; the Machine's next status, once it has its
  Node, reads a list newer than that look. [an address seen, `forget`]

Per Machine (namespace/name):
- planned look: what a verb last said and when it looks again; a pass woken before then (by its own writes) is told
  the same, and the engine is not asked. [a step done or naming no VM, `unplan`, `provisioned`, `forget`]
- deleting since: a stop is decided on a list taken after the deletion began, never on an older one (a host lost
  just before leaves its VM `unknown` while an older list still says `up`). [`forget`]
- created: the VM created for it, until its cached copy records the id; a look at an older copy would create again
  (a 409, then an adoption). [the Machine records an id, `forget`]
- removed: the VM whose removal the engine accepted for it; its next look, even at a copy that records no id, waits
  for a list newer than the removal, and a VM absent from that list is gone without asking for it. [`forget`]
- its VMs: every VM an entry above was written for by this Machine's passes, so that `forget` drops them all,
  whichever id the Machine records. [`forget`]

`forget` is the end of a Machine's life in the actuator (its VM proven gone): everything of the Machine and of its
VMs goes. `provisioned` is the end of what provisioning needed once the VM runs; `unplan` makes the Machine's next
pass look at the engine. A VM's entries are written only by the passes of the Machine it is proven to be (it bears
the Machine's name, docs/architecture.md#acting-only-on-what-is-ours), so no other Machine needs them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable

from machine_controller.controllers.provider import Progress

# Looks are planned just after an instant shared by the Machines that wake together (the actuator's poll intervals):
# one this close has come.
ALIGN_SLACK_S = 0.01

_VERBS = ("provision", "delete")


class Tracker:
    def __init__(self, list_clock: Callable[[], float]):
        """`list_clock` is the clock of the cluster's VM lists: an act and a look are stamped with it, to be
        compared with when a list started. Planned looks are on the monotonic clock of the work queue's delays."""
        self._now = list_clock
        self._lock = threading.Lock()
        # per VM
        self._acted: dict[str, float] = {}
        self._looks: dict[str, tuple[str, int]] = {}
        self._configured: set[str] = set()
        self._os_disk_ok: set[str] = set()
        self._without_ip: dict[str, float] = {}
        # per Machine
        self._planned: dict[tuple[str, str], tuple[float, Progress]] = {}
        self._deleting_since: dict[str, float] = {}
        self._created: dict[str, str] = {}
        self._removed: dict[str, str] = {}
        self._vms_of: dict[str, set[str]] = {}

    # --- per VM ---------------------------------------------------------------------------------------------
    def acted_on(self, key: str, vm_id: str) -> None:
        """The Machine `key` changed its VM `vm_id` now."""
        with self._lock:
            self._acted[vm_id] = self._now()
            self._link_locked(key, vm_id)

    def acted_at(self, vm_id: str) -> float:
        """When we last changed the VM (0 when never, in this process)."""
        return self._acted.get(vm_id, 0.0)

    def looks_in_state(self, key: str, vm_id: str, state: str) -> int:
        """How many looks in a row before this one found the VM in `state`; this look is counted."""
        with self._lock:
            prev = self._looks.get(vm_id)
            n = prev[1] + 1 if prev and prev[0] == state else 0
            self._looks[vm_id] = (state, n)
            self._link_locked(key, vm_id)
        return n

    def configured(self, vm_id: str) -> bool:
        return vm_id in self._configured

    def mark_configured(self, key: str, vm_id: str) -> None:
        with self._lock:
            self._configured.add(vm_id)
            self._link_locked(key, vm_id)

    def os_disk_ok(self, vm_id: str) -> bool:
        return vm_id in self._os_disk_ok

    def mark_os_disk_ok(self, key: str, vm_id: str) -> None:
        with self._lock:
            self._os_disk_ok.add(vm_id)
            self._link_locked(key, vm_id)

    def seen_without_ip(self, key: str, vm_id: str) -> None:
        with self._lock:
            self._without_ip[vm_id] = self._now()
            self._link_locked(key, vm_id)

    def seen_with_ip(self, vm_id: str) -> None:
        with self._lock:
            self._without_ip.pop(vm_id, None)

    def without_ip_since(self, vm_id: str) -> float | None:
        return self._without_ip.get(vm_id)

    # --- per Machine ----------------------------------------------------------------------------------------
    def vm_id_for(self, key: str, recorded: str | None) -> str | None:
        """The Machine's VM id: the one it records, else the one created for it or whose removal was accepted for
        it, which its cached copy may not show yet. Once it records one, the created one is no longer needed."""
        with self._lock:
            if recorded:
                self._created.pop(key, None)
                return recorded
            return self._created.get(key) or self._removed.get(key)

    def created(self, key: str, vm_id: str) -> None:
        with self._lock:
            self._created[key] = vm_id
            self._link_locked(key, vm_id)

    def removal_accepted(self, key: str, vm_id: str) -> None:
        with self._lock:
            self._removed[key] = vm_id
            self._link_locked(key, vm_id)

    def removed(self, key: str, vm_id: str) -> bool:
        """Whether the engine accepted the removal of the VM `vm_id` for the Machine `key`."""
        return self._removed.get(key) == vm_id

    def deletion_began(self, key: str) -> float:
        """When the Machine's deletion was first looked at (now, the first time)."""
        with self._lock:
            return self._deleting_since.setdefault(key, self._now())

    def deleting_since(self, key: str) -> float:
        return self._deleting_since.get(key, 0.0)

    def plan(self, verb: str, key: str, progress: Progress) -> Progress:
        """Remember what `verb` told the Machine and when it looks again; returns `progress`."""
        with self._lock:
            if progress.instance_id and not progress.done:
                self._planned[(verb, key)] = (time.monotonic() + progress.requeue_after, progress)
            else:
                self._planned.pop((verb, key), None)
        return progress

    def early(self, verb: str, key: str, vm_id: str | None) -> Progress | None:
        """What `verb` said to the Machine `key` at its last look, with the time left until the next one, when it
        comes back before it (its own writes wake it) still naming the same VM: nothing in the engine is awaited
        sooner, so nothing is asked. A Machine is never answered with what another was told."""
        with self._lock:
            planned = self._planned.get((verb, key))
        if planned is None or planned[1].instance_id != vm_id:
            return None
        left = planned[0] - time.monotonic()
        if left <= ALIGN_SLACK_S:
            return None
        # The problem, if any, was reported at that look; saying it again would repeat its event.
        return replace(planned[1], requeue_after=left, problem=None)

    def unplan(self, key: str) -> None:
        """The Machine `key` is to look at the engine at its next pass, whenever that comes."""
        with self._lock:
            self._unplan_locked(key)

    # --- ends -----------------------------------------------------------------------------------------------
    def provisioned(self, key: str, vm_id: str) -> None:
        """The Machine's VM runs: what only provisioning needed goes. When it was changed stays (its status is
        judged by lists newer than the start), and so does whether it was seen without an address."""
        with self._lock:
            self._looks.pop(vm_id, None)
            self._unplan_locked(key)
            self._os_disk_ok.discard(vm_id)
            self._configured.discard(vm_id)

    def forget(self, key: str) -> None:
        """The Machine `key`'s VM is proven gone: everything remembered of the Machine and of its VMs goes."""
        with self._lock:
            self._unplan_locked(key)
            self._deleting_since.pop(key, None)
            self._created.pop(key, None)
            self._removed.pop(key, None)
            for vm_id in self._vms_of.pop(key, ()):
                self._acted.pop(vm_id, None)
                self._looks.pop(vm_id, None)
                self._configured.discard(vm_id)
                self._os_disk_ok.discard(vm_id)
                self._without_ip.pop(vm_id, None)

    def kept(self) -> dict[str, set[str]]:
        """What is remembered, by entry: the VM ids or Machine keys (for tests and debugging)."""
        with self._lock:
            return {"acted": set(self._acted), "looks": set(self._looks), "configured": set(self._configured),
                    "os_disk_ok": set(self._os_disk_ok), "without_ip": set(self._without_ip),
                    "planned": {key for _, key in self._planned}, "deleting_since": set(self._deleting_since),
                    "created": set(self._created), "removed": set(self._removed), "vms_of": set(self._vms_of)}

    def _link_locked(self, key: str, vm_id: str) -> None:
        vms = self._vms_of.get(key)
        if vms is None:
            self._vms_of[key] = {vm_id}
        elif vm_id not in vms:
            vms.add(vm_id)

    def _unplan_locked(self, key: str) -> None:
        for verb in _VERBS:
            self._planned.pop((verb, key), None)
