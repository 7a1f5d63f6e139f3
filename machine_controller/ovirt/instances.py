"""oVirt's side of the node controller's seam (`controllers.actuator.Instances`): the VM behind a Node."""

from __future__ import annotations

import ovirtsdk4.types as types

from machine_controller.controllers.actuator import NodeInstance

from .actuator import PROVIDER_ID_PREFIX, provider_id
from .client import OvirtClient


class OvirtInstances:
    def __init__(self, client: OvirtClient):
        self._client = client

    def owns(self, pid: str) -> bool:
        return pid.startswith(PROVIDER_ID_PREFIX)

    def find(self, node_name: str, pid: str | None) -> NodeInstance | None:
        """By VM id first; by the Node's name only as a fallback, so a VM is reported gone only when it is
        missing both ways. A failed lookup raises (an engine outage must never look like a missing VM)."""
        vm = self._client.vm(pid[len(PROVIDER_ID_PREFIX):]) if pid and self.owns(pid) else None
        if vm is None:
            vm = self._client.vm_by_name(node_name)
        if vm is None:
            return None
        return NodeInstance(provider_id=provider_id(vm.id), running=vm.status != types.VmStatus.DOWN)
