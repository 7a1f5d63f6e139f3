"""The oVirt VM a provider spec asks for, as SDK types: what `POST /vms` sends (docs/compatibility.md#creating-a-vm).
Pure: every id it needs is resolved by the caller.

Where the Go actuator lost settings, this keeps them (docs/compatibility.md#go-provider-defects): a high_performance VM
keeps its CPU topology and guaranteed memory, and sparse/format/storage domain apply to every template disk.
"""

from __future__ import annotations

from dataclasses import dataclass

import ovirtsdk4.types as types

from api.provider_spec import OvirtMachineProviderSpec, VMType

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class Resolved:
    """What the spec names, looked up in oVirt."""

    template_id: str
    template_disk_ids: tuple[str, ...]
    pinning_host_ids: tuple[str, ...] = ()


def build_vm(name: str, spec: OvirtMachineProviderSpec, ignition: str, resolved: Resolved) -> types.Vm:
    high_perf = spec.type == VMType.HIGH_PERFORMANCE
    vm = types.Vm(
        name=name,
        cluster=types.Cluster(id=spec.cluster_id),
        template=types.Template(id=resolved.template_id),
        # Ignition reaches RHCOS through the initialization payload; host_name names the Node.
        initialization=types.Initialization(custom_script=ignition, host_name=name),
        type=types.VmType(spec.type) if spec.type else None,
        placement_policy=types.VmPlacementPolicy(
            affinity=types.VmAffinity.USER_MIGRATABLE if high_perf else types.VmAffinity.MIGRATABLE,
            hosts=[types.Host(id=h) for h in resolved.pinning_host_ids] or None,
        ),
    )
    if spec.instance_type_id:
        vm.instance_type = types.InstanceType(id=spec.instance_type_id)
    else:
        cpu = spec.cpu
        vm.cpu = types.Cpu(
            topology=types.CpuTopology(sockets=cpu.sockets, cores=cpu.cores, threads=cpu.threads) if cpu else None,
            mode=types.CpuMode.HOST_PASSTHROUGH if high_perf else None,
        )
        vm.memory = spec.memory_mb * MIB
        policy = types.MemoryPolicy()
        if spec.guaranteed_memory_mb:
            policy.guaranteed = spec.guaranteed_memory_mb * MIB
        if high_perf:
            policy.ballooning = False
        if policy.guaranteed is not None or policy.ballooning is not None:
            vm.memory_policy = policy
    if high_perf and spec.instance_type_id:
        vm.cpu = types.Cpu(mode=types.CpuMode.HOST_PASSTHROUGH)
        vm.memory_policy = types.MemoryPolicy(ballooning=False)
    if high_perf:
        vm.soundcard_enabled = False
        vm.console = types.Console(enabled=True)  # serial console; graphics consoles are removed after create
    if spec.hugepages:
        vm.custom_properties = [types.CustomProperty(name="hugepages", value=str(spec.hugepages))]
    disks = _disk_overrides(spec, resolved.template_disk_ids)
    if disks:
        vm.disk_attachments = disks
    return vm


def _disk_overrides(spec: OvirtMachineProviderSpec, disk_ids: tuple[str, ...]) -> list[types.DiskAttachment]:
    if spec.sparse is None and not spec.format and not spec.storage_domain_id:
        return []  # the template's own disk settings apply
    out = []
    for disk_id in disk_ids:
        disk = types.Disk(id=disk_id)
        if spec.sparse is not None:
            disk.sparse = spec.sparse
        if spec.format:
            disk.format = types.DiskFormat(spec.format)
        if spec.storage_domain_id:
            disk.storage_domains = [types.StorageDomain(id=spec.storage_domain_id)]
        out.append(types.DiskAttachment(disk=disk))
    return out


def os_disk_bytes(spec: OvirtMachineProviderSpec) -> int:
    return (spec.os_disk.size_gb if spec.os_disk else 0) * GIB
