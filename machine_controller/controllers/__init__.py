"""Thin reconcilers: Machine (with the oVirt actuator), node linking, the oVirt node controllers, and MachineSet
(replicas, delete policies, adoption, status, the autoscaler's capacity annotations; no oVirt)."""
