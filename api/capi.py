"""The few fields this project reads of upstream Cluster API's own objects (`cluster.x-k8s.io/v1beta2` Cluster and
Machine), as read-only views, and the Cluster API types its infrastructure kinds embed (APIEndpoint, FailureDomain).

Cluster API's core controllers own these objects: the OvirtMachine and OvirtCluster controllers only read them
(which Cluster a Machine belongs to, its bootstrap data Secret, its failure domain, whether the Cluster is paused).
Decoding ignores every other field, as for the Machine API's objects (api/_codec.py). The shapes are those of
Cluster API's v1beta2 Go types (sigs.k8s.io/cluster-api/api/core/v1beta2).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from api import keys
from api._codec import JSONObject
from api._fields import prop
from api.meta import KubeObject, ObjectMeta

GROUP = "cluster.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_KIND = "Cluster"
MACHINE_KIND = "Machine"
MACHINE_SET_KIND = "MachineSet"

# Cluster API marks every control-plane Machine with this label (any value).
CONTROL_PLANE_LABEL = f"{GROUP}/control-plane"
# Set by Cluster API on every object of a Cluster (Machines, and the infrastructure objects it creates).
CLUSTER_NAME_LABEL = f"{GROUP}/cluster-name"
# On any object: its controllers leave it alone (the contract's pausing rule); the Machine API's keys name it too.
PAUSED_ANNOTATION = keys.ANNOTATION_PAUSED
# The ClusterRole label that aggregates a provider's rules into Cluster API's core manager role.
AGGREGATE_TO_MANAGER_LABEL = f"{GROUP}/aggregate-to-manager"

# The bootstrap data Secret a Machine's spec.bootstrap.dataSecretName names: the data under `value`, its kind under
# `format` (cloud-config when absent).
BOOTSTRAP_DATA_KEY = "value"
BOOTSTRAP_FORMAT_KEY = "format"


class BootstrapFormat(StrEnum):
    CLOUD_CONFIG = "cloud-config"
    IGNITION = "ignition"


DEFAULT_BOOTSTRAP_FORMAT = BootstrapFormat.CLOUD_CONFIG


# --- types embedded in this project's infrastructure kinds ---------------------------------------------------


@dataclass
class APIEndpoint(JSONObject):
    """A reachable Kubernetes API endpoint (clusterv1 APIEndpoint)."""

    host: str = prop("host", default="", doc="The hostname on which the API server is serving.",
                     schema={"minLength": 1, "maxLength": 512})
    port: int = prop("port", default=0, doc="The port on which the API server is serving.",
                     schema={"minimum": 1, "maximum": 65535})

    @property
    def is_zero(self) -> bool:
        return not self.host and not self.port


@dataclass
class FailureDomain(JSONObject):
    """A failure domain a Cluster's Machines may be placed in (clusterv1 FailureDomain)."""

    name: str = prop("name", default="", required=True, doc="The name of the failure domain.",
                     schema={"minLength": 1, "maxLength": 256})
    control_plane: bool | None = prop("controlPlane", default=None,
                                      doc="Whether control-plane Machines may be placed in this failure domain.")
    attributes: dict[str, str] = prop("attributes", default_factory=dict,
                                      doc="Free-form attributes of the failure domain.")


# --- read-only views of Cluster API's objects ------------------------------------------------------------------


@dataclass
class ContractVersionedObjectReference(JSONObject):
    """A reference by API group, kind and name; the version comes from the CRD's contract label."""

    api_group: str = prop("apiGroup", default="")
    kind: str = prop("kind", default="")
    name: str = prop("name", default="")


@dataclass
class Bootstrap(JSONObject):
    config_ref: ContractVersionedObjectReference | None = prop("configRef", default=None)
    # Set once the bootstrap data is ready (by the bootstrap provider, or by hand without one).
    data_secret_name: str | None = prop("dataSecretName", default=None)


@dataclass
class CapiMachineSpec(JSONObject):
    cluster_name: str = prop("clusterName", default="")
    bootstrap: Bootstrap = prop("bootstrap", default_factory=Bootstrap)
    infrastructure_ref: ContractVersionedObjectReference = prop(
        "infrastructureRef", default_factory=ContractVersionedObjectReference)
    failure_domain: str = prop("failureDomain", default="")
    provider_id: str = prop("providerID", default="")


@dataclass
class MachineNodeReference(JSONObject):
    name: str = prop("name", default="")


@dataclass
class CapiMachineStatus(JSONObject):
    node_ref: MachineNodeReference | None = prop("nodeRef", default=None)


@dataclass
class CapiMachine(KubeObject):
    """A Cluster API Machine, as far as the OvirtMachine controller reads it."""

    api_version: str = prop("apiVersion", default=API_VERSION)
    kind: str = prop("kind", default=MACHINE_KIND)
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: CapiMachineSpec = prop("spec", default_factory=CapiMachineSpec)
    status: CapiMachineStatus = prop("status", default_factory=CapiMachineStatus)

    @property
    def bootstrap_data_secret(self) -> str | None:
        """The Secret holding the bootstrap data, once the Machine names one."""
        return self.spec.bootstrap.data_secret_name or None


@dataclass
class ClusterInitializationStatus(JSONObject):
    infrastructure_provisioned: bool | None = prop("infrastructureProvisioned", default=None)
    control_plane_initialized: bool | None = prop("controlPlaneInitialized", default=None)


@dataclass
class CapiClusterSpec(JSONObject):
    paused: bool | None = prop("paused", default=None)
    infrastructure_ref: ContractVersionedObjectReference = prop(
        "infrastructureRef", default_factory=ContractVersionedObjectReference)
    control_plane_endpoint: APIEndpoint = prop("controlPlaneEndpoint", default_factory=APIEndpoint)


@dataclass
class CapiClusterStatus(JSONObject):
    initialization: ClusterInitializationStatus = prop("initialization", default_factory=ClusterInitializationStatus)


@dataclass
class CapiCluster(KubeObject):
    """A Cluster API Cluster, as far as the infrastructure controllers read it."""

    api_version: str = prop("apiVersion", default=API_VERSION)
    kind: str = prop("kind", default=CLUSTER_KIND)
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: CapiClusterSpec = prop("spec", default_factory=CapiClusterSpec)
    status: CapiClusterStatus = prop("status", default_factory=CapiClusterStatus)

    @property
    def infrastructure_provisioned(self) -> bool:
        return bool(self.status.initialization.infrastructure_provisioned)


def is_paused(cluster: CapiCluster | None, metadata: ObjectMeta) -> bool:
    """The contract's pausing rule: an object is left alone while its Cluster's spec.paused is true or the object
    itself carries the paused annotation."""
    return bool(cluster is not None and cluster.spec.paused) or PAUSED_ANNOTATION in metadata.annotations


def cluster_name(metadata: ObjectMeta) -> str:
    """The Cluster an object belongs to, by Cluster API's label ("" when it has none)."""
    return metadata.labels.get(CLUSTER_NAME_LABEL, "")

