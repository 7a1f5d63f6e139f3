"""Which remediation templates a MachineHealthCheck may use (docs/architecture.md#acting-only-on-what-is-ours): only
a kind a ClusterRole labelled for the ext-remediation aggregation names, template and request, in its own group."""

from __future__ import annotations

import pytest

from api.machinehealthcheck import MachineHealthCheck
from api.remediation import NHC_AGGREGATION_LABEL
from machine_controller.controllers.healthcheck.remediators import TemplateRefused, remediation_kinds

OVIRT = ("remediation.ovirt.org/v1alpha1", "OvirtRemediationTemplate")


def _check(api_version: str, kind: str) -> MachineHealthCheck:
    return MachineHealthCheck.from_dict({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"remediationTemplate": {"apiVersion": api_version, "kind": kind, "name": "t"}}})


def _role(*rules: tuple[list[str], list[str]], label: str | None = "true") -> dict:
    return {"metadata": {"name": "r", "labels": {NHC_AGGREGATION_LABEL: label} if label else {}},
            "rules": [{"apiGroups": g, "resources": r, "verbs": ["get"]} for g, r in rules]}


OVIRT_ROLE = _role((["remediation.ovirt.org"], ["ovirtremediationtemplates"]),
                   (["remediation.ovirt.org"], ["ovirtremediations"]))


def test_the_projects_own_template_is_used_once_its_role_is_installed():
    kinds = remediation_kinds(_check(*OVIRT), [OVIRT_ROLE])
    assert kinds is not None
    assert (kinds.template.plural, kinds.request.plural, kinds.request.kind) == (
        "ovirtremediationtemplates", "ovirtremediations", "OvirtRemediation")
    assert kinds.request.path("ns") == "/apis/remediation.ovirt.org/v1alpha1/namespaces/ns/ovirtremediations"


def test_a_check_without_a_template_needs_no_remediator():
    check = MachineHealthCheck.from_dict({"metadata": {"name": "c", "namespace": "ns"}, "spec": {}})
    assert remediation_kinds(check, []) is None


@pytest.mark.parametrize("roles, why", [
    ([], "no ClusterRole labelled"),
    ([_role((["remediation.ovirt.org"], ["ovirtremediationtemplates", "ovirtremediations"]), label=None)],
     "no ClusterRole labelled"),
    ([_role((["remediation.ovirt.org"], ["ovirtremediationtemplates"]))], "no ClusterRole labelled"),
    ([_role((["remediation.ovirt.org"], ["*"]))], "no ClusterRole labelled"),
    ([_role((["*"], ["ovirtremediationtemplates", "ovirtremediations"]))], "no ClusterRole labelled"),
    # Both resources, but in two roles: neither role registers the kind.
    ([_role((["remediation.ovirt.org"], ["ovirtremediationtemplates"])),
      _role((["remediation.ovirt.org"], ["ovirtremediations"]))], "no ClusterRole labelled"),
], ids=["none", "unlabelled", "template-only", "wildcard-resource", "wildcard-group", "split"])
def test_a_template_no_role_registers_is_refused(roles, why):
    with pytest.raises(TemplateRefused, match=why):
        remediation_kinds(_check(*OVIRT), roles)


@pytest.mark.parametrize("api_version, kind, why", [
    ("v1", "PodTemplate", "the core API group"),
    ("apps/v1", "ReplicaSetTemplate", "API group apps"),
    ("storage.k8s.io/v1", "VolumeAttachmentTemplate", "API group storage.k8s.io"),
    ("example.kubernetes.io/v1", "ThingTemplate", "API group example.kubernetes.io"),
    ("remediation.ovirt.org/v1alpha1", "OvirtRemediation", "ends in Template"),
    ("remediation.ovirt.org/v1alpha1", "Template", "ends in Template"),
])
def test_kubernetes_own_kinds_are_refused_whatever_a_role_says(api_version, kind, why):
    group = api_version.rpartition("/")[0]
    plural = kind.lower() + "s"
    greedy = _role(([group], [plural, plural.removesuffix("templates") + "s", "pods"]))
    with pytest.raises(TemplateRefused, match=why):
        remediation_kinds(_check(api_version, kind), [greedy])


def test_groups_of_other_projects_under_k8s_like_names_still_qualify():
    # cluster-api's and medik8s' groups end in x-k8s.io and medik8s.io: not Kubernetes' own domains.
    for group in ("infrastructure.cluster.x-k8s.io", "self-node-remediation.medik8s.io"):
        role = _role(([group], ["metal3remediationtemplates", "metal3remediations"]))
        kinds = remediation_kinds(_check(f"{group}/v1beta1", "Metal3RemediationTemplate"), [role])
        assert kinds is not None and kinds.group == group


@pytest.mark.parametrize("api_version, kind, name, said", [
    ("", "OvirtRemediationTemplate", "t",
     "spec.remediationTemplate.apiVersion: Required value: the remediator's API group and version, such as "
     "remediation.ovirt.org/v1alpha1"),
    ("remediation.ovirt.org/", "OvirtRemediationTemplate", "t",
     'spec.remediationTemplate.apiVersion: Invalid value: "remediation.ovirt.org/": must be <group>/<version>'),
    ("a/b/c", "OvirtRemediationTemplate", "t",
     'spec.remediationTemplate.apiVersion: Invalid value: "a/b/c": must be <group>/<version>'),
    ("v1", "PodTemplate", "t",
     "spec.remediationTemplate.apiVersion: Forbidden: \"v1\": the core API group is Kubernetes' own, never a "
     "remediator's"),
    ("remediation.ovirt.org/v1alpha1", "", "t",
     "spec.remediationTemplate.kind: Required value: the template's kind, such as OvirtRemediationTemplate"),
    ("remediation.ovirt.org/v1alpha1", "OvirtRemediation", "t",
     'spec.remediationTemplate.kind: Invalid value: "OvirtRemediation": a remediation template\'s kind ends in '
     'Template'),
    ("remediation.ovirt.org/v1alpha1", "OvirtRemediationTemplate", "",
     "spec.remediationTemplate.name: Required value: the name of the template, in the MachineHealthCheck's "
     "namespace"),
], ids=["no-api-version", "no-version", "two-slashes", "core-group", "no-kind", "kind-not-a-template", "no-name"])
def test_each_refusal_names_the_check_the_field_and_what_is_wrong(api_version, kind, name, said):
    check = _check(api_version, kind)
    check.spec.remediation_template.name = name
    with pytest.raises(TemplateRefused) as refused:
        remediation_kinds(check, [OVIRT_ROLE])
    which = f"remediationTemplate {kind or '?'} ({api_version or '?'})"
    assert str(refused.value) == f"MachineHealthCheck ns/c, {which}: {said}"


def test_a_template_no_role_registers_is_refused_naming_the_check_and_the_field():
    with pytest.raises(TemplateRefused) as refused:
        remediation_kinds(_check(*OVIRT), [])
    assert str(refused.value).startswith('MachineHealthCheck ns/c, remediationTemplate OvirtRemediationTemplate '
                                         '(remediation.ovirt.org/v1alpha1): spec.remediationTemplate.kind: Forbidden: '
                                         '"OvirtRemediationTemplate" (remediation.ovirt.org/v1alpha1) is no registered '
                                         'remediator: no ClusterRole labelled'), str(refused.value)
