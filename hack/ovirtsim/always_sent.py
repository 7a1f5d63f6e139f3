"""The elements a real engine sends for every object of a type, even when nobody set them
(docs/compatibility.md#always-sent-elements).

The engine's REST mappers copy some fields of every entity unconditionally, from entity fields that are never
null: `VmBase`, `Cluster`, `StoragePool` (data center), `Network`, `VdsStatic` (host), `StorageDomainStatic`
and `BaseDisk` turn a missing description or comment into `""`; booleans and numbers are Java primitives; an
affinity group's priority is stored with a default of 1. JAXB omits only nulls, so such objects always carry
these elements, and clients generated from the model may count on them. The simulator keeps what clients sent in
its rows and fills the rest here, on the copy being rendered, so every code path that creates a row (create,
update, seed, a state file of an older simulator) is served the same way.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ovirtsdk4 import types


@dataclass(frozen=True)
class Nested:
    """A structured element sent always, itself with elements sent always."""

    cls: type
    fields: dict[str, Any] = field(default_factory=dict)

    def complete(self, value: Any) -> Any:
        filled = self.cls() if value is None else copy.copy(value)
        _fill(filled, self.fields)
        return filled


EMPTY_LIST = ()  # marker: an empty collection element (`<vms/>`), never shared between objects

_VM_BASE: dict[str, Any] = {
    # VmBaseMapper.mapCommonEntityToModel / mapVmBaseEntityToModel
    "description": "",
    "comment": "",
    "memory_policy": Nested(types.MemoryPolicy, {"ballooning": True}),
    "high_availability": Nested(types.HighAvailability, {"enabled": False, "priority": 0}),
    "bios": Nested(types.Bios, {"boot_menu": Nested(types.BootMenu, {"enabled": False})}),
    "migration_downtime": -1,  # null in the database is sent as -1
    "stateless": False,
    "delete_protected": False,
    "start_paused": False,
    "cpu_shares": 0,
    "multi_queues_enabled": True,
}

ALWAYS_SENT: dict[type, dict[str, Any]] = {
    # VmMapper: the CPU architecture is the cluster's (every simulated cluster is x86_64), whatever the VM's CPU says.
    types.Vm: dict(_VM_BASE, next_run_configuration_exists=False,
                   cpu=Nested(types.Cpu, {"architecture": types.Architecture.X86_64})),
    types.Template: dict(_VM_BASE),
    types.InstanceType: dict(_VM_BASE),
    types.Cluster: {"description": "", "comment": "", "ballooning_enabled": False, "threads_as_cores": False,
                    "virt_service": True, "gluster_service": False, "tunnel_migration": False,
                    "trusted_service": False, "ha_reservation": False, "vnc_encryption": False,
                    "ksm": Nested(types.Ksm, {"enabled": True, "merge_across_nodes": True})},
    types.DataCenter: {"description": "", "comment": "", "local": False},
    types.Host: {"comment": "", "spm": Nested(types.Spm, {"priority": 5}),
                 "summary": Nested(types.VmSummary, {"active": 0, "migrating": 0, "total": 0}),
                 "ksm": Nested(types.Ksm, {"enabled": False}), "numa_supported": False, "update_available": False,
                 "reinstallation_required": False, "ovn_configured": False,
                 "device_passthrough": Nested(types.HostDevicePassthrough, {"enabled": False})},
    types.StorageDomain: {"description": "", "comment": "", "master": False, "wipe_after_delete": False,
                          "discard_after_delete": False, "supports_discard": False,
                          "supports_discard_zeroes_data": False, "backup": False},
    types.Network: {"description": "", "comment": "", "stp": False, "mtu": 0, "port_isolation": False},
    types.Disk: {"description": "", "shareable": False, "wipe_after_delete": False, "propagate_errors": False},
    types.DiskAttachment: {"active": True, "bootable": False, "pass_discard": False, "read_only": False,
                           "uses_scsi_reservation": False},
    types.Nic: {"linked": True, "plugged": True, "synced": True},
    types.AffinityGroup: {"priority": 1.0, "enforcing": False,
                          "hosts": EMPTY_LIST, "vms": EMPTY_LIST, "host_labels": EMPTY_LIST,
                          "vm_labels": EMPTY_LIST},
    types.Job: {"auto_cleared": True, "external": False},
    types.Step: {"external": False},
}


def _fill(obj: Any, spec: dict[str, Any]) -> None:
    for attr, default in spec.items():
        value = getattr(obj, attr)
        if isinstance(default, Nested):
            setattr(obj, attr, default.complete(value))
        elif value is None:
            setattr(obj, attr, [] if default is EMPTY_LIST else default)


def _is_reference(obj: Any) -> bool:
    """`<cluster href id/>`: a reference to another object, rendered as it is."""
    return all(v is None for k, v in vars(obj).items() if k not in ("_id", "_href"))


def complete(obj: Any) -> Any:
    """`obj` as the engine renders it: a copy with every always-sent element (its inlined, followed objects too);
    `obj` itself is not changed."""
    spec = ALWAYS_SENT.get(type(obj))
    view = copy.copy(obj)
    if spec is not None:
        _fill(view, spec)
    for attr, value in list(vars(view).items()):
        if isinstance(value, list) and value and type(value[0]) in ALWAYS_SENT:
            setattr(view, attr, [complete(item) for item in value])
        elif type(value) in ALWAYS_SENT and not _is_reference(value):
            setattr(view, attr, complete(value))
    return view
