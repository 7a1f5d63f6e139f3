"""Real guests: chosen VMs boot as real Kubernetes nodes instead of simulated ones: those of
chosen templates, and those whose names match chosen patterns (a test's Machines, among the simulated guests).

When such a VM's guest comes up (the moment a simulated guest's kubelet would register its Node), a real kubelet
and containerd (hack/controlplane/nodes.py) start as the Node named after the VM's host name, joined to the local
control plane. When the guest stops running (power-off, shutdown, crash, a host going down, removal) that node
stops with all its containers, as a machine that loses power takes its kubelet with it; the Node then goes
NotReady by the node lifecycle controller, not by the simulator. While the engine has lost the VM's host (the VM
`unknown`), the guest runs on, cut off: its kubelet is frozen, its containers keep running and keep their disks,
so its Node goes Unknown as a partitioned machine's does; when the host answers again, the kubelet goes on. Other
VMs stay simulated, for scale.

The disks attached to a real guest are real block devices on its node: `hack/csi_host.py`'s LoopDisks gives each
a loop device with the `/dev/disk/by-id` link the guest's udev would make, in the node's `by_id` directory (in
`GET /real-guests`), which the node sees as its `/dev/disk/by-id`; it sees the VM id as its SMBIOS UUID too
(hack/controlplane/guest_view.py), so a CSI node plugin deployed as on oVirt finds both. Their backing files
outlive a power-off, as a disk's data does.

Starting a node takes a few seconds, so one worker thread converges the nodes on what the guests want, outside
the simulator's Node pass. Enabled at run time through the control API (`POST /real-guests`).
"""

from __future__ import annotations

import fnmatch
import logging
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

BlockDevices = Callable[[str], list[dict[str, Any]]]  # vm id -> its block devices, as GET /vms/{id} shows them

log = logging.getLogger(__name__)
RETRY_S = 10.0  # a node that failed to start is tried again after this long, while its guest runs


class _GuestDisks:
    """What LoopDisks asks the control API for, answered from the engine's store in this process."""

    def __init__(self, block_devices: BlockDevices) -> None:
        self._block_devices = block_devices

    def vm(self, vm_id: str) -> dict[str, Any]:
        return {"block_devices": self._block_devices(vm_id)}


