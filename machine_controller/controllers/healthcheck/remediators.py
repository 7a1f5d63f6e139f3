"""Which external remediation templates a MachineHealthCheck may use: only the kinds an admin registered as
remediators (docs/architecture.md#acting-only-on-what-is-ours).

A remediator (this project's OvirtRemediationTemplate, medik8s' Self Node Remediation...) is installed with a
ClusterRole labelled `rbac.ext-remediation/aggregate-to-ext-remediation: "true"`, which the aggregated
`ext-remediation` role of machine-api-operator and NodeHealthCheck collects. A template is obeyed only when one
such ClusterRole names, in its API group and without wildcards, both the template's resource and the resource of
the requests made from it. The core group and Kubernetes' own groups never qualify, whatever a role says: a
`PodTemplate` template would otherwise make the controller create and delete Pods with its own rights. Those rules,
and the reference's own form, are api/machinehealthcheck.py's `validate_remediation_template`, which the admission
policy repeats (hack/gen_admission.py); the registration is looked at here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from api.machinehealthcheck import TEMPLATE_SUFFIX, MachineHealthCheck, validate_remediation_template
from api.remediation import NHC_AGGREGATION_LABEL
from machine_controller.runtime.kube import Resource

CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
REMEDIATOR_SELECTOR = f"{NHC_AGGREGATION_LABEL}=true"


@dataclass(frozen=True)
class RemediationKinds:
    """The resources of a remediation template and of the requests the MachineHealthCheck makes from it."""

    template: Resource
    request: Resource

    @property
    def group(self) -> str:
        return self.template.group


class TemplateRefused(Exception):
    """The remediation template may not be used; the message says why, naming the check and the field, for the
    check's condition and event."""


def _plural(kind: str) -> str:
    # The plural as controller-runtime's RESTMapper guesses it for a kind without a special form; a remediator
    # whose plural differs names another resource in its role and is refused, never misread.
    return kind.lower() + "s"


def remediation_kinds(mhc: MachineHealthCheck, roles: Iterable[dict]) -> RemediationKinds | None:
    """The kinds `mhc`'s remediation template stands for, or None without a template; `TemplateRefused` when
    the reference is malformed or no registered remediator has them."""
    ref = mhc.spec.remediation_template
    if ref is None:
        return None
    whose = (f"MachineHealthCheck {mhc.metadata.namespace}/{mhc.metadata.name}, remediationTemplate "
             f"{ref.kind or '?'} ({ref.api_version or '?'})")
    errors = validate_remediation_template(ref)
    if errors:
        raise TemplateRefused(f"{whose}: " + "; ".join(str(e) for e in errors))
    group, _, version = ref.api_version.rpartition("/")
    request_kind = ref.kind[: -len(TEMPLATE_SUFFIX)]
    kinds = RemediationKinds(Resource(group, version, _plural(ref.kind), ref.kind),
                             Resource(group, version, _plural(request_kind), request_kind))
    if not any(_registers(role, kinds) for role in roles):
        raise TemplateRefused(
            f"{whose}: spec.remediationTemplate.kind: Forbidden: \"{ref.kind}\" ({ref.api_version}) is no registered "
            f"remediator: no ClusterRole labelled {REMEDIATOR_SELECTOR} names both {kinds.template.plural}.{group} "
            f"and {kinds.request.plural}.{group}; a remediator is registered by installing its ClusterRole")
    return kinds


def _registers(role: dict, kinds: RemediationKinds) -> bool:
    if ((role.get("metadata") or {}).get("labels") or {}).get(NHC_AGGREGATION_LABEL) != "true":
        return False
    named = {(g, r) for rule in role.get("rules") or [] for g in rule.get("apiGroups") or []
             for r in rule.get("resources") or []}
    return {(kinds.group, kinds.template.plural), (kinds.group, kinds.request.plural)} <= named
