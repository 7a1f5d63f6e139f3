"""oVirt's side of the node controller's seam (`controllers.actuator.Instances`): the VM behind a Node."""

from __future__ import annotations

import ovirtsdk4.types as types

from api.ids import is_ovirt_provider_id, provider_id
from machine_controller.controllers.provider import InstanceNotOwned, NodeInstance

from .client import OvirtClient
from .cluster_vm_lists import ClusterVmLists
from .provider_ids import vm_id_named_by


class OvirtInstances:
    def __init__(self, client: OvirtClient, vm_lists: ClusterVmLists | None = None):
        self._client = client
        self._vm_lists = vm_lists

    def owns(self, pid: str) -> bool:
        return is_ovirt_provider_id(pid)

    def find(self, node_name: str, pid: str | None) -> NodeInstance | None:
        """By VM id first; by the Node's name only as a fallback, so a VM is reported gone only when it is
        missing both ways. A failed lookup raises (an engine outage must never look like a missing VM). A VM found
        by id is the Node's only when it bears the Node's name; else InstanceNotOwned, and nothing is said of
        that VM (docs/architecture.md#acting-only-on-what-is-ours).

        A new Node (no providerID yet) is named after a VM that was in the list of its cluster moments ago (its
        Machine waited on it there): that list says which VM it is, so naming a Node costs the engine nothing.
        Whether a known VM still exists or runs is always asked of the engine."""
        vm = None
        # `ovirt://` and no VM id after it names nothing of ours: nothing is looked up or deleted for it.
        vm_id = vm_id_named_by(pid, f"Node {node_name}") if pid else None
        if vm_id:
            vm = self._client.vm(vm_id)
            if vm is not None and vm.name != node_name:
                raise InstanceNotOwned(
                    f"spec.providerID names VM {vm.id}, which is named {vm.name!r}, not {node_name!r}: a Node's VM "
                    "is the VM of its name, so that VM is left alone", vm.id, provider_id(vm.id))
        if vm is None:
            vm = (None if pid else self._seen(name=node_name)) or self._client.vm_by_name(node_name)
        if vm is None:
            return None
        return NodeInstance(provider_id=provider_id(vm.id), running=vm.status != types.VmStatus.DOWN)

    def _seen(self, vm_id: str | None = None, name: str | None = None) -> types.Vm | None:
        found = self._vm_lists.seen(vm_id=vm_id, name=name) if self._vm_lists is not None else []
        return found[0] if len({v.id for v in found}) == 1 else None  # two VMs of one name: the engine decides
