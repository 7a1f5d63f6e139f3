"""One list of a cluster's VMs serves every Machine of that cluster that is waiting on its VM.

A Machine being created is looked at again and again until its VM's disks are copied, it boots and its guest
reports an address. Asking for each VM on its own costs the engine one request per Machine per look; one list of
the cluster's VMs, with their reported devices inlined (`follow`), answers all of them at once. A look uses the
newest list when it is recent enough and was started after the caller's own last action on the VM (so a VM just
started is never judged by a list taken before the start); otherwise it takes a new list, and callers arriving
meanwhile wait for it and share it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import ovirtsdk4.types as types

from .client import OvirtClient


@dataclass
class _Snapshot:
    started: float
    by_id: dict[str, types.Vm] = field(default_factory=dict)
    by_name: dict[str, list[types.Vm]] = field(default_factory=dict)


class VmSnapshots:
    def __init__(self, client: OvirtClient, max_age_s: float = 0.5, clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._max_age = max_age_s
        self._clock = clock
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._snaps: dict[str, _Snapshot] = {}

    def by_id(self, cluster_name: str, vm_id: str, fresh_after: float = 0.0) -> types.Vm | None:
        """The VM as the engine lists it now, or None when the cluster has no VM of that id."""
        return self._snapshot(cluster_name, fresh_after).by_id.get(vm_id)

    def by_name(self, cluster_name: str, name: str, fresh_after: float = 0.0) -> list[types.Vm]:
        return self._snapshot(cluster_name, fresh_after).by_name.get(name, [])

    def now(self) -> float:
        return self._clock()

    def _snapshot(self, cluster_name: str, fresh_after: float) -> _Snapshot:
        with self._guard:
            lock = self._locks.setdefault(cluster_name, threading.Lock())
        with lock:
            snap = self._snaps.get(cluster_name)
            now = self._clock()
            if snap is not None and snap.started >= fresh_after and now - snap.started <= self._max_age:
                return snap
            started = self._clock()
            vms = self._client.cluster_vms(cluster_name)
            snap = _Snapshot(started)
            for vm in vms:
                snap.by_id[vm.id] = vm
                snap.by_name.setdefault(vm.name, []).append(vm)
            self._snaps[cluster_name] = snap
            return snap
