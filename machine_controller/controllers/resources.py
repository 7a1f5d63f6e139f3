"""The REST collections the controllers read and write."""

from api import keys, remediation
from machine_controller.runtime.kube import NODES, PODS, SECRETS, Resource

MACHINES = Resource(keys.GROUP, keys.VERSION, "machines", "Machine")
MACHINESETS = Resource(keys.GROUP, keys.VERSION, "machinesets", "MachineSet")
MACHINEHEALTHCHECKS = Resource(keys.GROUP, keys.VERSION, "machinehealthchecks", "MachineHealthCheck")
REMEDIATIONS = Resource(remediation.GROUP, remediation.VERSION, "ovirtremediations", "OvirtRemediation")
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", namespaced=False)
EVICTION_SUBRESOURCE = "eviction"

# Machines by the name of the Node they are linked to (status.nodeRef): Node events map to Machines through it.
INDEX_NODE_REF = "nodeRef"


def node_ref_index(machine: dict) -> list[str]:
    name = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
    return [name] if name else []


__all__ = ["MACHINES", "MACHINESETS", "MACHINEHEALTHCHECKS", "REMEDIATIONS", "VOLUME_ATTACHMENTS", "NODES", "PODS",
           "SECRETS", "EVICTION_SUBRESOURCE", "INDEX_NODE_REF", "node_ref_index"]
