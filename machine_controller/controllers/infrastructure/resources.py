"""The REST collections the infrastructure controllers read and write, and how their objects find each other: an
OvirtMachine its Cluster API Machine (by its controller owner reference, which Cluster API sets), a Machine its
Cluster (spec.clusterName), a Cluster its OvirtCluster (spec.infrastructureRef)."""

from __future__ import annotations

from api import capi, infrastructure
from api.capi import CapiCluster, CapiMachine
from api.infrastructure import OvirtCluster
from api.meta import ObjectMeta
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import Resource

OVIRT_CLUSTERS = Resource(infrastructure.GROUP, infrastructure.VERSION, "ovirtclusters",
                          infrastructure.OVIRT_CLUSTER_KIND)
OVIRT_MACHINES = Resource(infrastructure.GROUP, infrastructure.VERSION, "ovirtmachines",
                          infrastructure.OVIRT_MACHINE_KIND)
OVIRT_MACHINE_TEMPLATES = Resource(infrastructure.GROUP, infrastructure.VERSION, "ovirtmachinetemplates",
                                   infrastructure.OVIRT_MACHINE_TEMPLATE_KIND)
CAPI_MACHINES = Resource(capi.GROUP, capi.VERSION, "machines", capi.MACHINE_KIND)
CAPI_CLUSTERS = Resource(capi.GROUP, capi.VERSION, "clusters", capi.CLUSTER_KIND)

# OvirtMachines by "<namespace>/<Cluster name>" (Cluster API's cluster-name label): a Cluster's or an OvirtCluster's
# change reaches its OvirtMachines through it, and an OvirtCluster's deletion waits for them.
INDEX_CLUSTER = "cluster"


def cluster_index(obj: dict) -> list[str]:
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(capi.CLUSTER_NAME_LABEL)
    return [f"{meta.get('namespace')}/{name}"] if name else []


def cluster_of_ovirt_cluster(obj: dict) -> list[str]:
    """The "<namespace>/<Cluster name>" an OvirtCluster belongs to: its owner Cluster, else Cluster API's label."""
    meta = obj.get("metadata") or {}
    owners = [r.get("name") for r in meta.get("ownerReferences") or []
              if r.get("kind") == capi.CLUSTER_KIND and str(r.get("apiVersion", "")).startswith(f"{capi.GROUP}/")]
    name = next(iter(owners), None) or (meta.get("labels") or {}).get(capi.CLUSTER_NAME_LABEL)
    return [f"{meta.get('namespace')}/{name}"] if name else []


def paused(cluster: CapiCluster | None, meta: ObjectMeta) -> bool:
    """The contract's pausing rule, with the paused annotation honoured on the Cluster too (clusterctl move and
    users pause a whole Cluster either way): nothing is done to a paused object."""
    return capi.is_paused(cluster, meta) or (cluster is not None
                                             and capi.PAUSED_ANNOTATION in cluster.metadata.annotations)


def owner_name(meta: ObjectMeta, kind: str) -> str | None:
    """The name of `meta`'s owner of `kind` in Cluster API's group (any version: the contract names a version by its
    label, and an owner reference keeps the one it was written with)."""
    for ref in meta.owner_references:
        if ref.kind == kind and ref.api_version.partition("/")[0] == capi.GROUP:
            return ref.name
    return None


def capi_machine_of(machines: Store, meta: ObjectMeta) -> CapiMachine | None:
    name = owner_name(meta, capi.MACHINE_KIND)
    obj = machines.get(f"{meta.namespace}/{name}") if name else None
    return CapiMachine.from_dict(obj) if obj is not None else None


def capi_cluster(clusters: Store, namespace: str, name: str) -> CapiCluster | None:
    obj = clusters.get(f"{namespace}/{name}") if name else None
    return CapiCluster.from_dict(obj) if obj is not None else None


def ovirt_cluster_of(ovirt_clusters: Store, cluster: CapiCluster) -> OvirtCluster | None:
    ref = cluster.spec.infrastructure_ref
    if ref.kind != infrastructure.OVIRT_CLUSTER_KIND or not ref.name:
        return None
    obj = ovirt_clusters.get(f"{cluster.metadata.namespace}/{ref.name}")
    return OvirtCluster.from_dict(obj) if obj is not None else None
