"""The FakeApi behaves as the API server does where the reconcilers depend on it; a fake that drifted would let
the reconciler tests pass for the wrong reason."""

from __future__ import annotations

import pytest

from fakes import FakeActuator, FakeApi, merge_patch
from machine_controller.controllers.resources import MACHINES, NODES, PODS
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import ErrorKind, classify

NS = "ns"


def seeded() -> tuple[FakeApi, Store]:
    api = FakeApi()
    store = api.cache(MACHINES, Store())
    api.seed(MACHINES, {"metadata": {"name": "m", "namespace": NS, "labels": {"a": "1", "b": "2"}},
                        "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}, "status": {"phase": "Running"}})
    return api, store


def test_merge_patch_deletes_with_null_merges_objects_and_replaces_lists():
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3], "k": None}) == {"a": {"c": 2, "d": 3}, "l": [3]}
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}


def test_writes_bump_the_resource_version_and_reach_the_store():
    api, store = seeded()
    rv = api.object(MACHINES, "m", NS)["metadata"]["resourceVersion"]
    out = api.merge_patch(MACHINES, "m", {"metadata": {"labels": {"a": None, "c": "3"}}}, NS)
    assert int(out["metadata"]["resourceVersion"]) > int(rv)
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert store.get(f"{NS}/m") == out


def test_a_stale_resource_version_is_a_409_conflict():
    api, _ = seeded()
    rv = api.object(MACHINES, "m", NS)["metadata"]["resourceVersion"]
    api.touch(MACHINES, "m", NS)
    with pytest.raises(Exception) as raised:
        api.merge_patch(MACHINES, "m", {"metadata": {"resourceVersion": rv, "labels": {"a": "9"}}}, NS)
    assert classify(raised.value) is ErrorKind.CONFLICT
    assert api.object(MACHINES, "m", NS)["metadata"]["labels"]["a"] == "1"


def test_a_missing_object_is_a_404_the_classifier_reads():
    api, _ = seeded()
    with pytest.raises(Exception) as raised:
        api.get(MACHINES, "nope", NS)
    assert raised.value.status == 404 and classify(raised.value) is ErrorKind.NOT_FOUND
    assert '"reason": "NotFound"' in raised.value.body


def test_the_status_subresource_writes_status_only_and_the_main_resource_never_status():
    api, _ = seeded()
    api.merge_patch(MACHINES, "m", {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "9"}}}, NS,
                    subresource="status")
    api.merge_patch(MACHINES, "m", {"status": {"phase": "Deleting"}, "spec": {"providerID": "p"}}, NS)
    obj = api.object(MACHINES, "m", NS)
    assert obj["status"]["phase"] == "Failed" and obj["metadata"]["labels"]["a"] == "1"
    assert obj["spec"]["providerID"] == "p"


def test_finalizers_hold_a_deleted_object_until_the_last_one_goes():
    api, store = seeded()
    api.merge_patch(MACHINES, "m", {"metadata": {"finalizers": ["f"]}}, NS)
    api.delete(MACHINES, "m", NS)
    assert api.object(MACHINES, "m", NS)["metadata"]["deletionTimestamp"]
    with pytest.raises(Exception) as raised:
        api.merge_patch(MACHINES, "m", {"metadata": {"finalizers": ["f", "g"]}}, NS)
    assert classify(raised.value) is ErrorKind.INVALID
    api.merge_patch(MACHINES, "m", {"metadata": {"finalizers": []}}, NS)
    assert api.object(MACHINES, "m", NS) is None and store.get(f"{NS}/m") is None


def test_a_frozen_cache_lags_behind():
    api, store = seeded()
    api.freeze_cache(MACHINES)
    api.remove(MACHINES, "m", NS)
    assert store.get(f"{NS}/m") is not None


def test_pods_by_node_and_eviction():
    api = FakeApi()
    for name, node in (("a", "n1"), ("b", "n1"), ("c", "n2")):
        api.seed(PODS, {"metadata": {"name": name, "namespace": NS}, "spec": {"nodeName": node}})
    listed = api.request("GET", PODS.path(), query={"fieldSelector": "spec.nodeName=n1"})
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a", "b"]
    api.refused_evictions.add(f"{NS}/a")
    with pytest.raises(Exception) as raised:
        api.request("POST", PODS.path(NS, "a", "eviction"), body={})
    assert classify(raised.value) is ErrorKind.TOO_MANY_REQUESTS
    api.request("POST", PODS.path(NS, "b", "eviction"), body={})
    assert api.object(PODS, "b", NS)["metadata"]["deletionTimestamp"]  # terminating until the kubelet is done
    api.terminate_pods()
    assert api.object(PODS, "b", NS) is None and api.evictions == [f"{NS}/b"]


def test_injected_faults_and_cluster_scoped_objects():
    api = FakeApi()
    nodes = api.cache(NODES, Store())
    api.seed(NODES, {"metadata": {"name": "n"}})
    api.fail("DELETE", NODES, 500)
    with pytest.raises(Exception) as raised:
        api.delete(NODES, "n")
    assert classify(raised.value) is ErrorKind.TRANSIENT
    api.delete(NODES, "n")
    assert api.object(NODES, "n") is None and nodes.get("n") is None


def test_the_fake_actuator_repeats_its_last_answer_and_refuses_unscripted_calls():
    actuator = FakeActuator(find=[None, ValueError("boom")])
    assert actuator.find("n", None) is None
    for _ in range(2):
        with pytest.raises(ValueError):
            actuator.find("n", None)
    with pytest.raises(AssertionError, match="unexpected actuator call"):
        actuator.delete(type("M", (), {"metadata": type("Meta", (), {"name": "m"})()})())
    assert actuator.calls == {"find": 3, "delete": 1}
