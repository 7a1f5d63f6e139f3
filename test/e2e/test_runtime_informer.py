"""The informer against a real API server: list+watch, recovery from a compacted resourceVersion, resync,
indexes, and custom resources."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from machine_controller.runtime.informer import Informer, compact
from machine_controller.runtime.kube import CONFIG_MAPS, Resource, Rest, object_key
from machine_controller.runtime.testing import wait_until

LABEL = "runtime-e2e=yes"


class Recorder:
    """Collects (verb, key, rv) in arrival order from an informer's handlers."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def _rec(self, verb: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.events.append((verb, object_key(obj), obj["metadata"].get("resourceVersion", "")))

    def attach(self, informer: Informer) -> "Recorder":
        informer.add_event_handler(
            on_add=lambda o: self._rec("add", o),
            on_update=lambda old, new: self._rec("resync" if old is new else "update", new),
            on_delete=lambda o: self._rec("delete", o),
        )
        return self

    def seen(self, verb: str, key: str) -> bool:
        with self.lock:
            return any(v == verb and k == key for v, k, _ in self.events)

    def count(self, verb: str, key: str) -> int:
        with self.lock:
            return sum(1 for v, k, _ in self.events if v == verb and k == key)


def configmap(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"runtime-e2e": "yes"}}, "data": data}


@pytest.fixture
def rest(cluster) -> Rest:
    return Rest(cluster.api_client())


@pytest.fixture
def informers():
    started: list[Informer] = []
    yield started
    for informer in started:
        informer.stop()


def test_list_then_watch_delivers_adds_updates_and_deletes(cluster, namespace, rest, informers):
    rest.create(CONFIG_MAPS, configmap(namespace, "before-1", node="n1"), namespace)
    rest.create(CONFIG_MAPS, configmap(namespace, "before-2", node="n2"), namespace)
    informer = Informer(cluster.api_client(), CONFIG_MAPS, namespace=namespace, label_selector=LABEL,
                        page_size=1,  # two objects: the list takes two pages and must follow `continue`
                        indexers={"node": lambda o: [o.get("data", {}).get("node", "")]})
    recorder = Recorder().attach(informer)
    informers.append(informer)
    informer.start()
    assert informer.wait_for_sync(30)
    assert recorder.seen("add", f"{namespace}/before-1") and recorder.seen("add", f"{namespace}/before-2")
    assert sorted(informer.store.keys()) == [f"{namespace}/before-1", f"{namespace}/before-2"], \
        "the label selector keeps kube-root-ca.crt out"

    rest.create(CONFIG_MAPS, configmap(namespace, "new", node="n1"), namespace)
    rest.merge_patch(CONFIG_MAPS, "before-1", {"data": {"node": "n3"}}, namespace)
    rest.delete(CONFIG_MAPS, "before-2", namespace)

    assert wait_until(lambda: recorder.seen("delete", f"{namespace}/before-2"))
    assert wait_until(lambda: recorder.seen("add", f"{namespace}/new"))
    assert wait_until(lambda: recorder.seen("update", f"{namespace}/before-1"))
    assert sorted(informer.store.keys()) == [f"{namespace}/before-1", f"{namespace}/new"]
    assert informer.store.get(f"{namespace}/before-1")["data"]["node"] == "n3"
    assert [object_key(o) for o in informer.store.by_index("node", "n1")] == [f"{namespace}/new"]
    assert [object_key(o) for o in informer.store.by_index("node", "n3")] == [f"{namespace}/before-1"]
    assert informer.store.by_index("node", "n2") == []
    assert informer.list_count == 1, "no relist on a healthy watch"


MACHINES = Resource("machine.openshift.io", "v1beta1", "machines", "Machine")


