"""machine.openshift.io/v1beta1 Machine (docs/compatibility.md#object-shapes)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Mapping

from api import keys
from api._codec import JSONObject
from api._fields import prop
from api.crd_info import AGE_COLUMN_PATH, CRDInfo, PrinterColumn
from api.meta import (
    Condition,
    ConditionSeverity,
    ConditionStatus,
    EmbeddedObjectMeta,
    KubeObject,
    NodeAddress,
    ObjectMeta,
    ObjectReference,
    Taint,
    false_condition,
    get_condition,
    set_condition,
)


class MachinePhase(StrEnum):
    """The only phases MAO ever writes; an empty phase means "never reconciled"
    (docs/compatibility.md#machine-phases)."""

    PROVISIONING = "Provisioning"
    PROVISIONED = "Provisioned"
    RUNNING = "Running"
    DELETING = "Deleting"
    FAILED = "Failed"


class MachineErrorReason(StrEnum):
    """Machine.status.errorReason values (docs/compatibility.md#object-shapes)."""

    INVALID_CONFIGURATION = "InvalidConfiguration"
    UNSUPPORTED_CHANGE = "UnsupportedChange"
    INSUFFICIENT_RESOURCES = "InsufficientResources"
    CREATE_ERROR = "CreateError"
    UPDATE_ERROR = "UpdateError"
    DELETE_ERROR = "DeleteError"
    JOIN_CLUSTER_TIMEOUT = "JoinClusterTimeoutError"
    IP_ADDRESS_INVALID = "IPAddressInvalid"


class MachineConditionType(StrEnum):
    INSTANCE_EXISTS = "InstanceExists"
    # This project's own: the instance exists but the cloud refuses to run it (e.g. no host can take it).
    INSTANCE_RUNNING = "InstanceRunning"
    DRAINED = "Drained"
    DRAINABLE = "Drainable"
    TERMINABLE = "Terminable"
    # True while another API's controllers own the object (docs/compatibility.md#authoritativeapi).
    PAUSED = "Paused"


class MachineConditionReason(StrEnum):
    ERROR_CHECKING_PROVIDER = "ErrorCheckingProvider"
    INSTANCE_MISSING = "InstanceMissing"
    INSTANCE_NOT_CREATED = "InstanceNotCreated"
    HOOK_PRESENT = "HookPresent"
    DRAIN_ERROR = "DrainError"
    START_REFUSED = "StartRefused"
    # The Machine named an instance that is not its own (docs/architecture.md#acting-only-on-what-is-ours).
    INSTANCE_NOT_OWNED = "InstanceNotOwned"
    # Deleting: the cloud cannot tell whether the instance is off, so nothing is sent to it yet.
    INSTANCE_STATE_UNKNOWN = "InstanceStateUnknown"
    # The Paused condition's reasons, MAO's (docs/compatibility.md#authoritativeapi).
    AUTHORITATIVE_API_NOT_MACHINE_API = "AuthoritativeAPINotMachineAPI"
    AUTHORITATIVE_API_MACHINE_API = "AuthoritativeAPIMachineAPI"


class MachineAuthority(StrEnum):
    """Which API's controllers act on a Machine or MachineSet: `spec.authoritativeAPI` is what the user asks for,
    `status.authoritativeAPI` what the migration controller has handed over (`Migrating`: under way, status only)
    (docs/compatibility.md#authoritativeapi)."""

    MACHINE_API = "MachineAPI"
    CLUSTER_API = "ClusterAPI"
    MIGRATING = "Migrating"


_SPEC_AUTHORITIES = [MachineAuthority.MACHINE_API.value, MachineAuthority.CLUSTER_API.value]
_STATUS_AUTHORITIES = [a.value for a in MachineAuthority]
# openshift/api's rules for the fields, so that a hand-over done here is refused where OpenShift refuses it.
AUTHORITATIVE_API_SPEC_SCHEMA: dict[str, Any] = {"enum": _SPEC_AUTHORITIES, "default": "MachineAPI"}
AUTHORITATIVE_API_STATUS_SCHEMA: dict[str, Any] = {
    "enum": _STATUS_AUTHORITIES,
    "x-kubernetes-validations": [{
        "rule": "self == 'Migrating' || self == oldSelf || oldSelf == 'Migrating'",
        "message": "The authoritativeAPI field must not transition directly from MachineAPI to ClusterAPI or vice "
                   "versa. It must transition through Migrating.",
    }],
}
SYNCHRONIZED_API_SCHEMA: dict[str, Any] = {"enum": _SPEC_AUTHORITIES}
SYNCHRONIZED_GENERATION_SCHEMA: dict[str, Any] = {"format": "int64", "minimum": 0}
MIGRATION_STATUS_RULES: dict[str, Any] = {"x-kubernetes-validations": [
    {
        "rule": "!has(oldSelf.synchronizedGeneration) || (has(self.synchronizedGeneration) && "
                "self.synchronizedGeneration >= oldSelf.synchronizedGeneration) || "
                "(oldSelf.authoritativeAPI == 'Migrating' && self.authoritativeAPI != 'Migrating')",
        "message": "synchronizedGeneration must not decrease unless authoritativeAPI is transitioning from Migrating "
                   "to another value",
        "fieldPath": ".synchronizedGeneration",
        "reason": "FieldValueInvalid",
    },
    {"rule": "has(self.authoritativeAPI) || !has(oldSelf.authoritativeAPI)",
     "message": "authoritativeAPI may not be removed once set"},
]}


def owned_by_machine_api(obj: Mapping[str, Any]) -> bool:
    """Whether the Machine API's controllers act on this Machine or MachineSet (a raw object): the API its
    `status.authoritativeAPI` names; while that is empty, its `spec.authoritativeAPI`; neither set, the Machine API,
    as before the field existed (docs/compatibility.md#authoritativeapi)."""
    status = (obj.get("status") or {}).get("authoritativeAPI")
    spec = (obj.get("spec") or {}).get("authoritativeAPI")
    return (status or spec or MachineAuthority.MACHINE_API) == MachineAuthority.MACHINE_API


@dataclass(frozen=True)
class Authority:
    """What a Machine API controller does with an object, from its authoritativeAPI (`decide_authority`)."""

    machine_api: bool  # the Machine API's controllers act on the object; False: it is left alone
    status: dict[str, Any] | None = None  # written to the object's status first; None: nothing to write
    problem: str | None = None  # a value no API owns, with its field path


def decide_authority(spec_api: str, status_api: str, conditions: list[Condition], at: dt.datetime) -> Authority:
    """MAO's check at the start of each pass (docs/compatibility.md#authoritativeapi). An empty status takes the
    spec's value when it hands the object to Cluster API (a Machine created by a MachineSet whose template says
    `ClusterAPI`, as MAO copies it); an object whose spec says `MachineAPI` or nothing is reconciled as before,
    without a write. Then, as MAO: `ClusterAPI` or `Migrating` writes `Paused=True` (reason
    `AuthoritativeAPINotMachineAPI`) and the object is left alone; `MachineAPI` writes `Paused=False` (reason
    `AuthoritativeAPIMachineAPI`, severity Info) and the pass goes on. Each is written once; an unknown value is
    left alone with a problem to tell (the CRD's enum refuses it, an older CRD without the enum may not)."""
    copied: dict[str, Any] = {}
    field, value = "status.authoritativeAPI", status_api
    if not status_api:
        if spec_api in ("", MachineAuthority.MACHINE_API):
            return Authority(machine_api=True)
        field, value = "spec.authoritativeAPI", spec_api
        copied = {"authoritativeAPI": spec_api}
    if value not in _STATUS_AUTHORITIES:
        return Authority(machine_api=False, problem=(
            f"{field}: Unsupported value: {value!r}: supported values: {', '.join(_STATUS_AUTHORITIES)}; the "
            "Machine API's controllers leave the object alone"))
    message = f"The AuthoritativeAPI status is set to '{value}'"
    if value == MachineAuthority.MACHINE_API:
        want = false_condition(MachineConditionType.PAUSED, MachineConditionReason.AUTHORITATIVE_API_MACHINE_API,
                               ConditionSeverity.INFO, message)
    else:
        want = Condition(type=MachineConditionType.PAUSED, status=ConditionStatus.TRUE,
                         reason=MachineConditionReason.AUTHORITATIVE_API_NOT_MACHINE_API, message=message)
    machine_api = value == MachineAuthority.MACHINE_API
    current = get_condition(conditions, MachineConditionType.PAUSED)
    if not copied and current is not None and current.same_state(want):
        return Authority(machine_api=machine_api)
    merged = set_condition(conditions, want, at=at)
    return Authority(machine_api=machine_api, status={**copied, "conditions": [c.to_dict() for c in merged]})


# A lifecycle hook name: CamelCase, optionally prefixed by a DNS subdomain and "/" (openshift/api).
LIFECYCLE_HOOK_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


@dataclass
class LifecycleHook(JSONObject):
    """A named hook that blocks drain (preDrain) or instance deletion (preTerminate) while present."""

    name: str = prop(
        "name",
        default="",
        required=True,
        doc="Unique hook name in CamelCase, optionally prefixed like foo.example.com/CamelCase.",
        schema={"minLength": 3, "maxLength": 256, "pattern": LIFECYCLE_HOOK_NAME_PATTERN},
    )
    owner: str = prop(
        "owner",
        default="",
        required=True,
        doc="Who is responsible for the hook, e.g. clusteroperator/etcd.",
        schema={"minLength": 3, "maxLength": 512},
    )


_HOOK_LIST = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}


