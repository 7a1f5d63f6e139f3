"""A new VM brought to its Machine's spec while it is stopped, before its first start: the graphics consoles of a
high-performance VM, its NICs, the cluster's tag, its affinity groups, its OS disk grown, its CPUs auto-pinned
(docs/compatibility.md#creating-a-vm). Each step is idempotent, so a restarted controller checks them again.

What these steps need is checked before a VM exists (`check_dependencies`, `check_os_disk_size`), so a missing
dependency or a disk that could never be grown leaves no VM behind.
"""

from __future__ import annotations

import ovirtsdk4.types as types

from api.machine import Machine
from api.provider_spec import OvirtMachineProviderSpec, VMType
from machine_controller.controllers.provider import InvalidMachineConfiguration

from .client import OvirtClient
from .errors import MissingDependencyError
from .spec_objects import SpecObjects
from .tracker import Tracker
from .vm_spec import GIB, os_disk_bytes

OS_DISK_UNLOCKED = "the OS disk to be unlocked"


class VmConfiguration:
    def __init__(self, client: OvirtClient, spec_objects: SpecObjects, tracker: Tracker):
        self._client = client
        self._spec_objects = spec_objects
        self._tracker = tracker

    def check_dependencies(self, machine: Machine, spec: OvirtMachineProviderSpec) -> None:
        """The vNIC profiles, affinity groups and tag the configuration will use exist; else MissingDependencyError."""
        for nic in spec.network_interfaces:
            if not self._spec_objects.vnic_profile_exists(nic.vnic_profile_id):
                raise MissingDependencyError(f"oVirt vNIC profile {nic.vnic_profile_id} not found")
        for group in spec.affinity_groups_names:
            self._affinity_group(spec, group)
        tag = machine.cluster_id
        if tag and not self._spec_objects.tag_exists(tag):
            raise MissingDependencyError(f"oVirt tag {tag!r} (the cluster's infra ID) not found")

    def configure(self, machine: Machine, spec: OvirtMachineProviderSpec, vm: types.Vm) -> str | None:
        """Bring the stopped VM to the spec, step by idempotent step. Returns what is awaited (the OS disk to be
        unlocked), or None when the VM is ready to start."""
        # The steps that do not wait go first, and are done once per VM in this process; the OS disk, which may
        # have to be waited for, comes last.
        if not self._tracker.configured(vm.id):
            if spec.type == VMType.HIGH_PERFORMANCE:
                for console in self._client.graphics_consoles(vm.id):
                    self._client.remove_graphics_console(vm.id, console.id)  # headless (OCPRHV-786)
            self._reconcile_nics(spec, vm)
            tag = machine.cluster_id
            # A VM from its cluster's list carries its tags; one asked for on its own does not.
            tags = [t.name for t in vm.tags] if vm.tags is not None else self._client.vm_tags(vm.id)
            if tag and tag not in tags:
                self._client.add_vm_tag(vm.id, tag)
            for name in spec.affinity_groups_names:
                group = self._affinity_group(spec, name)
                self._client.add_vm_to_affinity_group(spec.cluster_id, group.id, vm.id)  # idempotent
            self._tracker.mark_configured(machine.key, vm.id)
        pending = self._grow_os_disk(machine, spec, vm)
        if pending:
            return pending
        if spec.auto_pinning_enabled:
            # Re-pinning a stopped VM yields the same pinning: safe to repeat when a start is retried.
            self._client.auto_pin(vm.id)
        return None

    def _affinity_group(self, spec: OvirtMachineProviderSpec, name: str) -> types.AffinityGroup:
        group = self._spec_objects.affinity_group(spec.cluster_id, name)
        if group is None:
            raise MissingDependencyError(f"oVirt affinity group {name!r} not found in cluster {spec.cluster_id}")
        return group

    def _grow_os_disk(self, machine: Machine, spec: OvirtMachineProviderSpec, vm: types.Vm) -> str | None:
        if self._tracker.os_disk_ok(vm.id):
            return None
        # A VM from its cluster's list carries its disks (newer than our last resize); else they are asked for.
        attachments = vm.disk_attachments if vm.disk_attachments is not None \
            else self._client.vm_disk_attachments(vm.id)
        boot = [a for a in attachments if a.bootable]
        if not boot or boot[0].disk is None:
            raise InvalidMachineConfiguration(f"template {spec.template_name!r} has no bootable disk")
        disk = boot[0].disk
        if disk.status == types.DiskStatus.LOCKED:
            return OS_DISK_UNLOCKED
        wanted = os_disk_bytes(spec)
        if (disk.provisioned_size or 0) < wanted:  # grown, never shrunk (docs/compatibility.md)
            self._client.resize_disk(disk.id, wanted, correlation_id=correlation(machine, "resize"))
            self._tracker.acted_on(machine.key, vm.id)
            return OS_DISK_UNLOCKED
        self._tracker.mark_os_disk_ok(machine.key, vm.id)
        return None

    def _reconcile_nics(self, spec: OvirtMachineProviderSpec, vm: types.Vm) -> None:
        if not spec.network_interfaces:
            return  # the template's NICs are kept (docs/compatibility.md#provider-spec)
        wanted = {f"nic{i + 1}": n.vnic_profile_id for i, n in enumerate(spec.network_interfaces)}
        current = self._client.nics(vm.id)
        for nic in current:
            profile = nic.vnic_profile.id if nic.vnic_profile else None
            if wanted.get(nic.name) != profile:
                self._client.remove_nic(vm.id, nic.id)
        kept = {n.name for n in current if wanted.get(n.name) == (n.vnic_profile.id if n.vnic_profile else None)}
        for name, profile in wanted.items():
            if name not in kept:
                self._client.add_nic(vm.id, name, profile)


def check_os_disk_size(spec: OvirtMachineProviderSpec, template_disks: list[types.DiskAttachment]) -> None:
    """An OS disk smaller than the template's is refused before any VM exists: the engine grows disks but never
    shrinks them, so the Machine could never get the size it asks for (docs/compatibility.md#disks)."""
    wanted = os_disk_bytes(spec)
    if not wanted or spec.os_disk is None:
        return
    boot = [a.disk for a in template_disks if a.bootable and a.disk is not None]
    current = boot[0].provisioned_size if boot and boot[0].provisioned_size else 0
    if wanted < current:
        raise InvalidMachineConfiguration(
            f"spec.providerSpec.value.os_disk.size_gb: Invalid value: {spec.os_disk.size_gb}: must be at least "
            f"the template's OS disk size, {current / GIB:g} GiB (oVirt cannot shrink a disk)")


def correlation(machine: Machine, step: str) -> str:
    """The correlation id of a request the Machine makes: the engine tags the jobs of a request with it, so an admin
    can find in the engine what a Machine did."""
    return f"{machine.metadata.name}-{step}"[:50]
