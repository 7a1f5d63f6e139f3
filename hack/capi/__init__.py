"""Upstream Cluster API on the local bed, shared by the end-to-end tests, `make demo` and the benchmark: Cluster API's
core manager (`core`), the bed's control plane provider (`controlplane`) and the objects a user applies
(`manifests`) (docs/architecture.md#the-test-bed)."""
