"""The REST collections the controllers read and write."""

from api import keys, remediation
from machine_controller.runtime.kube import NODES, PODS, SECRETS, Resource

MACHINES = Resource(keys.GROUP, keys.VERSION, "machines", "Machine")
MACHINESETS = Resource(keys.GROUP, keys.VERSION, "machinesets", "MachineSet")
MACHINEHEALTHCHECKS = Resource(keys.GROUP, keys.VERSION, "machinehealthchecks", "MachineHealthCheck")
REMEDIATIONS = Resource(remediation.GROUP, remediation.VERSION, "ovirtremediations", "OvirtRemediation")
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", namespaced=False)
EVICTION_SUBRESOURCE = "eviction"

__all__ = ["MACHINES", "MACHINESETS", "MACHINEHEALTHCHECKS", "REMEDIATIONS", "VOLUME_ATTACHMENTS", "NODES", "PODS", "SECRETS",
           "EVICTION_SUBRESOURCE"]