@dataclass
class LifecycleHooks(JSONObject):
    pre_drain: list[LifecycleHook] = prop(
        "preDrain", default_factory=list, doc="Hooks that prevent the machine from being drained.", schema=_HOOK_LIST
    )
    pre_terminate: list[LifecycleHook] = prop(
        "preTerminate",
        default_factory=list,
        doc="Hooks that prevent the instance from being deleted; actioned after drain.",
        schema=_HOOK_LIST,
    )


@dataclass
class ProviderSpec(JSONObject):
    # Raw provider configuration (RawExtension); for oVirt an OvirtMachineProviderSpec, parsed and validated by
    # api.provider_spec / api.validation, never by the API server (docs/compatibility.md#provider-spec).
    value: dict[str, Any] | None = prop(
        "value",
        default=None,
        doc="Provider-specific configuration, for oVirt an OvirtMachineProviderSpec.",
        schema={"x-kubernetes-preserve-unknown-fields": True},
    )


@dataclass
class MachineSpec(JSONObject):
    """Desired state of a Machine."""

    metadata: EmbeddedObjectMeta = prop(
        "metadata",
        default_factory=EmbeddedObjectMeta,
        doc="Labels and annotations that nodelink copies onto the Node.",
    )
    lifecycle_hooks: LifecycleHooks = prop(
        "lifecycleHooks", default_factory=LifecycleHooks, doc="Hooks pausing drain or termination."
    )
    taints: list[Taint] = prop(
        "taints",
        default_factory=list,
        doc="Taints added to the Node (never removed by the controller).",
        schema={"x-kubernetes-list-type": "atomic"},
    )
    provider_spec: ProviderSpec = prop(
        "providerSpec", default_factory=ProviderSpec, doc="Provider-specific configuration of the instance."
    )
    provider_id: str | None = prop(
        "providerID", default=None, doc="Provider ID of the instance; must equal the Node's spec.providerID."
    )
    authoritative_api: str = prop(
        "authoritativeAPI",
        default="",
        doc="The API whose controllers should manage this machine: MachineAPI or ClusterAPI; the hand-over is "
        "done when status.authoritativeAPI says the same.",
        schema=AUTHORITATIVE_API_SPEC_SCHEMA,
    )


