"""Thin reconcilers: Machine (with the oVirt actuator), node linking, the oVirt node controllers, MachineSet
(replicas, delete policies, adoption, status; no oVirt) and MachineSet capacity (the autoscaler's annotations)."""
