"""Kubernetes meta types the Machine API embeds: object metadata, references, label selectors, conditions.

Only the subset the controllers read is modelled; unknown keys are dropped on parse, so write objects back
with patches built from the fields you changed, never by serialising a parsed object over the stored one.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar, Mapping

from api._codec import JSONObject
from api._fields import prop

# --- time ---------------------------------------------------------------------------------------------


def format_time(t: _dt.datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time serialises."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s: str) -> _dt.datetime:
    """Parse a metav1.Time string (`2024-01-02T03:04:05Z`, offsets and fractions tolerated)."""
    t = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def now() -> _dt.datetime:
    """The current time in UTC truncated to seconds (the precision Kubernetes stores)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)


# --- references ---------------------------------------------------------------------------------------


@dataclass
class OwnerReference(JSONObject):
    """metav1.OwnerReference; a MachineSet is the controller owner of the Machines it creates."""

    __schema__: ClassVar[dict[str, Any]] = {"x-kubernetes-map-type": "atomic"}

    api_version: str = prop("apiVersion", default="", required=True, doc="API version of the referent.")
    kind: str = prop("kind", default="", required=True, doc="Kind of the referent.")
    name: str = prop("name", default="", required=True, doc="Name of the referent.")
    uid: str = prop("uid", default="", required=True, doc="UID of the referent.")
    controller: bool | None = prop("controller", default=None, doc="True if the referent manages this object.")
    block_owner_deletion: bool | None = prop(
        "blockOwnerDeletion", default=None, doc="If true, foreground deletion of the owner waits for this object."
    )


@dataclass
class ObjectReference(JSONObject):
    """core/v1 ObjectReference (Machine.status.nodeRef, MHC remediationTemplate)."""

    __schema__: ClassVar[dict[str, Any]] = {"x-kubernetes-map-type": "atomic"}

    api_version: str = prop("apiVersion", default="", doc="API version of the referent.")
    kind: str = prop("kind", default="", doc="Kind of the referent.")
    name: str = prop("name", default="", doc="Name of the referent.")
    namespace: str = prop("namespace", default="", doc="Namespace of the referent.")
    uid: str = prop("uid", default="", doc="UID of the referent.")
    resource_version: str = prop("resourceVersion", default="", doc="Resource version of the referent.")
    field_path: str = prop("fieldPath", default="", doc="Part of the referent this reference points to.")


@dataclass
class LocalObjectReference(JSONObject):
    """core/v1 LocalObjectReference: a name in the same namespace (provider-spec secret refs)."""

    name: str = prop("name", default="", doc="Name of the referent.")


# --- metadata -----------------------------------------------------------------------------------------


