"""Prometheus metrics of the storage controllers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class StorageMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.provisioned = Counter("ovirt_volume_disks_provisioned", "oVirt disks provisioned for claims.",
                                   registry=registry)
        self.deleted = Counter("ovirt_volume_disks_deleted", "oVirt disks removed when their volume was released.",
                               registry=registry)
        self.failed = Counter("ovirt_volume_provisioning_failures",
                              "Provisioning or deletion attempts that failed, by reason.", ["reason"],
                              registry=registry)
        self.requests = Counter("ovirt_volume_ovirt_requests", "Requests the storage controllers sent to oVirt.",
                                ["what"], registry=registry)
