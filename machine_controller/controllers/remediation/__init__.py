"""Fencing of an unhealthy Machine's VM for an OvirtRemediation (docs/fencing.md)."""
