"""Prometheus metrics of the storage controllers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

# The reasons the provisioner counts engine failures under (provisioner.py); a refused claim counts under its own.
FAILURE_REASONS = ("too-large", "storage-domain", "engine", "delete")


class StorageMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.provisioned = Counter("ovirt_volume_disks_provisioned", "oVirt disks provisioned for claims.",
                                   registry=registry)
        self.deleted = Counter("ovirt_volume_disks_deleted", "oVirt disks removed when their volume was released.",
                               registry=registry)
        self.failed = Counter("ovirt_volume_provisioning_failures",
                              "Provisioning or deletion attempts that failed, by reason.", ["reason"],
                              registry=registry)
        # The reasons of the engine's failures start at 0: a series that first appears at 1 shows no increase in
        # Prometheus, so the first failure would never fire OvirtVolumeOperationsFailing (config/monitoring).
        for reason in FAILURE_REASONS:
            self.failed.labels(reason)
        self.requests = Counter("ovirt_volume_ovirt_requests", "Requests the storage controllers sent to oVirt.",
                                ["what"], registry=registry)
