"""OvirtCluster, OvirtMachine, OvirtMachineTemplate (`infrastructure.cluster.x-k8s.io/v1alpha1`): the upstream
Cluster API front end of the oVirt actuator, implementing Cluster API's InfraCluster and InfraMachine contract
(version v1beta2).

v1alpha1 says what it is: an alpha API that may still change. Every CRD carries the contract label
`cluster.x-k8s.io/v1beta2: v1alpha1`, by which Cluster API's controllers find the version to read.

`OvirtMachine.spec` is the oVirt provider spec's VM settings (api/provider_spec.py VMSpec: the same snake_case keys,
the same validation, api/validation.py `validate_vm_spec`), without the two Secret references of the Machine API
(Cluster API gives the bootstrap data, the OvirtCluster names the engine's credentials) and with `providerID`.
`to_provider_spec` turns it back into a Machine API provider spec, so one actuator serves both front ends.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar, Mapping

from api._codec import JSONObject
from api._fields import prop
from api.capi import CLUSTER_NAME_LABEL, APIEndpoint, FailureDomain
from api.crd_info import AGE_COLUMN_PATH, CRDInfo, PrinterColumn
from api.field_errors import FieldError, InvalidProviderSpec
from api.ids import NOT_AN_OVIRT_ID, OVIRT_ID_PATTERN, PROVIDER_ID_PREFIX, vm_id_from_provider_id
from api.keys import jsonpath_for
from api.machine import CONDITIONS_LIST_MAP
from api.meta import ConditionStatus, KubeObject, LocalObjectReference, NodeAddress, ObjectMeta, format_time, now
from api.provider_spec import OvirtMachineProviderSpec, VMSpec, decode_spec, vm_fields
from api.validation import validate_vm_spec

GROUP = "infrastructure.cluster.x-k8s.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
# The Cluster API contract these kinds implement, and the label (on each CRD) mapping it to their versions.
CONTRACT_VERSION = "v1beta2"
CONTRACT_LABEL = f"cluster.x-k8s.io/{CONTRACT_VERSION}"
CRD_LABELS = ((CONTRACT_LABEL, VERSION),)
# `kubectl get cluster-api` lists them with Cluster API's own kinds.
CATEGORIES = ("cluster-api",)

OVIRT_CLUSTER_KIND = "OvirtCluster"
OVIRT_MACHINE_KIND = "OvirtMachine"
OVIRT_MACHINE_TEMPLATE_KIND = "OvirtMachineTemplate"
CLUSTER_FINALIZER = f"ovirtcluster.{GROUP}"
MACHINE_FINALIZER = f"ovirtmachine.{GROUP}"

# What a providerID set in an OvirtMachine's spec must be (the admission policy says the same).
PROVIDER_ID_FORM = f"must be {PROVIDER_ID_PREFIX}<VM id>; the VM id {NOT_AN_OVIRT_ID}"

# Where an OvirtMachine and an OvirtMachineTemplate hold the VM settings: the prefix of their FieldError paths.
MACHINE_SPEC_PATH = "spec"
TEMPLATE_SPEC_PATH = "spec.template.spec"

# The keys of the Secret an OvirtCluster's identityRef names (one engine per OvirtCluster). `insecure` is parsed as
# the Machine API secret's ovirt_insecure is (machine_controller/ovirt/credentials.py).
IDENTITY_URL_KEY = "url"
IDENTITY_USERNAME_KEY = "username"
IDENTITY_PASSWORD_KEY = "password"
IDENTITY_CA_KEY = "ca.crt"
IDENTITY_INSECURE_KEY = "insecure"


class ConditionType(StrEnum):
    READY = "Ready"  # mirrored by Cluster API into the Machine's InfrastructureReady / the Cluster's
    INSTANCE_PROVISIONED = "InstanceProvisioned"  # OvirtMachine: the VM exists and was started
    PAUSED = "Paused"  # the contract's pausing rule: surfaced while the object or its Cluster is paused


# --- shared pieces ---------------------------------------------------------------------------------------------


@dataclass
class StatusCondition(JSONObject):
    """A metav1.Condition, the condition type of Cluster API's v1beta2 contract (no severity)."""

    type: str = prop("type", default="", required=True, doc="Type of condition in CamelCase.",
                     schema={"maxLength": 316})
    status: str = prop("status", default="", required=True, doc="One of True, False, Unknown.",
                       schema={"enum": [s.value for s in ConditionStatus]})
    observed_generation: int = prop("observedGeneration", default=0,
                                    doc="The object's metadata.generation the condition was set from.",
                                    schema={"minimum": 0})
    last_transition_time: str = prop("lastTransitionTime", default="", required=True,
                                     doc="When the condition's status last changed.", schema={"format": "date-time"})
    reason: str = prop("reason", default="", omitempty=False, required=True,
                       doc="Why the condition is in this status, in CamelCase.", schema={"maxLength": 1024})
    message: str = prop("message", default="", omitempty=False, required=True,
                        doc="Human-readable details.", schema={"maxLength": 32768})


