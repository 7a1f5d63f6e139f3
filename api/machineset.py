"""machine.openshift.io/v1beta1 MachineSet (docs/compatibility.md#object-shapes)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from api import keys
from api._codec import JSONObject
from api._fields import prop
from api.crd_info import AGE_COLUMN_PATH, CRDInfo, PrinterColumn, ScaleSubresource
from api.machine import AUTHORITATIVE_API_SPEC_SCHEMA, CONDITIONS_LIST_MAP, MachineSpec, MigrationStatus
from api.meta import Condition, EmbeddedObjectMeta, KubeObject, LabelSelector, ObjectMeta

_INT32 = {"format": "int32"}


class DeletePolicy(StrEnum):
    """Scale-down victim ordering (docs/compatibility.md#machinesets). An absent deletePolicy means RANDOM; the CRD enum
    has only these three values, so an explicit empty string is rejected by the API server, as on OpenShift."""

    RANDOM = "Random"
    NEWEST = "Newest"
    OLDEST = "Oldest"


@dataclass
class MachineTemplateSpec(JSONObject):
    """The Machine a MachineSet creates: labels/annotations for the Machine plus its spec."""

    metadata: EmbeddedObjectMeta = prop(
        "metadata", default_factory=EmbeddedObjectMeta, doc="Labels and annotations of created machines."
    )
    spec: MachineSpec = prop("spec", default_factory=MachineSpec, doc="Spec of created machines.")


@dataclass
class MachineSetSpec(JSONObject):
    """Desired state of a MachineSet."""

    replicas: int | None = prop(
        "replicas",
        default=None,
        doc="Number of desired machines; defaults to 1.",
        schema={"default": 1, **_INT32},
    )
    min_ready_seconds: int = prop(
        "minReadySeconds",
        default=0,
        doc="Seconds a machine's node must be Ready before the machine counts as available.",
        schema=_INT32,
    )
    delete_policy: str = prop(
        "deletePolicy",
        default="",
        doc='Which machines to delete first when scaling down: "Random" (the default), "Newest" or "Oldest".',
        schema={"enum": [p.value for p in DeletePolicy]},
    )
    selector: LabelSelector = prop(
        "selector",
        default_factory=LabelSelector,
        omitempty=False,
        required=True,
        doc="Label query over the machines this set counts; must match the template's labels.",
    )
    template: MachineTemplateSpec = prop(
        "template", default_factory=MachineTemplateSpec, doc="The machine created when replicas are missing."
    )
    authoritative_api: str = prop(
        "authoritativeAPI",
        default="",
        doc="The API whose controllers should manage this machine set: MachineAPI or ClusterAPI; the hand-over is "
        "done when status.authoritativeAPI says the same.",
        schema=AUTHORITATIVE_API_SPEC_SCHEMA,
    )

    @property
    def effective_delete_policy(self) -> DeletePolicy:
        return DeletePolicy(self.delete_policy) if self.delete_policy else DeletePolicy.RANDOM

    def selector_problems(self) -> list[str]:
        """Why the MachineSet controller must refuse this spec (docs/compatibility.md#machinesets): the selector is
        malformed, empty (it would adopt every Machine in the namespace) or does not select the Machines
        the template creates (they would be created forever). Empty list when usable."""
        problems = [f"spec.selector.{p}" for p in self.selector.problems()]
        if problems:
            return problems
        if self.selector.is_empty():
            return ["spec.selector: Invalid value: an empty selector is not valid for a MachineSet"]
        if not self.selector.matches(self.template.metadata.labels):
            return ["spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"]
        return []


@dataclass
class MachineSetStatus(MigrationStatus):
    """Observed state of a MachineSet."""

    # Always serialised (no omitempty in openshift/api) so that a patch can bring it back to 0.
    replicas: int = prop(
        "replicas", default=0, omitempty=False, doc="Most recently observed number of machines.", schema=_INT32
    )
    fully_labeled_replicas: int = prop(
        "fullyLabeledReplicas", default=0, doc="Machines whose labels match the template labels.", schema=_INT32
    )
    ready_replicas: int = prop(
        "readyReplicas", default=0, doc="Machines whose node is Ready.", schema=_INT32
    )
    available_replicas: int = prop(
        "availableReplicas", default=0, doc="Machines ready for at least minReadySeconds.", schema=_INT32
    )
    observed_generation: int = prop(
        "observedGeneration", default=0, doc="The generation last acted on.", schema={"format": "int64"}
    )
    label_selector: str | None = prop(
        "labelSelector",
        default=None,
        doc="spec.selector in string form, for the scale subresource.",
        schema={"minLength": 1, "maxLength": 4096},
    )
    error_reason: str | None = prop(
        "errorReason", default=None, doc="Machine-readable reason of a terminal problem (InvalidConfiguration)."
    )
    error_message: str | None = prop(
        "errorMessage", default=None, doc="Human-readable description of a terminal problem."
    )
    conditions: list[Condition] = prop(
        "conditions", default_factory=list, doc="Current state of the MachineSet.", schema=CONDITIONS_LIST_MAP
    )


@dataclass
class MachineSet(KubeObject):
    """Keeps a number of Machines built from one template."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind="MachineSet",
        plural="machinesets",
        description="MachineSet keeps a specified number of machines built from one template.",
        printer_columns=(
            PrinterColumn("Desired", "integer", ".spec.replicas", "Desired Replicas"),
            PrinterColumn("Current", "integer", ".status.replicas", "Current Replicas"),
            PrinterColumn("Ready", "integer", ".status.readyReplicas", "Ready Replicas"),
            # Declared as a string column by openshift/api; kept for identical `kubectl get` output.
            PrinterColumn("Available", "string", ".status.availableReplicas", "Observed number of available replicas"),
            PrinterColumn("Age", "date", AGE_COLUMN_PATH, "Machineset age"),
        ),
        scale=ScaleSubresource(
            spec_replicas_path=".spec.replicas",
            status_replicas_path=".status.replicas",
            label_selector_path=".status.labelSelector",
        ),
    )

    api_version: str = prop("apiVersion", default=keys.API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default="MachineSet", doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: MachineSetSpec = prop("spec", default_factory=MachineSetSpec, doc="Desired state of the machine set.")
    status: MachineSetStatus = prop(
        "status", default_factory=MachineSetStatus, doc="Observed state of the machine set."
    )
