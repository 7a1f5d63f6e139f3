"""Which external remediation templates a MachineHealthCheck may use: only the kinds an admin registered as
remediators (docs/architecture.md#acting-only-on-what-is-ours).

A remediator (this project's OvirtRemediationTemplate, medik8s' Self Node Remediation...) is installed with a
ClusterRole labelled `rbac.ext-remediation/aggregate-to-ext-remediation: "true"`, which the aggregated
`ext-remediation` role of machine-api-operator and NodeHealthCheck collects. A template is obeyed only when one
such ClusterRole names, in its API group and without wildcards, both the template's resource and the resource of
the requests made from it. The core group and Kubernetes' own groups never qualify, whatever a role says: a
`PodTemplate` template would otherwise make the controller create and delete Pods with its own rights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from api.machinehealthcheck import MachineHealthCheck
from api.remediation import NHC_AGGREGATION_LABEL
from machine_controller.runtime.kube import Resource

CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
REMEDIATOR_SELECTOR = f"{NHC_AGGREGATION_LABEL}=true"
_TEMPLATE_SUFFIX = "Template"
# Kubernetes keeps these domains for its own APIs (API review's protected groups); a group without a dot is one of
# its early groups (apps, batch, policy...).
_KUBERNETES_DOMAINS = ("k8s.io", "kubernetes.io")


@dataclass(frozen=True)
class RemediationKinds:
    """The resources of a remediation template and of the requests the MachineHealthCheck makes from it."""

    template: Resource
    request: Resource

    @property
    def group(self) -> str:
        return self.template.group


class TemplateRefused(Exception):
    """The remediation template may not be used; the message says why, for the check's condition and event."""


def _plural(kind: str) -> str:
    # The plural as controller-runtime's RESTMapper guesses it for a kind without a special form; a remediator
    # whose plural differs names another resource in its role and is refused, never misread.
    return kind.lower() + "s"


def builtin_group(group: str) -> bool:
    return "." not in group or any(group == d or group.endswith("." + d) for d in _KUBERNETES_DOMAINS)


def remediation_kinds(mhc: MachineHealthCheck, roles: Iterable[dict]) -> RemediationKinds | None:
    """The kinds `mhc`'s remediation template stands for, or None without a template; `TemplateRefused` when
    no registered remediator has them."""
    ref = mhc.spec.remediation_template
    if ref is None:
        return None
    group, _, version = ref.api_version.rpartition("/")
    what = f"remediationTemplate {ref.kind} ({ref.api_version or '?'})"
    if not ref.kind.endswith(_TEMPLATE_SUFFIX) or ref.kind == _TEMPLATE_SUFFIX:
        raise TemplateRefused(f"{what}: a remediation template's kind ends in {_TEMPLATE_SUFFIX}")
    if builtin_group(group):
        raise TemplateRefused(f"{what}: {'the core API group' if not group else 'API group ' + group} is "
                              "Kubernetes' own, never a remediator's")
    request_kind = ref.kind[: -len(_TEMPLATE_SUFFIX)]
    kinds = RemediationKinds(Resource(group, version, _plural(ref.kind), ref.kind),
                             Resource(group, version, _plural(request_kind), request_kind))
    if not any(_registers(role, kinds) for role in roles):
        raise TemplateRefused(
            f"{what}: no ClusterRole labelled {REMEDIATOR_SELECTOR} names both {kinds.template.plural}.{group} "
            f"and {kinds.request.plural}.{group}; a remediator is registered by installing its ClusterRole")
    return kinds


def _registers(role: dict, kinds: RemediationKinds) -> bool:
    if ((role.get("metadata") or {}).get("labels") or {}).get(NHC_AGGREGATION_LABEL) != "true":
        return False
    named = {(g, r) for rule in role.get("rules") or [] for g in rule.get("apiGroups") or []
             for r in rule.get("resources") or []}
    return {(kinds.group, kinds.template.plural), (kinds.group, kinds.request.plural)} <= named
