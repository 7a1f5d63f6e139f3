"""Thin reconcilers: Machine (with the oVirt actuator), node linking, and the oVirt node controllers."""
