"""What a Machine's spec names and the engine keeps as it is: the cluster, the template and its disks, vNIC
profiles, affinity groups, the cluster's tag. Found once and kept, so a thousand Machines of one MachineSet do not
ask the engine the same six questions a thousand times (docs/architecture.md#the-seam).

Only what exists is kept: a missing object is asked again at every attempt, so one an admin creates is seen at
once. What is kept can go stale (a template recreated under its name, a group deleted): the actuator drops
everything when a request that used it answers 404 or 400, and entries expire after `ttl_s` anyway.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import ovirtsdk4.types as types

from .client import OvirtClient
from .ttl_cache import TtlCache


class SpecObjects:
    def __init__(self, client: OvirtClient, ttl_s: float = 600.0, clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._kept: TtlCache[Any] = TtlCache(ttl_s, clock)
        self._cached = self._kept.get

    def cluster(self, cluster_id: str) -> types.Cluster | None:
        return self._cached(("cluster", cluster_id), lambda: self._client.cluster(cluster_id))

    def template(self, name: str, cluster_id: str) -> types.Template | None:
        return self._cached(("template", name, cluster_id), lambda: self._client.template_by_name(name, cluster_id))

    def template_disks(self, template_id: str) -> list[types.DiskAttachment]:
        return self._cached(("template-disks", template_id),
                            lambda: self._client.template_disk_attachments(template_id))

    def vnic_profile_exists(self, profile_id: str) -> bool:
        return self._cached(("vnic-profile", profile_id), lambda: self._client.vnic_profile_exists(profile_id))

    def affinity_group(self, cluster_id: str, name: str) -> types.AffinityGroup | None:
        return self._cached(("affinity-group", cluster_id, name),
                            lambda: self._client.affinity_group(cluster_id, name))

    def tag_exists(self, name: str) -> bool:
        return self._cached(("tag", name), lambda: self._client.tag_exists(name))

    def forget(self) -> None:
        self._kept.forget()