class RealGuests:
    def __init__(self, block_devices: BlockDevices) -> None:
        self._disks_source = _GuestDisks(block_devices)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._plane_dir: Path | None = None
        self._images: tuple[Path, ...] = ()
        self.templates: frozenset[str] = frozenset()  # template ids whose VMs are real guests
        self.vm_patterns: tuple[str, ...] = ()  # and the VMs whose names match one of these (fnmatch)
        self._named: re.Pattern[str] | None = None  # vm_patterns as one expression, asked of every guest at each pass
        self._wanted: dict[str, str] = {}  # vm id -> Node name, for every real guest that runs
        self._cut_off: frozenset[str] = frozenset()  # the wanted guests whose host the engine has lost
        self._frozen: set[str] = set()  # vm ids whose node's kubelet is frozen now
        self._nodes: dict[str, Any] = {}  # vm id -> RealNode that runs
        self._disks: dict[str, Any] = {}  # vm id -> the LoopDisks of its running node
        self.errors: dict[str, str] = {}  # vm id -> why its node did not start
        self._retry_at: dict[str, float] = {}  # vm id -> when to try a failed start again
        self._thread: threading.Thread | None = None

    def configure(self, plane_dir: Path, images: tuple[Path, ...], template_ids: frozenset[str],
                  vm_patterns: tuple[str, ...] = ()) -> None:
        """Guests of `template_ids`, and of VMs named like one of `vm_patterns`, are real from now on, joined to the
        plane in `plane_dir`, with `images` (docker archives, the pause image among them) in their containerd."""
        if not (plane_dir / "state.json").exists():
            raise ValueError(f"no local control plane runs in {plane_dir}")
        for image in images:
            if not image.is_file():
                raise ValueError(f"image archive {image} does not exist")
        with self._lock:
            self._plane_dir, self._images = plane_dir, images
            self.templates, self.vm_patterns = template_ids, vm_patterns
            self._named = re.compile("|".join(fnmatch.translate(p) for p in vm_patterns)) if vm_patterns else None
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="real-guests", daemon=True)
                self._thread.start()

    def claims(self, template_id: str | None, vm_name: str) -> bool:
        """Whether this guest is real (its Node is the real kubelet's to write)."""
        return template_id in self.templates or (self._named is not None and self._named.match(vm_name) is not None)

    def want(self, running: dict[str, str], cut_off: frozenset[str] = frozenset()) -> None:
        """The real guests that run now (vm id -> Node name), and those of them that are cut off; every other real
        node is stopped."""
        with self._lock:
            if running == self._wanted and cut_off == self._cut_off:
                return
            self._wanted, self._cut_off = dict(running), frozenset(cut_off)
        self._wake.set()

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"templates": sorted(self.templates), "vms": list(self.vm_patterns),
                    "nodes": {vm: node.name for vm, node in self._nodes.items()},
                    "cut_off": sorted(self._frozen),
                    "by_id": {vm: str(disks.by_id_dir) for vm, disks in self._disks.items()},
                    "errors": dict(self.errors)}

    def _disks_root(self) -> Path:
        assert self._plane_dir
        return self._plane_dir.parent / f"{self._plane_dir.name}-guest-disks"

    def stop(self) -> None:
        """Stop every real node (the simulator is shutting down)."""
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=120)
        for vm_id in list(self._nodes):
            self._stop_node(vm_id)
        if self._plane_dir:
            shutil.rmtree(self._disks_root(), ignore_errors=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            try:
                self._converge()
            except Exception:
                log.exception("real guests")

    def _converge(self) -> None:
        from hack.controlplane.cluster import LocalControlPlane
        from hack.controlplane.guest_view import GuestView
        from hack.controlplane.nodes import RealNode
        from hack.csi_host import LoopDisks

        with self._lock:
            wanted, cut_off, plane_dir, images = dict(self._wanted), self._cut_off, self._plane_dir, self._images
        for vm_id in [v for v, node in self._nodes.items() if wanted.get(v) != node.name]:
            log.info("guest %s stopped: stopping its node %s", vm_id, self._nodes[vm_id].name)
            self._stop_node(vm_id)
        for vm_id, node in self._nodes.items():
            if (vm_id in cut_off) != (vm_id in self._frozen):
                log.info("guest %s %s: node %s", vm_id, "cut off" if vm_id in cut_off else "reachable again",
                         node.name)
                node.cut_off(vm_id in cut_off)
                with self._lock:
                    if vm_id in cut_off:
                        self._frozen.add(vm_id)
                    else:
                        self._frozen.discard(vm_id)
        for vm_id, name in wanted.items():
            if vm_id in self._nodes or self._stop.is_set() or plane_dir is None \
                    or time.monotonic() < self._retry_at.get(vm_id, 0.0):
                continue
            # The node sees what the VM's guest would: its id as SMBIOS UUID, its disks under /dev/disk/by-id,
            # the kubelet at /var/lib/kubelet (hack/controlplane/guest_view.py).
            view = GuestView(system_uuid=vm_id, by_id_dir=self._disks_root() / vm_id / "by-id")
            node = RealNode(LocalControlPlane(plane_dir), name, guest=view)
            log.info("guest %s up: starting node %s", vm_id, name)
            try:
                node.start(images=images)
            except Exception as exc:  # noqa: BLE001 - start() has stopped what it began; the next pass tries again
                self.errors[vm_id] = str(exc)
                self._retry_at[vm_id] = time.monotonic() + RETRY_S
                log.warning("guest %s: node %s did not start: %s", vm_id, name, exc)
                continue
            self.errors.pop(vm_id, None)
            self._retry_at.pop(vm_id, None)
            disks = LoopDisks(self._disks_source, vm_id, self._disks_root() / vm_id, interval_s=0.5).__enter__()
            with self._lock:
                self._nodes[vm_id] = node
                self._disks[vm_id] = disks

    def _stop_node(self, vm_id: str) -> None:
        """The node first (its pods unmount the disks), then the disks; listed until both are gone, so that a
        caller sees the node stopped once it is not listed."""
        self._nodes[vm_id].stop()
        with self._lock:
            self._frozen.discard(vm_id)
        if vm_id in self._disks:
            self._disks[vm_id].__exit__(None, None, None)
        with self._lock:
            del self._nodes[vm_id]
            self._disks.pop(vm_id, None)
