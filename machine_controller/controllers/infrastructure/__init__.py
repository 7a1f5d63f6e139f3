"""Cluster API's infrastructure provider: the OvirtCluster and OvirtMachine controllers, the second front end of the
one oVirt layer (docs/architecture.md#the-seam)."""
