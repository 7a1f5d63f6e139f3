"""OvirtRemediationTemplate / OvirtRemediation: fencing of an unhealthy worker by power-cycling its oVirt VM
(docs/fencing.md).

A MachineHealthCheck whose `spec.remediationTemplate` names an OvirtRemediationTemplate creates, for each unhealthy
Machine, an OvirtRemediation named after it with `spec` copied from the template's `spec.template.spec` (the shape
OpenShift's MHC, this project's MHC and medik8s' NodeHealthCheck all use). The remediation controller then runs one
power cycle after another until the Node is Ready again, recording each step in `status` so that a restarted
controller resumes exactly where it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from api._codec import JSONObject
from api._fields import prop
from api.crd_info import CRDInfo, PrinterColumn
from api.machine import CONDITIONS_LIST_MAP
from api.meta import Condition, KubeObject, ObjectMeta

GROUP = "remediation.ovirt.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# The NoSchedule taint put on the Node while it is being remediated: nothing new lands on it. NoSchedule, not
# NoExecute, so that no eviction clock starts before the VM is confirmed off
# (docs/fencing.md#the-safety-rules-the-code-keeps).
REMEDIATION_TAINT_KEY = f"{GROUP}/remediation"
# Kubernetes' non-graceful shutdown taint: pods are force-deleted and volumes detached at once. Only ever put on a
# Node whose VM oVirt reports `down`.
OUT_OF_SERVICE_TAINT_KEY = "node.kubernetes.io/out-of-service"
OUT_OF_SERVICE_TAINT_VALUE = "nodeshutdown"
FINALIZER = f"{GROUP}/remediation"
# The label NodeHealthCheck's ClusterRole aggregation selects (rbac.ext-remediation): lets NHC use the template.
NHC_AGGREGATION_LABEL = "rbac.ext-remediation/aggregate-to-ext-remediation"


class StrategyType(StrEnum):
    REBOOT = "Reboot"


class StorageRelease(StrEnum):
    """How the Node's storage is released once its VM is confirmed off (FAR's vocabulary)."""

    OUT_OF_SERVICE_TAINT = "OutOfServiceTaint"
    RESOURCE_DELETION = "ResourceDeletion"


class OnExhaustion(StrEnum):
    DELETE_MACHINE = "DeleteMachine"
    NONE = "None"


class RemediationPhase(StrEnum):
    POWERING_OFF = "PoweringOff"
    RELEASING_STORAGE = "ReleasingStorage"
    POWERING_ON = "PoweringOn"
    WAITING_FOR_NODE = "WaitingForNode"
    SUCCEEDED = "Succeeded"
    SKIPPED = "Skipped"  # the Node was Ready again before the power-off: nothing was touched
    DELETING_MACHINE = "DeletingMachine"
    FAILED = "Failed"


class RemediationConditionType(StrEnum):
    PROCESSING = "Processing"
    POWER_OFF_CONFIRMED = "PowerOffConfirmed"
    SUCCEEDED = "Succeeded"
    PERMANENT_NODE_DELETION_EXPECTED = "PermanentNodeDeletionExpected"


DEFAULT_RETRY_LIMIT = 1
DEFAULT_TIMEOUT_S = 600
DEFAULT_POWER_OFF_TIMEOUT_S = 120
DEFAULT_COOLDOWN_S = 30


@dataclass
class RemediationStrategy(JSONObject):
    type: str = prop("type", default=StrategyType.REBOOT, doc="Reboot: power the VM off and on again.",
                     schema={"enum": [t.value for t in StrategyType], "default": StrategyType.REBOOT.value})
    retry_limit: int = prop("retryLimit", default=DEFAULT_RETRY_LIMIT,
                            doc="Power cycles tried before the remediation gives up (and escalates).",
                            schema={"minimum": 1, "default": DEFAULT_RETRY_LIMIT})
    timeout_seconds: int = prop("timeoutSeconds", default=DEFAULT_TIMEOUT_S,
                                doc="How long to wait, after the VM started, for its Node to be Ready (and, "
                                    "when the engine refuses to start the VM, for it to start; never less than "
                                    "twice the controller's engine request timeout after a start whose answer "
                                    "was lost); the storage release before the power-on does not count.",
                                schema={"minimum": 10, "default": DEFAULT_TIMEOUT_S})


@dataclass
class OvirtRemediationSpec(JSONObject):
    strategy: RemediationStrategy = prop("strategy", default_factory=RemediationStrategy,
                                         doc="What to do with the VM.")
    remediation_strategy: str = prop(
        "remediationStrategy", default=StorageRelease.OUT_OF_SERVICE_TAINT,
        doc="How the Node's pods and volumes are released once the VM is confirmed off.",
        schema={"enum": [s.value for s in StorageRelease], "default": StorageRelease.OUT_OF_SERVICE_TAINT.value})
    power_off_timeout_seconds: int = prop(
        "powerOffTimeoutSeconds", default=DEFAULT_POWER_OFF_TIMEOUT_S,
        doc="How long a stop may take before it is sent again.",
        schema={"minimum": 5, "default": DEFAULT_POWER_OFF_TIMEOUT_S})
    cooldown_seconds: int = prop("cooldownSeconds", default=DEFAULT_COOLDOWN_S,
                                 doc="Pause between two power cycles of the same VM.",
                                 schema={"minimum": 0, "default": DEFAULT_COOLDOWN_S})
    on_exhaustion: str = prop(
        "onExhaustion", default=OnExhaustion.DELETE_MACHINE,
        doc="After the last cycle fails: delete the Machine (only one a MachineSet replaces, never a control-plane "
            "one) or leave it as it is.",
        schema={"enum": [o.value for o in OnExhaustion], "default": OnExhaustion.DELETE_MACHINE.value})


@dataclass
class OvirtRemediationStatus(JSONObject):
    phase: str = prop("phase", default="", doc="Where the remediation is.",
                      schema={"enum": [""] + [p.value for p in RemediationPhase]})
    retry_count: int = prop("retryCount", default=0, doc="Power cycles started so far.", schema={"minimum": 0})
    vm_id: str = prop("vmId", default="", doc="The oVirt VM being power-cycled (from the providerID).")
    node_name: str = prop("nodeName", default="", doc="The Node of the VM.")
    last_remediated: str = prop("lastRemediated", default="", doc="When the current cycle started.",
                                schema={"format": "date-time"})
    power_off_requested: str = prop("powerOffRequested", default="",
                                    doc="When the stop of the current cycle was sent.", schema={"format": "date-time"})
    storage_released: str = prop("storageReleased", default="",
                                 doc="When the Node's storage was released in the current cycle.",
                                 schema={"format": "date-time"})
    powering_on_since: str = prop(
        "poweringOnSince", default="",
        doc="When the current cycle began to power the VM on: a start the engine refuses is sent again, and "
            "strategy.timeoutSeconds for the engine to start the VM runs from here.",
        schema={"format": "date-time"})
    power_on_requested: str = prop("powerOnRequested", default="",
                                   doc="When the start of the current cycle was sent.", schema={"format": "date-time"})
    vm_start_seen: str = prop(
        "vmStartSeen", default="",
        doc="When the VM was seen starting in the current cycle: strategy.timeoutSeconds for its Node runs from "
            "here.", schema={"format": "date-time"})
    power_off_may_land_until: str = prop(
        "powerOffMayLandUntil", default="",
        doc="Until when a stop whose answer was lost (or not yet received) may still reach the engine: the VM is "
            "not started before (docs/fencing.md#requests-whose-answer-was-lost).", schema={"format": "date-time"})
    message: str = prop("message", default="", doc="What the remediation is doing or waiting for.")
    conditions: list[Condition] = prop("conditions", default_factory=list, doc="Current state of the remediation.",
                                       schema=CONDITIONS_LIST_MAP)


@dataclass
class OvirtRemediation(KubeObject):
    """Power-cycles the oVirt VM of an unhealthy Machine until its Node is Ready again."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind="OvirtRemediation",
        plural="ovirtremediations",
        description="OvirtRemediation power-cycles the oVirt VM of an unhealthy Machine until its Node is Ready.",
        group=GROUP,
        version=VERSION,
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Where the remediation is"),
            PrinterColumn("Retries", "integer", ".status.retryCount", "Power cycles started"),
            PrinterColumn("Node", "string", ".status.nodeName", "The Node being remediated"),
        ),
    )

    api_version: str = prop("apiVersion", default=API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default="OvirtRemediation", doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: OvirtRemediationSpec = prop("spec", default_factory=OvirtRemediationSpec, doc="How to remediate.")
    status: OvirtRemediationStatus = prop("status", default_factory=OvirtRemediationStatus,
                                          doc="Observed state of the remediation.")


@dataclass
class OvirtRemediationTemplateResource(JSONObject):
    spec: OvirtRemediationSpec = prop("spec", default_factory=OvirtRemediationSpec,
                                      doc="The spec of the OvirtRemediations made from this template.")


@dataclass
class OvirtRemediationTemplateSpec(JSONObject):
    template: OvirtRemediationTemplateResource = prop(
        "template", default_factory=OvirtRemediationTemplateResource, required=True,
        doc="Copied into each OvirtRemediation a health check creates.")


@dataclass
class OvirtRemediationTemplate(KubeObject):
    """The template a MachineHealthCheck's remediationTemplate names to get VMs power-cycled."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind="OvirtRemediationTemplate",
        plural="ovirtremediationtemplates",
        description="OvirtRemediationTemplate is what a MachineHealthCheck names to get unhealthy VMs power-cycled.",
        group=GROUP,
        version=VERSION,
        has_status=False,
    )

    api_version: str = prop("apiVersion", default=API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default="OvirtRemediationTemplate", doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: OvirtRemediationTemplateSpec = prop("spec", default_factory=OvirtRemediationTemplateSpec,
                                              doc="The remediation to create.")
