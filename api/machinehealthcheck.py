"""machine.openshift.io/v1beta1 MachineHealthCheck (docs/compatibility.md#object-shapes) and its int-or-percent and
duration helpers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from api import keys
from api._codec import JSONObject
from api._fields import prop
from api.crd_info import CRDInfo, PrinterColumn
from api.field_errors import FieldError
from api.machine import CONDITIONS_LIST_MAP
from api.meta import Condition, KubeObject, LabelSelector, ObjectMeta, ObjectReference

# Integer, or 0-100 followed by "%" (openshift/api's pattern).
MAX_UNHEALTHY_PATTERN = r"^((100|[0-9]{1,2})%|[0-9]+)$"
# A Go duration with units. openshift/api writes the startup-timeout pattern as `^0|(...)+$`, where the
# alternation escapes both anchors and accepts any string starting with "0"; ours anchors the whole
# alternation, so "0" and proper durations pass and garbage such as "0xyz" is rejected at admission.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
STARTUP_TIMEOUT_PATTERN = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"
DEFAULT_MAX_UNHEALTHY = "100%"

# A remediation template's reference (docs/architecture.md#acting-only-on-what-is-ours): the rules the controller
# keeps before it looks for a registered remediator (controllers/healthcheck/remediators.py), which the admission policy
# repeats in CEL (hack/gen_admission.py), in these words.
REMEDIATION_TEMPLATE_PATH = "spec.remediationTemplate"
TEMPLATE_SUFFIX = "Template"
# `<group>/<version>`, or a bare version for the core group: one slash at most, nothing empty around it.
API_VERSION_PATTERN = r"^([^/]+/)?[^/]+$"
# Kubernetes keeps these domains for its own APIs (API review's protected groups); a group without a dot is one of
# its early groups (apps, batch, policy...).
KUBERNETES_DOMAINS = ("k8s.io", "kubernetes.io")
API_VERSION_REQUIRED = "Required value: the remediator's API group and version, such as remediation.ovirt.org/v1alpha1"
API_VERSION_FORM = "must be <group>/<version>"
BUILTIN_GROUP = "is Kubernetes' own, never a remediator's"
KIND_REQUIRED = "Required value: the template's kind, such as OvirtRemediationTemplate"
KIND_FORM = f"a remediation template's kind ends in {TEMPLATE_SUFFIX}"
NAME_REQUIRED = "Required value: the name of the template, in the MachineHealthCheck's namespace"
DEFAULT_NODE_STARTUP_TIMEOUT = "10m"


class MHCConditionType(StrEnum):
    REMEDIATION_ALLOWED = "RemediationAllowed"
    EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE = "ExternalRemediationTemplateAvailable"
    EXTERNAL_REMEDIATION_REQUEST_AVAILABLE = "ExternalRemediationRequestAvailable"


class MHCConditionReason(StrEnum):
    TOO_MANY_UNHEALTHY = "TooManyUnhealthy"
    EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND = "ExternalRemediationTemplateNotFound"
    EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED = "ExternalRemediationRequestCreationFailed"
    # The template's kind is no registered remediator (docs/architecture.md#acting-only-on-what-is-ours).
    REMEDIATION_TEMPLATE_NOT_REGISTERED = "RemediationTemplateNotRegistered"


@dataclass
class UnhealthyCondition(JSONObject):
    """A node condition that makes a node unhealthy once it has held for `timeout`."""

    type: str = prop("type", default="", doc="Node condition type, e.g. Ready.", schema={"minLength": 1})
    status: str = prop("status", default="", doc="Condition status, e.g. False or Unknown.", schema={"minLength": 1})
    timeout: str = prop(
        "timeout",
        default="",
        doc='How long the condition must hold, a duration with units such as "300s" or "1h30m".',
        schema={"pattern": DURATION_PATTERN},
    )


@dataclass
class MachineHealthCheckSpec(JSONObject):
    selector: LabelSelector = prop(
        "selector",
        default_factory=LabelSelector,
        omitempty=False,
        doc="Machines to check; an empty selector selects every machine in the namespace.",
    )
    unhealthy_conditions: list[UnhealthyCondition] = prop(
        "unhealthyConditions",
        default_factory=list,
        doc="Node conditions that make a node unhealthy (any one suffices).",
        schema={"minItems": 1},
    )
    max_unhealthy: int | str | None = prop(
        "maxUnhealthy",
        default=None,
        doc="Remediate only while at most this many (or this percentage of) selected machines are unhealthy.",
        schema={"default": DEFAULT_MAX_UNHEALTHY, "pattern": MAX_UNHEALTHY_PATTERN},
    )
    node_startup_timeout: str | None = prop(
        "nodeStartupTimeout",
        default=None,
        doc='Machines without a node after this long are unhealthy; "0" disables the check.',
        schema={"default": DEFAULT_NODE_STARTUP_TIMEOUT, "pattern": STARTUP_TIMEOUT_PATTERN},
    )
    remediation_template: ObjectReference | None = prop(
        "remediationTemplate", default=None, doc="Template for external remediation requests."
    )


_NON_NEGATIVE = {"minimum": 0}


@dataclass
class MachineHealthCheckStatus(JSONObject):
    expected_machines: int | None = prop(
        "expectedMachines", default=None, doc="Number of machines the check selects.", schema=_NON_NEGATIVE
    )
    current_healthy: int | None = prop(
        "currentHealthy", default=None, doc="Number of those that are healthy.", schema=_NON_NEGATIVE
    )
    remediations_allowed: int = prop(
        "remediationsAllowed",
        default=0,
        omitempty=False,
        doc="Remediations still allowed before maxUnhealthy short-circuits.",
        schema={"format": "int32", **_NON_NEGATIVE},
    )
    conditions: list[Condition] = prop(
        "conditions", default_factory=list, doc="Current state of the check.", schema=CONDITIONS_LIST_MAP
    )


@dataclass
class MachineHealthCheck(KubeObject):
    """Deletes (remediates) machines whose nodes stay unhealthy."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        kind="MachineHealthCheck",
        plural="machinehealthchecks",
        description="MachineHealthCheck remediates machines whose nodes stay unhealthy.",
        short_names=("mhc", "mhcs"),
        printer_columns=(
            PrinterColumn("MaxUnhealthy", "string", ".spec.maxUnhealthy",
                          "Maximum number of unhealthy machines allowed"),
            PrinterColumn("ExpectedMachines", "integer", ".status.expectedMachines",
                          "Number of machines currently monitored"),
            PrinterColumn("CurrentHealthy", "integer", ".status.currentHealthy", "Current observed healthy machines"),
        ),
    )

    api_version: str = prop("apiVersion", default=keys.API_VERSION, doc="API version of the object.")
    kind: str = prop("kind", default="MachineHealthCheck", doc="Kind of the object.")
    metadata: ObjectMeta = prop("metadata", default_factory=ObjectMeta)
    spec: MachineHealthCheckSpec = prop(
        "spec", default_factory=MachineHealthCheckSpec, doc="Machine health check policy."
    )
    status: MachineHealthCheckStatus = prop(
        "status", default_factory=MachineHealthCheckStatus, doc="Observed state of the check."
    )


