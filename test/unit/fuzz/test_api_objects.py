"""The objects users write besides Machines: MachineSets (api/machineset.py), MachineHealthChecks
(api/machinehealthcheck.py) and their remediation templates (api/remediation.py,
controllers/healthcheck/remediators.py). Any document decodes or is refused with DecodeError naming its field; a decoded
MachineSet's selector problems are reported, never raised; a remediation template is used only when its kind is a
registered remediator's, and is otherwise refused naming spec.remediationTemplate; durations and maxUnhealthy give a
number or ValueError."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api._codec import DecodeError
from api.machinehealthcheck import MachineHealthCheck, builtin_group, max_unhealthy_count, parse_duration
from api.machineset import MachineSet
from api.remediation import NHC_AGGREGATION_LABEL, OvirtRemediation, OvirtRemediationTemplate
from machine_controller.controllers.healthcheck.remediators import TemplateRefused, remediation_kinds

from .strategies import json_values, maybe, texts, wide_ints

_labels = st.dictionaries(st.sampled_from(["a", "b", "role"]) | texts, st.sampled_from(["x", "y"]) | texts, max_size=3)
_requirement = st.fixed_dictionaries({}, optional={
    "key": maybe(st.sampled_from(["a", "b"]) | texts),
    "operator": maybe(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "in", "Gt"]) | texts),
    "values": maybe(st.lists(st.sampled_from(["x", "y"]) | texts, max_size=3)),
})
_selector = st.fixed_dictionaries({}, optional={"matchLabels": maybe(_labels),
                                                "matchExpressions": maybe(st.lists(_requirement, max_size=2))})
_machinesets = st.fixed_dictionaries({}, optional={
    "metadata": maybe(st.fixed_dictionaries({}, optional={"name": texts, "labels": maybe(_labels)})),
    "spec": maybe(st.fixed_dictionaries({}, optional={
        "replicas": maybe(wide_ints), "minReadySeconds": maybe(wide_ints),
        "deletePolicy": maybe(st.sampled_from(["", "Random", "Newest", "Oldest"]) | texts),
        "selector": maybe(_selector),
        "template": maybe(st.fixed_dictionaries({}, optional={
            "metadata": maybe(st.fixed_dictionaries({}, optional={"labels": maybe(_labels)}))})),
    })),
})


def _decoded(cls, raw):
    try:
        return cls.from_dict(raw)
    except DecodeError as e:
        assert e.path and e.message, e  # a mapping's problem is one of its fields'
        return None


@given(_machinesets)
def test_a_machineset_decodes_or_is_refused_and_its_selector_problems_are_reported(raw):
    ms = _decoded(MachineSet, raw)
    if ms is not None:
        assert all(p.startswith("spec.") for p in ms.spec.selector_problems())


_remediation_specs = st.fixed_dictionaries({}, optional={
    "strategy": maybe(st.fixed_dictionaries({}, optional={"type": maybe(texts), "retryLimit": maybe(wide_ints),
                                                          "timeoutSeconds": maybe(wide_ints)})),
    "remediationStrategy": maybe(texts), "powerOffTimeoutSeconds": maybe(wide_ints),
    "cooldownSeconds": maybe(wide_ints), "onExhaustion": maybe(texts),
})


@given(_remediation_specs, json_values)
def test_remediation_templates_and_remediations_decode_or_are_refused(spec, status):
    _decoded(OvirtRemediationTemplate, {"spec": {"template": {"spec": spec}}})
    _decoded(OvirtRemediation, {"spec": spec, "status": status})


_groups = st.sampled_from(["remediation.ovirt.org", "self-node-remediation.medik8s.io", "", "apps", "k8s.io",
                           "x.k8s.io", "policy.kubernetes.io"]) | texts
_kinds = st.sampled_from(["OvirtRemediationTemplate", "Template", "OvirtRemediation", ""]) | texts


@st.composite
def _mhc_and_roles(draw):
    group, version, kind = draw(_groups), draw(st.sampled_from(["v1alpha1", "v1", ""]) | texts), draw(_kinds)
    api_version = draw(st.sampled_from([f"{group}/{version}", version, group]) | texts)
    ref = draw(maybe(st.fixed_dictionaries({"apiVersion": st.just(api_version), "kind": st.just(kind),
                                            "name": st.sampled_from(["t", ""])})))
    plural = kind.lower() + "s"
    resources = st.lists(st.sampled_from([plural, plural.removesuffix("templates") + "s", "*"]) | texts, max_size=3)
    roles = draw(st.lists(st.fixed_dictionaries({
        "metadata": st.fixed_dictionaries({"labels": st.fixed_dictionaries(
            {}, optional={NHC_AGGREGATION_LABEL: st.sampled_from(["true", "false"])})}),
        "rules": st.lists(st.fixed_dictionaries({"apiGroups": st.lists(_groups | st.just(group), max_size=2),
                                                 "resources": resources}), max_size=2),
    }), max_size=2))
    return {"metadata": {"namespace": "ns", "name": "mhc"}, "spec": {"remediationTemplate": ref}}, roles


@given(_mhc_and_roles())
def test_a_remediation_template_is_used_only_when_a_remediator_is_registered_for_it(case):
    raw, roles = case
    mhc = _decoded(MachineHealthCheck, raw)
    if mhc is None:
        return
    try:
        kinds = remediation_kinds(mhc, roles)
    except TemplateRefused as e:
        assert "spec.remediationTemplate." in str(e), e
        return
    if kinds is None:
        assert mhc.spec.remediation_template is None
        return
    assert not builtin_group(kinds.group) and kinds.template.kind.endswith("Template")
    assert any((kinds.group, kinds.template.plural) in _named(role) and (kinds.group, kinds.request.plural)
               in _named(role) and role["metadata"]["labels"].get(NHC_AGGREGATION_LABEL) == "true" for role in roles)


def _named(role: dict) -> set[tuple[str, str]]:
    return {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}


# time.Duration is an int64 of nanoseconds: Go's ParseDuration refuses more than this.
GO_MAX_DURATION_S = (2**63 - 1) / 1e9
_durations = st.one_of(
    st.lists(st.tuples(st.integers(0, 10**30), st.sampled_from(["ns", "us", "µs", "ms", "s", "m", "h"])),
             min_size=1, max_size=3).map(lambda parts: "".join(f"{n}{u}" for n, u in parts)),
    st.sampled_from(["0", "", "1.5h", "300ms", "1h30m", "5", "-1s", "1e3s"]), texts)


@given(_durations)
def test_a_duration_is_a_finite_go_duration_or_refused(text):
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        assert repr(text) in str(e)
        return
    assert math.isfinite(seconds) and 0 <= seconds <= GO_MAX_DURATION_S, (text, seconds)


@given(st.one_of(st.none(), wide_ints, st.sampled_from(["0%", "100%", "50%", "3", "%", "-5%", "x%"]), texts),
       st.integers(0, 10**6))
def test_max_unhealthy_is_a_count_or_refused(value, total):
    try:
        allowed = max_unhealthy_count(value, total)
    except ValueError as e:
        assert repr(value) in str(e)
        return
    assert allowed >= 0


@pytest.mark.parametrize("text", ["9223372036854778us", "10000000h", "9" * 400 + "h"])
def test_a_duration_beyond_what_go_can_hold_is_refused(text):
    # Found by test_a_duration_is_a_finite_go_duration_or_refused in a long run (9223372036854778us): Go's
    # time.ParseDuration refuses a duration past int64 nanoseconds (292 years); here it became seconds beyond that
    # (or infinity, for the 400 nines), and a health check's requeue after them.
    with pytest.raises(ValueError):
        parse_duration(text)
