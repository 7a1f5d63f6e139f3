"""The floor for N Machines: the same N VMs created and booted by a bare-SDK script on the same simulator.

What a Machine waits for, done with no controller, no Kubernetes object and no politeness towards the engine:
create each VM from the template with the Machine's shape and Ignition payload, grow its OS disk to the
Machine's size once the disks are unlocked, start it, and wait until its guest reports an address and (when the
simulator's guests join a cluster) its Node is registered. `workers` threads, each with its own connection, do
the creates, resizes and starts as soon as a VM is ready for them; one list of the VMs every `poll_s` (20 ms, or
as long as the last list took, whichever is longer) tells which are. No controller can be faster on the same
simulator, so the benchmark divides its time to all Running by this (hack/bench/machines.py). 16 workers were the
best of 4, 16 and 64 for N=100 here.

    floor = boot_floor(sim, inst, n=100, prefix="floor-100", node_names=nodes.names)
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import ovirtsdk4.types as types

from hack import ovirt_install

GIB = 1024 ** 3


@dataclass(frozen=True)
class Shape:
    """The VM a Machine of the benchmark asks for (hack/bench/machines.py `machine`)."""

    memory_mb: int = 4096
    cores: int = 2
    os_disk_gib: int = 120
    clone: bool = False  # the benchmark's Machines ask for thin disks


@dataclass(frozen=True)
class Floor:
    n: int
    workers: int
    seconds: float
    requests: int
    # (seconds since the start, guests booted, their Nodes registered), one row per look: the picture's floor.
    timeline: tuple[tuple[float, int, int], ...] = ()


def boot_floor(sim, inst: ovirt_install.Installation, n: int, prefix: str, workers: int = 16,
               shape: Shape = Shape(), node_names: Callable[[], set[str]] | None = None,
               poll_s: float = 0.02) -> Floor:
    """Create and boot `n` VMs named `<prefix>-<i>` with `workers` concurrent connections; returns the seconds
    until every guest reported an address (and, with `node_names`, every Node exists), then removes the VMs.
    `node_names` is asked at every look (the benchmark answers from an informer's cache)."""
    local = threading.local()
    conns = []
    conns_lock = threading.Lock()

    def system():
        if not hasattr(local, "conn"):
            local.conn = sim.connection()
            with conns_lock:
                conns.append(local.conn)
        return local.conn.system_service()

    ignition = ovirt_install.sample("worker-user-data.yaml")["stringData"]["userData"]
    names = [f"{prefix}-{i:04d}" for i in range(n)]

    def create(name: str) -> None:
        system().vms_service().add(types.Vm(
            name=name, cluster=types.Cluster(id=inst.cluster_id), template=types.Template(name=inst.template_name),
            memory=shape.memory_mb * 1024 * 1024,
            cpu=types.Cpu(topology=types.CpuTopology(sockets=1, cores=shape.cores, threads=1)),
            initialization=types.Initialization(custom_script=ignition, host_name=name)), clone=shape.clone)

    def grow(disk_id: str) -> None:
        system().disks_service().disk_service(disk_id).update(types.Disk(provisioned_size=shape.os_disk_gib * GIB))

    def start(vm_id: str) -> None:
        system().vms_service().vm_service(vm_id).start()

    sim.control.reset_counts()
    watcher = sim.connection()
    vms = watcher.system_service().vms_service()
    grown: set[str] = set()
    started: set[str] = set()
    booted: set[str] = set()
    timeline: list[tuple[float, int, int]] = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(create, name) for name in names]
        while True:
            for f in [f for f in futures if f.done()]:
                f.result()  # a failure of the floor is a failure of the benchmark
                futures.remove(f)
            listed_at = time.monotonic()
            for vm in vms.list(search=f"name={prefix}-*", follow="reported_devices,disk_attachments.disk"):
                if vm.status == types.VmStatus.DOWN and vm.id not in started:
                    boot = next((a.disk for a in vm.disk_attachments or [] if a.bootable), None)
                    if boot is None or boot.status != types.DiskStatus.OK:
                        continue
                    if (boot.provisioned_size or 0) < shape.os_disk_gib * GIB:
                        if vm.id not in grown:
                            grown.add(vm.id)
                            futures.append(pool.submit(grow, boot.id))
                        continue
                    started.add(vm.id)
                    futures.append(pool.submit(start, vm.id))
                elif vm.status == types.VmStatus.UP and any(
                        d.ips for d in vm.reported_devices or [] if d.name and d.name.startswith("eth")):
                    booted.add(vm.id)
            registered = len(set(names) & node_names()) if node_names else 0
            timeline.append((time.monotonic() - t0, len(booted), registered))
            if len(booted) == n and (node_names is None or registered == n):
                break
            # A list of a thousand VMs takes the simulator seconds: listing back to back would starve the creates.
            time.sleep(max(poll_s, time.monotonic() - listed_at))
    elapsed = time.monotonic() - t0
    requests = sum(sim.control.counts().values())
    try:
        ids = [vm.id for vm in vms.list(search=f"name={prefix}-*")]
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda i: system().vms_service().vm_service(i).stop(force=True), ids))
        while any(vm.status != types.VmStatus.DOWN for vm in vms.list(search=f"name={prefix}-*")):
            time.sleep(0.1)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda i: system().vms_service().vm_service(i).remove(), ids))
    finally:
        watcher.close()
        for c in conns:
            c.close()
    return Floor(n=n, workers=workers, seconds=elapsed, requests=requests, timeline=tuple(timeline))