def machine(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": namespace, "labels": {"v": "1"}}, "spec": {}}


def test_watch_from_a_too_old_resource_version_relists_and_recovers_missed_changes(
        cluster, namespace, rest, informers):
    # Machines rather than ConfigMaps: a custom resource's watch cache starts at the resourceVersion at which
    # its CRD was established, so RV "1" is older than anything it holds and the server must answer 410
    # "too old resource version" on any cluster. (On a fresh local cluster the ConfigMap cache still holds RV 1
    # and would replay history instead.)
    cluster.apply_crds()
    for name in ("keep", "change", "remove"):
        rest.create(MACHINES, machine(namespace, name), namespace)
    informer = Informer(cluster.api_client(), MACHINES, namespace=namespace)
    recorder = Recorder().attach(informer)
    informers.append(informer)
    informer.start()
    assert informer.wait_for_sync(30)
    assert len(informer.store) == 3
    informer.stop()

    # Changes the informer does not see while it is down...
    rest.merge_patch(MACHINES, "change", {"metadata": {"labels": {"v": "2"}}}, namespace)
    rest.delete(MACHINES, "remove", namespace)
    rest.create(MACHINES, machine(namespace, "added"), namespace)

    # ...then a resume from the too-old RV: the informer must relist and emit the difference.
    informer.start(resume_from="1")
    assert wait_until(lambda: informer.list_count == 2), "the 410 must lead to a relist"
    assert wait_until(lambda: recorder.seen("delete", f"{namespace}/remove"))
    assert recorder.seen("update", f"{namespace}/change")
    assert recorder.seen("add", f"{namespace}/added")
    assert not recorder.seen("update", f"{namespace}/keep"), "unchanged objects are not re-announced"
    assert sorted(informer.store.keys()) == sorted(f"{namespace}/{n}" for n in ("keep", "change", "added"))
    assert informer.store.get(f"{namespace}/change")["metadata"]["labels"]["v"] == "2"

    # And it watches again afterwards.
    rest.merge_patch(MACHINES, "keep", {"metadata": {"labels": {"v": "3"}}}, namespace)
    assert wait_until(lambda: recorder.seen("update", f"{namespace}/keep"))
    assert informer.list_count == 2


def test_resync_re_emits_every_cached_object(cluster, namespace, rest, informers):
    rest.create(CONFIG_MAPS, configmap(namespace, "a"), namespace)
    rest.create(CONFIG_MAPS, configmap(namespace, "b"), namespace)
    informer = Informer(cluster.api_client(), CONFIG_MAPS, namespace=namespace, label_selector=LABEL,
                        resync_period=0.3)
    recorder = Recorder().attach(informer)
    informers.append(informer)
    informer.start()
    assert informer.wait_for_sync(30)
    assert wait_until(lambda: recorder.count("resync", f"{namespace}/a") >= 2
                      and recorder.count("resync", f"{namespace}/b") >= 2)
    assert informer.list_count == 1, "resync replays the cache; it does not relist"


def test_handler_added_after_sync_receives_the_cache_as_adds(cluster, namespace, rest, informers):
    rest.create(CONFIG_MAPS, configmap(namespace, "a"), namespace)
    informer = Informer(cluster.api_client(), CONFIG_MAPS, namespace=namespace, label_selector=LABEL)
    informers.append(informer)
    informer.start()
    assert informer.wait_for_sync(30)
    late = Recorder().attach(informer)
    assert late.seen("add", f"{namespace}/a")


def test_custom_resources_are_informed_as_plain_dicts(cluster, namespace, rest, informers):
    cluster.apply_crds()
    informer = Informer(cluster.api_client(), MACHINES, namespace=namespace)
    recorder = Recorder().attach(informer)
    informers.append(informer)
    informer.start()
    assert informer.wait_for_sync(30)
    rest.create(MACHINES, machine(namespace, "m1"), namespace)
    assert wait_until(lambda: recorder.seen("add", f"{namespace}/m1"))
    cached = informer.store.get(f"{namespace}/m1")
    assert cached["kind"] == "Machine" and cached["apiVersion"] == "machine.openshift.io/v1beta1"
    rest.delete(MACHINES, "m1", namespace)
    assert wait_until(lambda: recorder.seen("delete", f"{namespace}/m1"))


def test_a_transform_trims_what_is_cached_listed_and_watched_alike(cluster, namespace, rest, informers):
    rest.create(CONFIG_MAPS, configmap(namespace, "listed"), namespace)
    informer = Informer(cluster.api_client(), CONFIG_MAPS, namespace=namespace, label_selector=LABEL,
                        transform=compact)
    recorder = Recorder().attach(informer)
    informers.append(informer)
    informer.start()
    assert informer.wait_for_sync(30)
    rest.create(CONFIG_MAPS, configmap(namespace, "watched"), namespace)
    rest.merge_patch(CONFIG_MAPS, "listed", {"data": {"k": "v"}}, namespace)
    assert wait_until(lambda: recorder.seen("add", f"{namespace}/watched")
                      and recorder.seen("update", f"{namespace}/listed"))
    assert rest.get(CONFIG_MAPS, "watched", namespace)["metadata"].get("managedFields"), "the server keeps them"
    for name in ("listed", "watched"):
        cached = informer.store.get(f"{namespace}/{name}")
        assert "managedFields" not in cached["metadata"] and cached["metadata"]["resourceVersion"]