def set_status_condition(conditions: list[StatusCondition], condition: StatusCondition,
                         at: _dt.datetime | None = None) -> list[StatusCondition]:
    """`conditions` with `condition` set, as apimachinery's meta.SetStatusCondition does: lastTransitionTime
    changes only when the status does. The input list is not modified; the order of the others is kept."""
    existing = next((c for c in conditions if c.type == condition.type), None)
    if existing is not None and existing.status == condition.status and existing.last_transition_time:
        stamped = replace(condition, last_transition_time=existing.last_transition_time)
    else:
        stamped = replace(condition, last_transition_time=format_time(at or now()))
    if existing is None:
        return [*conditions, stamped]
    return [stamped if c.type == condition.type else c for c in conditions]


def get_status_condition(conditions: list[StatusCondition], type_: str) -> StatusCondition | None:
    return next((c for c in conditions if c.type == type_), None)


@dataclass
class Initialization(JSONObject):
    """The contract's initialization status."""

    provisioned: bool | None = prop(
        "provisioned", default=None,
        doc="True once the infrastructure is fully provisioned; Cluster API waits for it (the contract's "
            "initialization completed rule).")


_ID_SCHEMA = {"pattern": OVIRT_ID_PATTERN}
_LIST_MAP_BY_NAME = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}


def _cluster_column() -> PrinterColumn:
    return PrinterColumn("Cluster", "string", jsonpath_for("labels", CLUSTER_NAME_LABEL),
                         "The Cluster API Cluster this object belongs to")


def _condition_column(name: str, type_: str, description: str, priority: int = 0) -> PrinterColumn:
    return PrinterColumn(name, "string", f'.status.conditions[?(@.type=="{type_}")].status', description, priority)


def _age_column(kind: str) -> PrinterColumn:
    return PrinterColumn("Age", "date", AGE_COLUMN_PATH, f"Time since the {kind} was created")


# --- OvirtCluster ----------------------------------------------------------------------------------------------


@dataclass
class IdentityReference(JSONObject):
    """The Secret, in the OvirtCluster's namespace, holding the engine's url, username, password and ca.crt (or
    insecure)."""

    name: str = prop("name", default="", required=True, doc="Name of the Secret.",
                     schema={"minLength": 1, "maxLength": 253})


@dataclass
class OvirtFailureDomainSpec(JSONObject):
    """An oVirt cluster offered to Cluster API as a failure domain."""

    name: str = prop("name", default="", required=True, doc="Name of the failure domain, as Machines name it.",
                     schema={"minLength": 1, "maxLength": 256})
    cluster_id: str = prop("clusterId", default="", required=True,
                           doc="ID of the oVirt cluster the failure domain's VMs are created in.", schema=_ID_SCHEMA)
    control_plane: bool | None = prop("controlPlane", default=None,
                                      doc="Whether control-plane Machines may be placed here.")


@dataclass
class OvirtClusterSpec(JSONObject):
    control_plane_endpoint: APIEndpoint = prop(
        "controlPlaneEndpoint", default_factory=APIEndpoint,
        doc="The endpoint of the Cluster's API server (given by the user or a control plane provider).")
    identity_ref: IdentityReference = prop(
        "identityRef", default_factory=IdentityReference, required=True,
        doc="The Secret naming the oVirt engine and its credentials: one engine per OvirtCluster, so one controller "
            "serves Clusters on several engines.")
    cluster_id: str = prop("clusterId", default="",
                           doc="ID of the oVirt cluster this Cluster's VMs go to by default; checked to exist.",
                           schema=_ID_SCHEMA)
    failure_domains: list[OvirtFailureDomainSpec] = prop(
        "failureDomains", default_factory=list,
        doc="oVirt clusters offered as failure domains; a Machine's spec.failureDomain chooses one.",
        schema=_LIST_MAP_BY_NAME)


@dataclass
class OvirtClusterStatus(JSONObject):
    initialization: Initialization = prop("initialization", default_factory=Initialization,
                                          doc="The contract's initialization status.")
    failure_domains: list[FailureDomain] = prop("failureDomains", default_factory=list,
                                                doc="The failure domains found on the engine.",
                                                schema=_LIST_MAP_BY_NAME)
    conditions: list[StatusCondition] = prop("conditions", default_factory=list,
                                             doc="Current state of the OvirtCluster (Ready).",
                                             schema=CONDITIONS_LIST_MAP)


