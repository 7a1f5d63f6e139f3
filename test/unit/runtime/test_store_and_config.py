"""Pure pieces: the informer's indexed store, key helpers, leader-election config rules."""

from __future__ import annotations

import json

import pytest

from machine_controller.runtime.informer import Store, compact
from machine_controller.runtime.kube import NODES, Resource, object_key, split_key
from machine_controller.runtime.leader_election import LeaderElectionConfig


def pod(name: str, node: str, namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"nodeName": node}}


def test_store_indexes_follow_updates_and_removals() -> None:
    store = Store({"nodeName": lambda o: [o["spec"]["nodeName"]] if o["spec"].get("nodeName") else []})
    store.put(pod("a", "n1"))
    store.put(pod("b", "n1"))
    store.put(pod("c", "n2"))
    assert [o["metadata"]["name"] for o in store.by_index("nodeName", "n1")] == ["a", "b"]
    old = store.put(pod("a", "n2"))  # moved
    assert old is not None and old["spec"]["nodeName"] == "n1"
    assert [o["metadata"]["name"] for o in store.by_index("nodeName", "n1")] == ["b"]
    assert [o["metadata"]["name"] for o in store.by_index("nodeName", "n2")] == ["a", "c"]
    store.remove("ns/b")
    assert store.by_index("nodeName", "n1") == []
    assert store.get("ns/b") is None and len(store) == 2
    store.put(pod("d", ""))
    assert store.by_index("nodeName", "") == []


def test_an_index_added_to_a_filled_store_covers_what_it_holds_and_what_comes_and_goes() -> None:
    store = Store()
    store.put(pod("a", "n1"))
    store.add_indexer("nodeName", lambda o: [o["spec"]["nodeName"]])
    store.add_indexer("nodeName", lambda o: ["another function"])  # the same name again keeps the first
    store.put(pod("b", "n1"))
    assert [o["metadata"]["name"] for o in store.by_index("nodeName", "n1")] == ["a", "b"]
    store.put(pod("a", "n2"))
    store.remove("ns/b")
    assert store.by_index("nodeName", "n1") == []
    assert [o["metadata"]["name"] for o in store.by_index("nodeName", "n2")] == ["a"]


def test_keys_and_paths() -> None:
    assert object_key({"metadata": {"name": "m", "namespace": "ns"}}) == "ns/m"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert split_key("ns/m") == ("ns", "m") and split_key("node-1") == (None, "node-1")
    machines = Resource("machine.openshift.io", "v1beta1", "machines", "Machine")
    assert machines.path("ns", "m", "status") == "/apis/machine.openshift.io/v1beta1/namespaces/ns/machines/m/status"
    assert machines.path() == "/apis/machine.openshift.io/v1beta1/machines"
    assert NODES.path("ignored", "n1") == "/api/v1/nodes/n1"
    assert machines.api_version == "machine.openshift.io/v1beta1" and NODES.api_version == "v1"


def test_leader_election_config_defaults_follow_the_ovirt_provider() -> None:
    config = LeaderElectionConfig("openshift-machine-api", "cluster-api-provider-ovirt-leader", "pod-1")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (120.0, 110.0, 20.0)


def test_leader_election_config_rejects_unsafe_durations() -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig("ns", "l", "me", lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError):
        LeaderElectionConfig("ns", "l", "me", lease_duration=10, renew_deadline=5, retry_period=5)
    with pytest.raises(ValueError):
        LeaderElectionConfig("ns", "l", "")


def test_compact_drops_managed_fields_and_shares_repeated_strings_without_changing_the_object():
    text = json.dumps({"metadata": {"name": "worker-0", "namespace": "openshift-machine-api",
                                    "managedFields": [{"manager": "kubectl"}],
                                    "annotations": {"note": "x" * 100}},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}], "replicas": 3}})
    a, b = compact(json.loads(text)), compact(json.loads(text))
    expected = json.loads(text)
    del expected["metadata"]["managedFields"]
    assert a == expected and b == expected
    # Equal keys and short values are one object in both; a long value is not kept alive in the intern table.
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert next(iter(a["status"])) is next(iter(b["status"]))
    assert a["status"]["conditions"][0]["status"] is b["status"]["conditions"][0]["status"]
    assert a["metadata"]["annotations"]["note"] is not b["metadata"]["annotations"]["note"]