@dataclass
class LastOperation(JSONObject):
    description: str | None = prop("description", default=None, doc="Human readable description.")
    last_updated: str | None = prop(
        "lastUpdated", default=None, doc="When the operation was last updated.", schema={"format": "date-time"}
    )
    state: str | None = prop("state", default=None, doc="State of the operation, e.g. Processing.")
    type: str | None = prop("type", default=None, doc="Type of the operation, e.g. Create.")


CONDITIONS_LIST_MAP = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


@dataclass
class MigrationStatus(JSONObject):
    """The status fields of the Machine API → Cluster API migration, on Machines and MachineSets alike: which API's
    controllers manage the object, written by the migration controller (docs/compatibility.md#authoritativeapi)."""

    __schema__: ClassVar[dict[str, Any]] = MIGRATION_STATUS_RULES

    authoritative_api: str = prop(
        "authoritativeAPI",
        default="",
        doc="The API whose controllers manage this resource: MachineAPI, ClusterAPI, or Migrating while the "
        "migration controller hands it over; empty: MachineAPI.",
        schema=AUTHORITATIVE_API_STATUS_SCHEMA,
    )
    synchronized_api: str = prop(
        "synchronizedAPI", default="", doc="The last stable value of authoritativeAPI (migration controller).",
        schema=SYNCHRONIZED_API_SCHEMA,
    )
    synchronized_generation: int = prop(
        "synchronizedGeneration",
        default=0,
        doc="The generation of the authoritative resource this one is synchronised with (sync controller).",
        schema=SYNCHRONIZED_GENERATION_SCHEMA,
    )


