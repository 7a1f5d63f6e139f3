"""oVirt's side of fencing (`controllers.actuator.PowerControl`): a VM's power state by its id, hard stop, start.

The engine's VM states map to what fencing may conclude (docs/fencing.md#the-safety-rules-the-code-keeps): only
`down` is off; `unknown` (the VM's host stopped answering) is never taken as off, since the VM may still run there.
"""

from __future__ import annotations

import ovirtsdk4.types as types

from api.ids import vm_id_from_provider_id
from machine_controller.controllers.actuator import Power, PowerState

from .client import OvirtClient

_STATES = {
    types.VmStatus.DOWN: PowerState.OFF,
    types.VmStatus.POWERING_DOWN: PowerState.STOPPING,
    types.VmStatus.WAIT_FOR_LAUNCH: PowerState.STARTING,
    types.VmStatus.POWERING_UP: PowerState.STARTING,
    types.VmStatus.UNKNOWN: PowerState.UNKNOWN,
    # Everything else (up, paused, not_responding, migrating, reboot_in_progress, suspended, saving/restoring
    # state, image_locked) may still hold the disks: it is on until the engine says down.
}


class OvirtPower:
    def __init__(self, client: OvirtClient):
        self._client = client

    @staticmethod
    def _vm_id(provider_id: str) -> str:
        vm_id = vm_id_from_provider_id(provider_id)
        if vm_id is None:
            raise ValueError(f"not an oVirt providerID: {provider_id!r}")
        return vm_id

    def power(self, provider_id: str) -> Power | None:
        vm = self._client.vm(self._vm_id(provider_id))
        if vm is None:
            return None
        status = vm.status
        if status is None:
            return Power(PowerState.UNKNOWN, "unreported")
        return Power(_STATES.get(status, PowerState.ON), status.value)

    def power_off(self, provider_id: str) -> None:
        self._client.stop_vm(self._vm_id(provider_id))

    def power_on(self, provider_id: str) -> None:
        vm_id = self._vm_id(provider_id)
        self._client.start_vm(vm_id, correlation_id=f"remediation-{vm_id}"[:50])
