"""Scale-down victims per delete policy (docs/compatibility.md#machinesets), case by case."""

from __future__ import annotations

import datetime as dt

import pytest

from api import keys
from api.machine import Machine
from api.machineset import DeletePolicy
from api.meta import format_time
from machine_controller.controllers.machineset.delete_policy import machines_to_delete

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def machine(name: str, age_days: float | None = 1.0, node: bool = True, annotations: dict | None = None,
            error: str | None = None, deleting: bool = False) -> Machine:
    meta: dict = {"name": name, "namespace": "ns", "annotations": annotations or {}}
    if age_days is not None:
        meta["creationTimestamp"] = format_time(NOW - dt.timedelta(days=age_days))
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    status: dict = {}
    if node:
        status["nodeRef"] = {"kind": "Node", "name": f"node-{name}"}
    if error:
        status["errorMessage"] = error
    return Machine.from_dict({"metadata": meta, "status": status})


def victims(machines: list[Machine], count: int, policy: DeletePolicy) -> list[str]:
    return [m.metadata.name for m in machines_to_delete(machines, count, policy, NOW)]


ALL = list(DeletePolicy)


@pytest.mark.parametrize("policy", ALL)
def test_nothing_to_delete_for_zero_or_negative_count(policy):
    assert victims([machine("a")], 0, policy) == []
    assert victims([machine("a")], -1, policy) == []


@pytest.mark.parametrize("policy", ALL)
def test_count_at_or_above_size_deletes_every_machine(policy):
    ms = [machine("a"), machine("b")]
    assert sorted(victims(ms, 2, policy)) == ["a", "b"]
    assert sorted(victims(ms, 5, policy)) == ["a", "b"]


@pytest.mark.parametrize("policy", ALL)
@pytest.mark.parametrize("key", keys.DELETE_MACHINE_ANNOTATIONS)
def test_delete_annotation_wins_under_every_policy_with_either_key(policy, key):
    # The marked one is neither the oldest, nor the newest, nor node-less: only the mark can pick it.
    ms = [machine("old", age_days=30), machine("marked", age_days=5, annotations={key: "2026-05-01 11:59:00"}),
          machine("new", age_days=0.01), machine("nodeless", age_days=3, node=False)]
    assert victims(ms, 1, policy) == ["marked"]


@pytest.mark.parametrize("policy", ALL)
def test_empty_delete_annotation_value_is_no_mark(policy):
    ms = [machine("a", age_days=2, annotations={keys.ANNOTATION_DELETE_MACHINE: ""}), machine("b", age_days=1)]
    expected = {DeletePolicy.RANDOM: "a", DeletePolicy.NEWEST: "b", DeletePolicy.OLDEST: "a"}[policy]
    assert victims(ms, 1, policy) == [expected]


@pytest.mark.parametrize("policy", ALL)
def test_errored_machine_goes_before_healthy_ones_but_after_marked(policy):
    ms = [machine("healthy-old", age_days=40), machine("healthy-new", age_days=0.1),
          machine("failed", age_days=10, error="Can't find created instance."),
          machine("marked", age_days=10, annotations={keys.ANNOTATION_DELETE_MACHINE: "x"})]
    assert victims(ms, 2, policy) == ["marked", "failed"]


@pytest.mark.parametrize("policy", ALL)
def test_machine_already_deleting_ranks_first(policy):
    ms = [machine("marked", annotations={keys.ANNOTATION_DELETE_MACHINE: "x"}), machine("going", deleting=True)]
    assert victims(ms, 1, policy) == ["going"]


def test_random_prefers_machines_without_a_node():
    ms = [machine("a"), machine("b", node=False), machine("c")]
    assert victims(ms, 1, DeletePolicy.RANDOM) == ["b"]


def test_random_ignores_age_and_breaks_ties_by_name():
    ms = [machine("c", age_days=0.1), machine("a", age_days=9), machine("b", age_days=50)]
    assert victims(ms, 2, DeletePolicy.RANDOM) == ["a", "b"]


def test_newest_deletes_the_youngest_first():
    ms = [machine("mid", age_days=5), machine("young", age_days=0.5), machine("old", age_days=50)]
    assert victims(ms, 2, DeletePolicy.NEWEST) == ["young", "mid"]


def test_oldest_deletes_the_oldest_first():
    ms = [machine("mid", age_days=5), machine("young", age_days=0.5), machine("old", age_days=50)]
    assert victims(ms, 2, DeletePolicy.OLDEST) == ["old", "mid"]


@pytest.mark.parametrize("policy", [DeletePolicy.NEWEST, DeletePolicy.OLDEST])
def test_age_policies_do_not_prefer_nodeless_machines(policy):
    # A replacement still provisioning (no node yet) must survive an Oldest scale-down.
    ms = [machine("old", age_days=30), machine("fresh-nodeless", age_days=0.01, node=False)]
    expected = "old" if policy == DeletePolicy.OLDEST else "fresh-nodeless"
    assert victims(ms, 1, policy) == [expected]


def test_unknown_or_future_creation_time_counts_as_newest():
    ms = [machine("no-time", age_days=None), machine("future", age_days=-1), machine("old", age_days=3)]
    assert victims(ms, 1, DeletePolicy.OLDEST) == ["old"]
    assert set(victims(ms, 2, DeletePolicy.NEWEST)) == {"no-time", "future"}


def test_very_old_machine_does_not_outrank_a_marked_one_under_oldest():
    # MAO release-4.13's formula let a years-old Machine tie with must-delete ones; here the mark always wins.
    ms = [machine("ancient", age_days=3000), machine("marked", age_days=1, annotations={
        keys.ANNOTATION_DELETE_MACHINE_LEGACY: "yes"})]
    assert victims(ms, 1, DeletePolicy.OLDEST) == ["marked"]


def test_several_marked_machines_are_ordered_by_the_policy():
    mark = {keys.ANNOTATION_DELETE_MACHINE: "x"}
    ms = [machine("m-old", age_days=9, annotations=mark), machine("m-new", age_days=1, annotations=mark),
          machine("plain", age_days=20)]
    assert victims(ms, 1, DeletePolicy.OLDEST) == ["m-old"]
    assert victims(ms, 1, DeletePolicy.NEWEST) == ["m-new"]
