"""Label selectors (matching, kubectl string form) and condition set semantics (docs/compatibility.md#object-shapes)."""

from __future__ import annotations

import datetime as dt

import pytest

from api.meta import (
    Condition,
    InvalidSelector,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    OwnerReference,
    false_condition,
    format_time,
    get_condition,
    parse_time,
    set_condition,
    true_condition,
    unknown_condition,
)


def sel(match_labels=None, *exprs) -> LabelSelector:
    return LabelSelector(
        match_labels=match_labels or {},
        match_expressions=[LabelSelectorRequirement(key=k, operator=op, values=list(v)) for k, op, v in exprs],
    )


# --- matching -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "selector, labels, expected",
    [
        (sel(), {}, True),
        (sel(), {"a": "1"}, True),
        (sel({"a": "1"}), {"a": "1", "b": "2"}, True),
        (sel({"a": "1"}), {"a": "2"}, False),
        (sel({"a": "1"}), {}, False),
        (sel({"a": "1", "b": "2"}), {"a": "1"}, False),
        (sel(None, ("env", "In", ["prod", "dev"])), {"env": "dev"}, True),
        (sel(None, ("env", "In", ["prod"])), {"env": "dev"}, False),
        (sel(None, ("env", "In", ["prod"])), {}, False),
        (sel(None, ("env", "NotIn", ["prod"])), {"env": "dev"}, True),
        (sel(None, ("env", "NotIn", ["prod"])), {}, True),
        (sel(None, ("env", "NotIn", ["prod"])), {"env": "prod"}, False),
        (sel(None, ("env", "Exists", [])), {"env": ""}, True),
        (sel(None, ("env", "Exists", [])), {}, False),
        (sel(None, ("env", "DoesNotExist", [])), {}, True),
        (sel(None, ("env", "DoesNotExist", [])), {"env": "x"}, False),
        (sel({"a": "1"}, ("env", "Exists", [])), {"a": "1"}, False),
        (sel({"a": "1"}, ("env", "Exists", [])), {"a": "1", "env": "x"}, True),
    ],
)
def test_selector_matches(selector, labels, expected):
    assert selector.matches(labels) is expected


def test_none_labels_are_no_labels():
    assert sel().matches(None) is True
    assert sel({"a": "1"}).matches(None) is False


@pytest.mark.parametrize(
    "selector, problem",
    [
        (sel(None, ("k", "In", [])), "matchExpressions[0].values: must be non-empty for operator In"),
        (sel(None, ("k", "NotIn", [])), "matchExpressions[0].values: must be non-empty for operator NotIn"),
        (sel(None, ("k", "Exists", ["x"])), "matchExpressions[0].values: must be empty for operator Exists"),
        (sel(None, ("k", "Exists", []), ("k", "Equals", ["x"])),
         'matchExpressions[1].operator: "Equals" is not a valid label selector operator'),
    ],
)
def test_malformed_selectors_are_rejected(selector, problem):
    assert selector.problems() == [problem]
    with pytest.raises(InvalidSelector, match="matchExpressions"):
        selector.matches({"k": "x"})
    with pytest.raises(InvalidSelector):
        selector.to_string()


# --- string form (metav1.FormatLabelSelector) ---------------------------------------------------------


@pytest.mark.parametrize(
    "selector, text",
    [
        (sel(), "<none>"),
        (sel({"b": "2", "a": "1"}), "a=1,b=2"),
        (
            sel(
                {"machine.openshift.io/cluster-api-machineset": "w", "machine.openshift.io/cluster-api-cluster": "c"}
            ),
            "machine.openshift.io/cluster-api-cluster=c,machine.openshift.io/cluster-api-machineset=w",
        ),
        (sel(None, ("env", "In", ["prod", "dev"])), "env in (dev,prod)"),
        (sel(None, ("env", "NotIn", ["b", "a"])), "env notin (a,b)"),
        (sel(None, ("gpu", "Exists", [])), "gpu"),
        (sel(None, ("spot", "DoesNotExist", [])), "!spot"),
        (
            sel({"z": "1"}, ("a", "Exists", []), ("m", "In", ["x"])),
            "a,m in (x),z=1",
        ),
    ],
)
def test_selector_string_form_matches_kubectl(selector, text):
    assert selector.to_string() == text


