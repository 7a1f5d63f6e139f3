"""The REST collections the controllers read and write."""

from api import keys
from machine_controller.runtime.kube import NODES, PODS, SECRETS, Resource

MACHINES = Resource(keys.GROUP, keys.VERSION, "machines", "Machine")
MACHINESETS = Resource(keys.GROUP, keys.VERSION, "machinesets", "MachineSet")
MACHINEHEALTHCHECKS = Resource(keys.GROUP, keys.VERSION, "machinehealthchecks", "MachineHealthCheck")
EVICTION_SUBRESOURCE = "eviction"

__all__ = ["MACHINES", "MACHINESETS", "MACHINEHEALTHCHECKS", "NODES", "PODS", "SECRETS",
           "EVICTION_SUBRESOURCE"]
