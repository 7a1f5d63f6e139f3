"""Machine, MachineSet and MachineHealthCheck types: JSON names, tolerance, Go omitempty, helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from api import keys
from api._codec import DecodeError
from api.machine import Machine, MachinePhase, MachineStatus
from api.machinehealthcheck import MachineHealthCheck, max_unhealthy_count, parse_duration
from api.machineset import DeletePolicy, MachineSet, MachineSetStatus

MACHINE = {
    "apiVersion": "machine.openshift.io/v1beta1",
    "kind": "Machine",
    "metadata": {
        "name": "w-abcde",
        "namespace": "openshift-machine-api",
        "labels": {keys.LABEL_CLUSTER: "infra"},
        "annotations": {keys.ANNOTATION_INSTANCE_STATE: "up", keys.ANNOTATION_VM_ID: "vm-1"},
        "finalizers": [keys.MACHINE_FINALIZER],
        "uid": "u1",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-01-02T03:04:05Z",
    },
    "spec": {
        "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
        "lifecycleHooks": {"preDrain": [{"name": "EtcdQuorum", "owner": "clusteroperator/etcd"}]},
        "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
        "providerSpec": {"value": {"kind": "OvirtMachineProviderSpec", "memory_mb": 1}},
        "providerID": "ovirt://vm-1",
    },
    "status": {
        "nodeRef": {"kind": "Node", "name": "w-abcde", "uid": "n1"},
        "lastUpdated": "2024-01-02T03:05:00Z",
        "providerStatus": {"instanceId": "vm-1", "instanceState": "up"},
        "addresses": [{"type": "InternalDNS", "address": "w-abcde"}, {"type": "InternalIP", "address": "10.0.0.5"}],
        "phase": "Running",
        "conditions": [{"type": "InstanceExists", "status": "True", "lastTransitionTime": "2024-01-02T03:04:30Z"}],
    },
}


def test_machine_round_trips_with_the_openshift_json_names():
    machine = Machine.from_dict(MACHINE)
    assert machine.key == "openshift-machine-api/w-abcde"
    assert machine.cluster_id == "infra"
    assert machine.spec.provider_id == "ovirt://vm-1"
    assert machine.spec.lifecycle_hooks.pre_drain[0].owner == "clusteroperator/etcd"
    assert machine.status.node_ref.name == "w-abcde"
    assert machine.status.phase == MachinePhase.RUNNING
    assert machine.to_dict() == MACHINE


def test_unknown_keys_are_ignored_everywhere():
    doc = {**MACHINE, "extra": 1, "spec": {**MACHINE["spec"], "nodeDrainTimeoutSeconds": 30}}
    doc["status"] = {**MACHINE["status"], "deletion": {"nodeDrainStartTime": "2024-01-02T03:04:30Z"}}
    assert Machine.from_dict(doc) == Machine.from_dict(MACHINE)


def test_wrong_json_types_name_the_field():
    with pytest.raises(DecodeError) as info:
        Machine.from_dict({"status": {"addresses": [{"type": 1}]}})
    assert str(info.value) == "status.addresses[0].type: expected string, got integer"


def test_empty_machine_status_pointers_are_omitted_but_explicit_values_kept():
    assert MachineStatus().to_dict() == {}
    status = MachineStatus(phase="Failed", error_reason="InvalidConfiguration", error_message="")
    assert status.to_dict() == {"phase": "Failed", "errorReason": "InvalidConfiguration", "errorMessage": ""}


def test_machineset_replicas_pointer_and_status_replicas_zero_are_written():
    ms = MachineSet.from_dict({"spec": {"replicas": 0, "selector": {}}})
    assert ms.spec.replicas == 0
    assert ms.to_dict()["spec"]["replicas"] == 0
    assert ms.to_dict()["spec"]["selector"] == {}
    assert MachineSetStatus().to_dict() == {"replicas": 0}
    assert MachineSet.from_dict({}).spec.replicas is None


@pytest.mark.parametrize(
    "value, policy",
    [("", DeletePolicy.RANDOM), ("Random", DeletePolicy.RANDOM), ("Newest", DeletePolicy.NEWEST),
     ("Oldest", DeletePolicy.OLDEST)]
)
def test_delete_policy_empty_means_random(value, policy):
    ms = MachineSet.from_dict({"spec": {"deletePolicy": value} if value else {}})
    assert ms.spec.effective_delete_policy is policy


def test_unknown_delete_policy_is_an_error_for_the_controller():
    with pytest.raises(ValueError):
        _ = MachineSet.from_dict({"spec": {"deletePolicy": "Largest"}}).spec.effective_delete_policy


def test_mhc_max_unhealthy_accepts_int_or_string():
    mhc = MachineHealthCheck.from_dict(
        {"spec": {"maxUnhealthy": "40%", "nodeStartupTimeout": "0",
                  "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "300s"}]}}
    )
    assert mhc.spec.max_unhealthy == "40%"
    assert MachineHealthCheck.from_dict({"spec": {"maxUnhealthy": 2}}).spec.max_unhealthy == 2
    with pytest.raises(DecodeError, match="spec.maxUnhealthy: expected integer or string, got boolean"):
        MachineHealthCheck.from_dict({"spec": {"maxUnhealthy": True}})
    assert mhc.to_dict()["status"] == {"remediationsAllowed": 0}


@pytest.mark.parametrize(
    "value, total, expected",
    [(None, 7, 7), (3, 7, 3), (0, 7, 0), (-2, 7, 0), ("100%", 7, 7), ("40%", 7, 2), ("0%", 7, 0), ("50%", 1, 0),
     ("34%", 3, 1)],
)
def test_max_unhealthy_count(value, total, expected):
    assert max_unhealthy_count(value, total) == expected


@pytest.mark.parametrize("value", ["3", "abc%", "%"])
def test_max_unhealthy_strings_without_a_valid_percentage_are_unusable(value):
    with pytest.raises(ValueError):
        max_unhealthy_count(value, 10)


@pytest.mark.parametrize(
    "text, seconds",
    [("0", 0.0), ("300s", 300.0), ("10m", 600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("250ms", 0.25), ("2µs", 2e-6)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "5x", "m", "1h 30m", "-1s"])
def test_parse_duration_rejects_what_the_crd_pattern_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_label_and_annotation_jsonpaths_escape_dots():
    assert keys.jsonpath_for("annotations", keys.ANNOTATION_INSTANCE_STATE) == (
        ".metadata.annotations['machine\\.openshift\\.io/instance-state']"
    )


@pytest.mark.parametrize(
    "spec, problems",
    [
        ({"selector": {"matchLabels": {"a": "1"}}, "template": {"metadata": {"labels": {"a": "1", "b": "2"}}}}, []),
        ({"selector": {}, "template": {"metadata": {"labels": {"a": "1"}}}},
         ["spec.selector: Invalid value: an empty selector is not valid for a MachineSet"]),
        (
            {"selector": {"matchLabels": {"a": "1"}}, "template": {"metadata": {"labels": {"a": "2"}}}},
            ["spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"],
        ),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
            ["spec.selector.matchExpressions[0].values: must be non-empty for operator In"],
        ),
    ],
)
def test_machineset_selector_problems(spec, problems):
    assert MachineSet.from_dict({"spec": spec}).spec.selector_problems() == problems


def test_sample_machineset_selector_is_usable():
    doc = yaml.safe_load((Path(__file__).resolve().parents[2] / "config/samples/machineset.yaml").read_text())
    assert MachineSet.from_dict(doc).spec.selector_problems() == []