@dataclass
class EmbeddedObjectMeta(JSONObject):
    """The reduced ObjectMeta of machine/v1beta1 used inside MachineSpec and MachineTemplateSpec.

    Only labels and annotations matter: the MachineSet copies them onto new Machines and nodelink copies a
    Machine's spec.metadata onto its Node (docs/compatibility.md#object-shapes).
    """

    name: str = prop("name", default="", doc="Name of the object.")
    generate_name: str = prop("generateName", default="", doc="Prefix for a server-generated name.")
    namespace: str = prop("namespace", default="", doc="Namespace of the object.")
    labels: dict[str, str] = prop("labels", default_factory=dict, doc="Labels to apply.")
    annotations: dict[str, str] = prop("annotations", default_factory=dict, doc="Annotations to apply.")
    owner_references: list[OwnerReference] = prop(
        "ownerReferences",
        default_factory=list,
        doc="Objects this object depends on.",
        schema={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
    )


@dataclass
class ObjectMeta(EmbeddedObjectMeta):
    """Top-level object metadata (the subset the controllers read). The API server validates it itself, so
    the CRD schema of a top-level `metadata` is just `type: object`, as for every CRD."""

    __schema_override__: ClassVar[dict[str, Any]] = {"type": "object"}

    uid: str = prop("uid", default="")
    resource_version: str = prop("resourceVersion", default="")
    generation: int = prop("generation", default=0)
    creation_timestamp: str | None = prop("creationTimestamp", default=None)
    deletion_timestamp: str | None = prop("deletionTimestamp", default=None)
    finalizers: list[str] = prop("finalizers", default_factory=list)

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with controller=true, if any (at most one is allowed)."""
        return next((r for r in self.owner_references if r.controller), None)


class KubeObject(JSONObject):
    """Base of the top-level API types (Machine, MachineSet, MachineHealthCheck)."""

    metadata: ObjectMeta  # declared as a field by each dataclass

    @property
    def key(self) -> str:
        """`namespace/name`, the work-queue key."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


# --- label selectors ----------------------------------------------------------------------------------


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass
class LabelSelectorRequirement(JSONObject):
    """One matchExpressions entry."""

    key: str = prop("key", default="", required=True, doc="The label key the requirement applies to.")
    operator: str = prop(
        "operator", default="", required=True, doc="One of In, NotIn, Exists and DoesNotExist."
    )
    values: list[str] = prop(
        "values",
        default_factory=list,
        doc="Values for In and NotIn (non-empty); must be empty for Exists and DoesNotExist.",
        schema={"x-kubernetes-list-type": "atomic"},
    )

    def problem(self) -> str | None:
        """Why metav1.LabelSelectorAsSelector would reject this requirement, or None."""
        if self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN):
            return None if self.values else f"values: must be non-empty for operator {self.operator}"
        if self.operator in (SelectorOperator.EXISTS, SelectorOperator.DOES_NOT_EXIST):
            return None if not self.values else f"values: must be empty for operator {self.operator}"
        return f'operator: "{self.operator}" is not a valid label selector operator'

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == SelectorOperator.IN:
            return self.key in labels and labels[self.key] in self.values
        if self.operator == SelectorOperator.NOT_IN:
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == SelectorOperator.EXISTS:
            return self.key in labels
        return self.key not in labels

    def to_string(self) -> str:
        # labels.Requirement.String(): sorted values, "in"/"notin" in lower case, "!" for DoesNotExist.
        values = ",".join(sorted(self.values))
        return {
            SelectorOperator.IN: f"{self.key} in ({values})",
            SelectorOperator.NOT_IN: f"{self.key} notin ({values})",
            SelectorOperator.EXISTS: self.key,
            SelectorOperator.DOES_NOT_EXIST: f"!{self.key}",
        }[SelectorOperator(self.operator)]


class InvalidSelector(ValueError):
    """The selector cannot be converted to a label query (bad operator or values)."""