@dataclass
class OvirtCluster(KubeObject):
    """The oVirt engine and cluster a Cluster API Cluster's VMs are created in."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind=OVIRT_CLUSTER_KIND,
        plural="ovirtclusters",
        description="OvirtCluster is the oVirt infrastructure of a Cluster API Cluster: the engine, its credentials "
                    "and the oVirt clusters its VMs are created in.",
        group=GROUP,
        version=VERSION,
        labels=CRD_LABELS,
        categories=CATEGORIES,
        printer_columns=(
            _cluster_column(),
            PrinterColumn("Provisioned", "boolean", ".status.initialization.provisioned",
                          "Whether the engine objects it names were found"),
            _condition_column("Ready", ConditionType.READY, "Ready condition"),
            PrinterColumn("Endpoint", "string", ".spec.controlPlaneEndpoint.host", "Control plane endpoint",
                          priority=1),
            _age_column(OVIRT_CLUSTER_KIND),
        ),
    )

    api_version: str = prop("apiVersion", default=API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default=OVIRT_CLUSTER_KIND, doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: OvirtClusterSpec = prop("spec", default_factory=OvirtClusterSpec, doc="Desired state.")
    status: OvirtClusterStatus = prop("status", default_factory=OvirtClusterStatus, doc="Observed state.")


# --- OvirtMachine ----------------------------------------------------------------------------------------------


@dataclass
class OvirtMachineSpec(VMSpec):
    """The VM of a Cluster API Machine: the oVirt provider spec's VM settings (the same keys, defaults and rules),
    and its providerID."""

    provider_id: str = prop(
        "providerID", default="",
        doc=f"{PROVIDER_ID_PREFIX}<VM id>, set by the controller once the VM exists; equals the Node's.",
        schema={"minLength": 1, "maxLength": 512})


@dataclass
class OvirtMachineStatus(JSONObject):
    initialization: Initialization = prop("initialization", default_factory=Initialization,
                                          doc="The contract's initialization status.")
    addresses: list[NodeAddress] = prop("addresses", default_factory=list,
                                        doc="Addresses of the VM its guest agent reports.",
                                        schema={"x-kubernetes-list-type": "atomic"})
    failure_domain: str = prop("failureDomain", default="", doc="The failure domain the VM was placed in.",
                               schema={"minLength": 1, "maxLength": 256})
    conditions: list[StatusCondition] = prop("conditions", default_factory=list,
                                             doc="Current state (Ready, InstanceProvisioned, Paused).",
                                             schema=CONDITIONS_LIST_MAP)
    instance_id: str = prop("instanceId", default="",
                            doc="ID of the VM, recorded as soon as it is known and before anything else is done with "
                                "it: creation resumes with this VM and never makes a second one.",
                            schema=_ID_SCHEMA)
    instance_state: str = prop("instanceState", default="", doc="The VM's state as the engine reports it.")


@dataclass
class OvirtMachine(KubeObject):
    """An oVirt VM for a Cluster API Machine."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind=OVIRT_MACHINE_KIND,
        plural="ovirtmachines",
        description="OvirtMachine is the oVirt VM of a Cluster API Machine.",
        group=GROUP,
        version=VERSION,
        labels=CRD_LABELS,
        categories=CATEGORIES,
        printer_columns=(
            _cluster_column(),
            PrinterColumn("Provisioned", "boolean", ".status.initialization.provisioned",
                          "Whether the VM was created and started"),
            PrinterColumn("State", "string", ".status.instanceState", "The VM's state"),
            PrinterColumn("ProviderID", "string", ".spec.providerID", "The VM's provider ID"),
            PrinterColumn("Machine", "string", '.metadata.ownerReferences[?(@.kind=="Machine")].name',
                          "The Cluster API Machine of this VM", priority=1),
            _condition_column("Ready", ConditionType.READY, "Ready condition", priority=1),
            _age_column(OVIRT_MACHINE_KIND),
        ),
    )

    api_version: str = prop("apiVersion", default=API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default=OVIRT_MACHINE_KIND, doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: OvirtMachineSpec = prop("spec", default_factory=OvirtMachineSpec, doc="The VM.")
    status: OvirtMachineStatus = prop("status", default_factory=OvirtMachineStatus, doc="Observed state.")


# --- OvirtMachineTemplate --------------------------------------------------------------------------------------


@dataclass
class TemplateObjectMeta(JSONObject):
    """Labels and annotations given to the OvirtMachines made from the template (clusterv1 ObjectMeta)."""

    labels: dict[str, str] = prop("labels", default_factory=dict, doc="Labels to apply.")
    annotations: dict[str, str] = prop("annotations", default_factory=dict, doc="Annotations to apply.")


@dataclass
class OvirtMachineTemplateResource(JSONObject):
    metadata: TemplateObjectMeta = prop("metadata", default_factory=TemplateObjectMeta,
                                        doc="Metadata of the OvirtMachines made from the template.")
    spec: OvirtMachineSpec = prop(
        "spec", default_factory=OvirtMachineSpec, required=True,
        doc="The spec of each OvirtMachine made from the template. Treat it as immutable: Cluster API rolls "
            "Machines out only when a MachineDeployment names a new template, so an edit here changes no VM that "
            "exists (and only some new ones); create a new OvirtMachineTemplate instead.")


@dataclass
class OvirtMachineTemplateSpec(JSONObject):
    template: OvirtMachineTemplateResource = prop(
        "template", default_factory=OvirtMachineTemplateResource, required=True,
        doc="The OvirtMachine to create for each Machine.")


class Architecture(StrEnum):
    AMD64 = "amd64"
    ARM64 = "arm64"
    S390X = "s390x"
    PPC64LE = "ppc64le"


@dataclass
class NodeInfo(JSONObject):
    """What the Nodes of the template's VMs run, for autoscaling from zero."""

    architecture: str = prop("architecture", default="", doc="CPU architecture of the Node.",
                             schema={"enum": [a.value for a in Architecture]})
    operating_system: str = prop("operatingSystem", default="", doc="Operating system of the Node, e.g. linux.")


@dataclass
class OvirtMachineTemplateStatus(JSONObject):
    capacity: dict[str, int | str] = prop(
        "capacity", default_factory=dict,
        doc="Resources of one VM made from the template (cpu, memory) as quantities, from spec.template.spec (absent "
            "with an oVirt instance type): the cluster autoscaler scales a MachineDeployment up from zero with it.")
    node_info: NodeInfo | None = prop("nodeInfo", default=None, doc="Architecture and OS of the Nodes.")


@dataclass
class OvirtMachineTemplate(KubeObject):
    """The OvirtMachine that Cluster API creates for each Machine of a MachineDeployment or MachineSet."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind=OVIRT_MACHINE_TEMPLATE_KIND,
        plural="ovirtmachinetemplates",
        description="OvirtMachineTemplate is the OvirtMachine Cluster API creates for each Machine of a "
                    "MachineDeployment or MachineSet.",
        group=GROUP,
        version=VERSION,
        labels=CRD_LABELS,
        categories=CATEGORIES,
        printer_columns=(
            _cluster_column(),
            PrinterColumn("Template", "string", ".spec.template.spec.template_name", "The oVirt template of the VMs"),
            PrinterColumn("CPU", "string", ".status.capacity.cpu", "vCPUs of one VM"),
            PrinterColumn("Memory", "string", ".status.capacity.memory", "Memory of one VM"),
            _age_column(OVIRT_MACHINE_TEMPLATE_KIND),
        ),
    )

    api_version: str = prop("apiVersion", default=API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default=OVIRT_MACHINE_TEMPLATE_KIND, doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: OvirtMachineTemplateSpec = prop("spec", default_factory=OvirtMachineTemplateSpec,
                                          doc="The OvirtMachine to create.")
    status: OvirtMachineTemplateStatus = prop("status", default_factory=OvirtMachineTemplateStatus,
                                              doc="Observed state.")


# --- parsing and validation ------------------------------------------------------------------------------------


def validate_ovirt_machine_spec(spec: OvirtMachineSpec, base: str = MACHINE_SPEC_PATH) -> list[FieldError]:
    """Every problem of `spec`: the provider spec's VM rules, in its words, at `base.<key>`; then providerID."""
    errors = validate_vm_spec(spec, base)
    if spec.provider_id and vm_id_from_provider_id(spec.provider_id) is None:
        # A providerID not of our form names no VM of ours: acting on it would act on a guess
        # (docs/architecture.md#acting-only-on-what-is-ours).
        errors.append(FieldError(f"{base}.providerID", f'Invalid value: "{spec.provider_id}": {PROVIDER_ID_FORM}'))
    return errors


def load_ovirt_machine_spec(raw: Mapping[str, Any] | None, base: str = MACHINE_SPEC_PATH) -> OvirtMachineSpec:
    """Parse and validate an OvirtMachine's `spec` (or a template's `spec.template.spec`, with that `base`);
    raises InvalidProviderSpec carrying every problem, each naming its `spec.<key>` path."""
    spec = decode_spec(OvirtMachineSpec, raw, base)
    errors = validate_ovirt_machine_spec(spec, base)
    if errors:
        raise InvalidProviderSpec(errors)
    return spec


def to_provider_spec(spec: OvirtMachineSpec, user_data_secret: str) -> dict[str, Any]:
    """The Machine API providerSpec value with the same VM settings, whose user data is the Secret
    `user_data_secret`: what drives the oVirt actuator for an OvirtMachine."""
    provider_spec = OvirtMachineProviderSpec(**vm_fields(spec),
                                             user_data_secret=LocalObjectReference(name=user_data_secret))
    return provider_spec.to_dict()
