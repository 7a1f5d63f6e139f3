"""The API handlers, one module per family of collections; importing the package registers every route."""

from hack.ovirtsim.resources import affinity, disks, inventory, vm_devices, vms  # noqa: F401 - imported to register