@dataclass
class MachineStatus(MigrationStatus):
    """Observed state of a Machine."""

    node_ref: ObjectReference | None = prop("nodeRef", default=None, doc="The Node of this machine, once linked.")
    last_updated: str | None = prop(
        "lastUpdated", default=None, doc="When the status was last observed.", schema={"format": "date-time"}
    )
    error_reason: str | None = prop(
        "errorReason", default=None, doc="Machine-readable reason of a terminal problem."
    )
    error_message: str | None = prop(
        "errorMessage", default=None, doc="Human-readable description of a terminal problem."
    )
    provider_status: dict[str, Any] | None = prop(
        "providerStatus",
        default=None,
        doc="Provider-specific status, for oVirt an OvirtMachineProviderStatus.",
        schema={"x-kubernetes-preserve-unknown-fields": True},
    )
    addresses: list[NodeAddress] = prop(
        "addresses",
        default_factory=list,
        doc="Addresses of the instance.",
        schema={"x-kubernetes-list-type": "atomic"},
    )
    last_operation: LastOperation | None = prop(
        "lastOperation", default=None, doc="The last operation performed (not used by the controllers)."
    )
    phase: str | None = prop(
        "phase", default=None, doc="One of Provisioning, Provisioned, Running, Deleting, Failed."
    )
    conditions: list[Condition] = prop(
        "conditions", default_factory=list, doc="Current state of the Machine.", schema=CONDITIONS_LIST_MAP
    )


def _label_column(name: str, key: str, description: str) -> PrinterColumn:
    return PrinterColumn(name, "string", keys.jsonpath_for("labels", key), description)


@dataclass
class Machine(KubeObject):
    """A single instance (oVirt VM) that should become a Node."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind="Machine",
        plural="machines",
        description="Machine is an instance that should join the cluster as a Node.",
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Phase of machine"),
            _label_column("Type", keys.LABEL_INSTANCE_TYPE, "Type of instance"),
            _label_column("Region", keys.LABEL_REGION, "Region associated with machine"),
            _label_column("Zone", keys.LABEL_ZONE, "Zone associated with machine"),
            PrinterColumn("Age", "date", AGE_COLUMN_PATH, "Machine age"),
            PrinterColumn("Node", "string", ".status.nodeRef.name", "Node associated with machine", priority=1),
            PrinterColumn(
                "ProviderID", "string", ".spec.providerID", "Provider ID of machine created in cloud provider", 1
            ),
            PrinterColumn(
                "State",
                "string",
                keys.jsonpath_for("annotations", keys.ANNOTATION_INSTANCE_STATE),
                "State of instance",
                priority=1,
            ),
        ),
    )

    api_version: str = prop("apiVersion", default=keys.API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default="Machine", doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: MachineSpec = prop("spec", default_factory=MachineSpec, doc="Desired state of the machine.")
    status: MachineStatus = prop("status", default_factory=MachineStatus, doc="Observed state of the machine.")

    @property
    def cluster_id(self) -> str:
        """The infra ID label the machine controller requires (docs/compatibility.md#machine-phases)."""
        return self.metadata.labels.get(keys.LABEL_CLUSTER, "")
