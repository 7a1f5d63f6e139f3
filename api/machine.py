"""machine.openshift.io/v1beta1 Machine (docs/compatibility.md#object-shapes)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from api import keys
from api._codec import JSONObject
from api._fields import prop
from api.crd_info import AGE_COLUMN_PATH, CRDInfo, PrinterColumn
from api.meta import (
    Condition,
    EmbeddedObjectMeta,
    KubeObject,
    NodeAddress,
    ObjectMeta,
    ObjectReference,
    Taint,
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
class MachineStatus(JSONObject):
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
