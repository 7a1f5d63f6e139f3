"""Where converted objects go (docs/cluster-api.md#migrating-from-the-machine-api): the Cluster API Cluster and
namespace of the objects converted from the Machine API, with the OvirtCluster that Cluster needs, and the namespace,
credentials and oVirt clusters of the objects converted back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from api import capi
from api.infrastructure import API_VERSION as INFRA_API_VERSION
from api.infrastructure import OVIRT_CLUSTER_KIND

AUTHORITATIVE_API_CLUSTER_API = "ClusterAPI"


@dataclass(frozen=True)
class ToClusterAPI:
    """Where the converted objects go: the Cluster API Cluster `cluster_name` (its OvirtCluster names the engine's
    credentials), in `namespace` (the source's when empty)."""

    cluster_name: str
    namespace: str = ""
    paused: bool = True


@dataclass(frozen=True)
class ToMachineAPI:
    """Where converted-back objects go: `namespace` (the source's when empty); `credentials_secret` is the provider
    spec's credentialsSecret (the Machine API's credentials Secret that the OvirtCluster's identity came from);
    `failure_domains` maps the OvirtCluster's failure domain names to their oVirt cluster ids."""

    namespace: str = ""
    credentials_secret: str = ""
    failure_domains: Mapping[str, str] | None = None
    authoritative_api: str | None = AUTHORITATIVE_API_CLUSTER_API


def ovirt_cluster_for(cluster_name: str, namespace: str, identity_secret: str, ovirt_cluster_id: str,
                      paused: bool = True) -> dict[str, Any]:
    """The OvirtCluster of the target Cluster: the engine of the Machine API's credentials Secret (converted by
    api.migration.secrets.credentials_to_identity under the same name) and the oVirt cluster of the converted
    specs."""
    meta: dict[str, Any] = {"name": cluster_name, "namespace": namespace,
                            "labels": {capi.CLUSTER_NAME_LABEL: cluster_name}}
    if paused:
        meta["annotations"] = {capi.PAUSED_ANNOTATION: ""}
    return {"apiVersion": INFRA_API_VERSION, "kind": OVIRT_CLUSTER_KIND, "metadata": meta,
            "spec": {"identityRef": {"name": identity_secret}, "clusterId": ovirt_cluster_id}}


# The converters' default way back: into the source's namespace, with no credentials Secret and no failure domains.
MACHINE_API_DEFAULTS = ToMachineAPI()
