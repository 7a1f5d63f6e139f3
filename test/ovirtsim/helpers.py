"""Client-side steps shared by the simulator tests, written only against `ovirtsdk4` as a controller would."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import ovirtsdk4 as sdk
from ovirtsdk4 import types


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll like a controller does; returns the first truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


IGNITION = json.dumps({"ignition": {"version": "3.2.0"},
                       "storage": {"files": [{"path": "/etc/hostname", "contents": {"source": "data:,w"}}]}})


def rhcos_template(conn: sdk.Connection) -> types.Template:
    return conn.system_service().templates_service().list(search='name="rhcos"')[0]


def default_cluster(conn: sdk.Connection) -> types.Cluster:
    return conn.system_service().clusters_service().list(search="name=Default")[0]


def create_vm(conn: sdk.Connection, name: str, memory_gib: int = 4, ignition: str | None = IGNITION,
              clone: bool = True, **fields) -> types.Vm:
    template = rhcos_template(conn)
    cluster = default_cluster(conn)
    return conn.system_service().vms_service().add(
        types.Vm(name=name, cluster=types.Cluster(id=cluster.id), template=types.Template(id=template.id),
                 memory=memory_gib * 2**30,
                 cpu=types.Cpu(topology=types.CpuTopology(cores=2, sockets=1, threads=1)),
                 initialization=types.Initialization(custom_script=ignition, host_name=name) if ignition else None,
                 **fields),
        clone=clone)


def vm_service(conn: sdk.Connection, vm_id: str):
    return conn.system_service().vms_service().vm_service(vm_id)


def wait_status(conn: sdk.Connection, vm_id: str, status: types.VmStatus, timeout: float = 10.0) -> types.Vm:
    svc = vm_service(conn, vm_id)
    return wait_for(lambda: (lambda vm: vm if vm.status == status else None)(svc.get()), timeout)


def create_down_vm(conn: sdk.Connection, name: str, **kwargs) -> types.Vm:
    vm = create_vm(conn, name, **kwargs)
    return wait_status(conn, vm.id, types.VmStatus.DOWN)


def start_up_vm(conn: sdk.Connection, name: str, **kwargs) -> types.Vm:
    vm = create_down_vm(conn, name, **kwargs)
    vm_service(conn, vm.id).start()
    return wait_status(conn, vm.id, types.VmStatus.UP)