@dataclass
class LabelSelector(JSONObject):
    """metav1.LabelSelector. An empty selector matches everything (metav1.LabelSelectorAsSelector)."""

    __schema__: ClassVar[dict[str, Any]] = {"x-kubernetes-map-type": "atomic"}

    match_labels: dict[str, str] = prop(
        "matchLabels", default_factory=dict, doc="Labels that must be present with exactly these values."
    )
    match_expressions: list[LabelSelectorRequirement] = prop(
        "matchExpressions",
        default_factory=list,
        doc="Requirements that must all hold.",
        schema={"x-kubernetes-list-type": "atomic"},
    )

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def problems(self) -> list[str]:
        """Reasons the selector is invalid (empty list when it is valid)."""
        return [
            f"matchExpressions[{i}].{p}"
            for i, r in enumerate(self.match_expressions)
            if (p := r.problem()) is not None
        ]

    def _check(self) -> None:
        problems = self.problems()
        if problems:
            raise InvalidSelector("; ".join(problems))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels is selected. Raises InvalidSelector for a malformed selector."""
        self._check()
        labels = labels or {}
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(r.matches(labels) for r in self.match_expressions)

    def to_string(self) -> str:
        """The selector as metav1.FormatLabelSelector renders it (e.g. for MachineSet status.labelSelector
        and the scale subresource): requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a)`, `k`,
        `!k`, joined by commas; "<none>" for an empty selector. Raises InvalidSelector when malformed."""
        self._check()
        parts = [(k, f"{k}={v}") for k, v in self.match_labels.items()]
        parts += [(r.key, r.to_string()) for r in self.match_expressions]
        # Stable sort by key only, as labels.internalSelector sorts its requirements by key.
        text = ",".join(p for _, p in sorted(parts, key=lambda kv: kv[0]))
        return text or "<none>"


# --- conditions ---------------------------------------------------------------------------------------


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionSeverity(StrEnum):
    ERROR = "Error"
    WARNING = "Warning"
    INFO = "Info"
    NONE = ""


@dataclass
class Condition(JSONObject):
    """machine/v1beta1 Condition (docs/compatibility.md#object-shapes). `severity` is only meaningful when status is
    False."""

    type: str = prop("type", default="", required=True, doc="Type of condition in CamelCase.")
    status: str = prop("status", default="", required=True, doc="One of True, False, Unknown.")
    severity: str = prop("severity", default="", doc="Error, Warning or Info; set only when status is False.")
    last_transition_time: str = prop(
        "lastTransitionTime",
        default="",
        required=True,
        doc="When the condition last changed.",
        schema={"format": "date-time"},
    )
    reason: str = prop("reason", default="", doc="The reason for the last transition, in CamelCase.")
    message: str = prop("message", default="", doc="Human readable details about the last transition.")

    def same_state(self, other: Condition) -> bool:
        return (self.type, self.status, self.reason, self.severity, self.message) == (
            other.type,
            other.status,
            other.reason,
            other.severity,
            other.message,
        )


def true_condition(type_: str) -> Condition:
    return Condition(type=type_, status=ConditionStatus.TRUE)


def false_condition(type_: str, reason: str, severity: str, message: str) -> Condition:
    return Condition(type=type_, status=ConditionStatus.FALSE, reason=reason, severity=severity, message=message)


def unknown_condition(type_: str, reason: str, message: str) -> Condition:
    return Condition(type=type_, status=ConditionStatus.UNKNOWN, reason=reason, message=message)


def get_condition(conditions: list[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def set_condition(
    conditions: list[Condition], condition: Condition, at: _dt.datetime | None = None
) -> list[Condition]:
    """Return `conditions` with `condition` set, as MAO's conditions.Set does (docs/compatibility.md#object-shapes).

    If a condition of that type exists with equal status/reason/severity/message, its lastTransitionTime is
    kept; otherwise the new one gets lastTransitionTime = `at` (default: now, UTC, whole seconds). The result
    is sorted by type. The input list is not modified.
    """
    existing = get_condition(conditions, condition.type)
    if existing is not None and existing.same_state(condition):
        stamped = replace(condition, last_transition_time=existing.last_transition_time)
    else:
        stamped = replace(condition, last_transition_time=format_time(at or now()))
    others = [c for c in conditions if c.type != condition.type]
    return sorted([*others, stamped], key=lambda c: c.type)


# --- node-facing types embedded in Machines -------------------------------------------------------------


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass
class Taint(JSONObject):
    """core/v1 Taint, added to the Node additively by nodelink (docs/compatibility.md#nodelink)."""

    key: str = prop("key", default="", required=True, doc="The taint key.")
    value: str = prop("value", default="", doc="The taint value.")
    effect: str = prop("effect", default="", required=True, doc="NoSchedule, PreferNoSchedule or NoExecute.")
    time_added: str | None = prop(
        "timeAdded", default=None, doc="When the taint was added (NoExecute only).", schema={"format": "date-time"}
    )


class AddressType(StrEnum):
    INTERNAL_IP = "InternalIP"
    EXTERNAL_IP = "ExternalIP"
    INTERNAL_DNS = "InternalDNS"
    EXTERNAL_DNS = "ExternalDNS"
    HOSTNAME = "Hostname"


@dataclass
class NodeAddress(JSONObject):
    """core/v1 NodeAddress; the machine approver matches CSRs against these (docs/compatibility.md#status)."""

    type: str = prop("type", default="", required=True,
                     doc="InternalIP, ExternalIP, InternalDNS, ExternalDNS or Hostname.")
    address: str = prop("address", default="", required=True, doc="The address.")
