"""The generic controllers, one package each (docs/architecture.md#layers): `machine/` (Machines to instances,
drain), `machineset/` (replicas, delete policy, capacity annotations), `nodes/` (nodelink, providerIDs, a gone
instance's Node and its volumes), `healthcheck/` (MachineHealthChecks) and `remediation/` (fencing). None of them
knows oVirt: each reaches the provider through the seam in `provider.py`."""