def test_selector_json_round_trip():
    raw = {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
    selector = LabelSelector.from_dict(raw)
    assert selector == sel({"a": "1"}, ("k", "In", ["v"]))
    assert selector.to_dict() == raw
    assert LabelSelector.from_dict({}).is_empty()


# --- conditions ---------------------------------------------------------------------------------------

T0 = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
T1 = T0 + dt.timedelta(minutes=5)


def test_setting_a_new_condition_stamps_the_transition_time():
    conditions = set_condition([], true_condition("InstanceExists"), at=T0)
    assert conditions == [Condition(type="InstanceExists", status="True", last_transition_time="2024-01-02T03:04:05Z")]


def test_setting_an_unchanged_condition_keeps_its_transition_time():
    first = set_condition([], false_condition("Drained", "DrainError", "Warning", "boom"), at=T0)
    again = set_condition(first, false_condition("Drained", "DrainError", "Warning", "boom"), at=T1)
    assert again == first


@pytest.mark.parametrize(
    "changed",
    [
        false_condition("Drained", "DrainError", "Warning", "other message"),
        false_condition("Drained", "OtherReason", "Warning", "boom"),
        false_condition("Drained", "DrainError", "Error", "boom"),
        true_condition("Drained"),
        unknown_condition("Drained", "DrainError", "boom"),
    ],
)
def test_any_change_of_status_reason_severity_or_message_restamps(changed):
    first = set_condition([], false_condition("Drained", "DrainError", "Warning", "boom"), at=T0)
    after = set_condition(first, changed, at=T1)
    assert len(after) == 1
    assert after[0].last_transition_time == "2024-01-02T03:09:05Z"
    assert (after[0].status, after[0].reason, after[0].message) == (changed.status, changed.reason, changed.message)


def test_conditions_are_kept_sorted_by_type_and_input_is_not_modified():
    conditions = set_condition([], true_condition("Terminable"), at=T0)
    conditions = set_condition(conditions, true_condition("Drainable"), at=T0)
    before = list(conditions)
    result = set_condition(conditions, unknown_condition("InstanceExists", "ErrorCheckingProvider", "x"), at=T0)
    assert [c.type for c in result] == ["Drainable", "InstanceExists", "Terminable"]
    assert conditions == before
    assert get_condition(result, "InstanceExists").reason == "ErrorCheckingProvider"
    assert get_condition(result, "Drained") is None


def test_default_transition_time_is_now_in_whole_utc_seconds():
    stamped = set_condition([], true_condition("A"))[0].last_transition_time
    parsed = parse_time(stamped)
    assert stamped.endswith("Z") and parsed.microsecond == 0
    assert abs((dt.datetime.now(dt.timezone.utc) - parsed).total_seconds()) < 5


def test_condition_json_names():
    c = false_condition("Drained", "DrainError", "Warning", "m")
    c = set_condition([], c, at=T0)[0]
    assert c.to_dict() == {
        "type": "Drained",
        "status": "False",
        "severity": "Warning",
        "lastTransitionTime": "2024-01-02T03:04:05Z",
        "reason": "DrainError",
        "message": "m",
    }


def test_time_format_round_trip_and_naive_is_utc():
    assert format_time(dt.datetime(2024, 1, 2, 3, 4, 5, 999)) == "2024-01-02T03:04:05Z"
    assert parse_time("2024-01-02T03:04:05Z") == T0
    assert format_time(parse_time("2024-01-02T05:04:05+02:00")) == "2024-01-02T03:04:05Z"


# --- object metadata ----------------------------------------------------------------------------------


def test_object_meta_controller_ref_and_deleting():
    meta = ObjectMeta.from_dict(
        {
            "name": "m",
            "namespace": "ns",
            "deletionTimestamp": "2024-01-02T03:04:05Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "1"},
                {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "ms", "uid": "2",
                 "controller": True, "blockOwnerDeletion": True},
            ],
            "managedFields": [{"manager": "kubectl"}],
        }
    )
    assert meta.deleting
    assert meta.controller_ref() == OwnerReference(
        api_version="machine.openshift.io/v1beta1", kind="MachineSet", name="ms", uid="2", controller=True,
        block_owner_deletion=True,
    )
    assert not ObjectMeta().deleting and ObjectMeta().controller_ref() is None