def builtin_group(group: str) -> bool:
    """Whether an API group is Kubernetes' own (the core group is "")."""
    return "." not in group or any(group == d or group.endswith("." + d) for d in KUBERNETES_DOMAINS)


def validate_remediation_template(ref: ObjectReference) -> list[FieldError]:
    """What is wrong with a remediation template's reference whatever remediators are installed, each problem with
    its field path; an empty list when the reference may name a remediator."""
    path = REMEDIATION_TEMPLATE_PATH
    errors = []
    if not ref.api_version:
        errors.append(FieldError(f"{path}.apiVersion", API_VERSION_REQUIRED))
    elif not re.fullmatch(API_VERSION_PATTERN, ref.api_version):
        errors.append(FieldError(f"{path}.apiVersion", f'Invalid value: "{ref.api_version}": {API_VERSION_FORM}'))
    else:
        group = ref.api_version.rpartition("/")[0]
        what = "the core API group" if not group else f"API group {group}"
        if builtin_group(group):
            errors.append(FieldError(f"{path}.apiVersion", f'Forbidden: "{ref.api_version}": {what} {BUILTIN_GROUP}'))
    if not ref.kind:
        errors.append(FieldError(f"{path}.kind", KIND_REQUIRED))
    elif not ref.kind.endswith(TEMPLATE_SUFFIX) or ref.kind == TEMPLATE_SUFFIX:
        errors.append(FieldError(f"{path}.kind", f'Invalid value: "{ref.kind}": {KIND_FORM}'))
    if not ref.name:
        errors.append(FieldError(f"{path}.name", NAME_REQUIRED))
    return errors


def max_unhealthy_count(value: int | str | None, total: int) -> int:
    """How many unhealthy machines `maxUnhealthy` allows out of `total` (docs/compatibility.md#machinehealthcheck).

    None means "no limit" (= total); an integer is taken as is; "N%" is floor(N * total / 100); a negative
    result becomes 0. Like intstr.GetScaledValueFromIntOrPercent, a string without "%" (which the CRD pattern
    lets through, e.g. "3") is not a number here: ValueError, and the caller must not remediate.
    """
    if value is None:
        return total
    if isinstance(value, int):
        return max(value, 0)
    if not value.endswith("%"):
        raise ValueError(f"invalid maxUnhealthy {value!r}: a string must be a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ValueError(f"invalid maxUnhealthy {value!r}") from None
    return max(percent * total // 100, 0)


_GO_MAX_DURATION_S = (2**63 - 1) / 1e9  # time.Duration: int64 nanoseconds, about 292 years
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string as the CRD patterns admit it ("0", "300ms", "1h30m", "1.5h")."""
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}")
    if total > _GO_MAX_DURATION_S:
        # Go's time.ParseDuration refuses what its int64 of nanoseconds cannot hold; taken, it was a requeue after
        # centuries (or after infinity, for hundreds of digits).
        raise ValueError(f"invalid duration {text!r}: longer than {_GO_MAX_DURATION_S:.0f}s, the longest Go has")
    return total
