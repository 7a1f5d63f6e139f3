"""Events as `kubectl describe` shows them, with repeats aggregated instead of flooding the API."""

from __future__ import annotations

import threading

from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.kube import CONFIG_MAPS, EVENTS, Rest


def events_for(rest: Rest, namespace: str, name: str) -> list[dict]:
    listed = rest.request("GET", EVENTS.path(namespace), {"fieldSelector": f"involvedObject.name={name}"})
    return listed.get("items") or []


def make_object(rest: Rest, namespace: str, name: str) -> dict:
    obj = rest.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": name, "namespace": namespace}}, namespace)
    obj.setdefault("apiVersion", "v1")
    obj.setdefault("kind", "ConfigMap")
    return obj


def test_repeated_event_is_one_event_with_a_count(cluster, namespace):
    rest = Rest(cluster.api_client())
    obj = make_object(rest, namespace, "vm-1")
    recorder = EventRecorder(cluster.api_client(), component="runtime-e2e", host="test-host")
    try:
        for _ in range(3):
            recorder.warning(obj, "ProbeFailed", "engine unreachable")
        recorder.normal(obj, "Created", "created VM vm-1")
        assert recorder.flush(30)
    finally:
        recorder.close()

    events = {e["reason"]: e for e in events_for(rest, namespace, "vm-1")}
    assert set(events) == {"ProbeFailed", "Created"}
    probe = events["ProbeFailed"]
    assert probe["count"] == 3
    assert probe["type"] == "Warning" and probe["message"] == "engine unreachable"
    assert probe["involvedObject"]["kind"] == "ConfigMap"
    assert probe["involvedObject"]["name"] == "vm-1"
    assert probe["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert probe["source"] == {"component": "runtime-e2e", "host": "test-host"}
    assert probe["lastTimestamp"] >= probe["firstTimestamp"]
    assert events["Created"]["count"] == 1 and events["Created"]["type"] == "Normal"

    described = cluster.kubectl("-n", namespace, "describe", "configmap", "vm-1").stdout
    assert "ProbeFailed" in described and "engine unreachable" in described


def test_similar_events_with_changing_messages_are_combined(cluster, namespace):
    rest = Rest(cluster.api_client())
    obj = make_object(rest, namespace, "vm-2")
    recorder = EventRecorder(cluster.api_client(), component="runtime-e2e")
    try:
        for i in range(15):
            recorder.warning(obj, "CreateFailed", f"attempt {i}: disk locked")
        assert recorder.flush(30)
    finally:
        recorder.close()
    events = events_for(rest, namespace, "vm-2")
    # The first 10 distinct messages are written as such; after that one combined event absorbs the rest.
    assert len(events) == 11
    [combined] = [e for e in events if e["message"].startswith("(combined from similar events)")]
    assert combined["count"] == 5
    assert combined["message"] == "(combined from similar events): attempt 14: disk locked"


def test_a_hot_loop_is_cut_off_by_the_spam_filter(cluster, namespace):
    rest = Rest(cluster.api_client())
    obj = make_object(rest, namespace, "vm-3")
    recorder = EventRecorder(cluster.api_client(), component="runtime-e2e", spam_burst=5)
    try:
        for _ in range(50):
            recorder.warning(obj, "Flapping", "same thing again")
        assert recorder.flush(30)
    finally:
        recorder.close()
    [event] = events_for(rest, namespace, "vm-3")
    assert event["count"] == 5, "only the burst gets through; the rest is dropped, not written"


def test_an_event_names_the_object_as_it_was_when_recorded(cluster, namespace):
    """The reference is taken when the event is recorded, as client-go takes it: a caller that changes its object
    afterwards (a reconciler writes on after telling) does not change what the queued event says."""
    rest = Rest(cluster.api_client())
    obj = make_object(rest, namespace, "vm-4")
    recorded_version = obj["metadata"]["resourceVersion"]
    recorder = EventRecorder(cluster.api_client(), component="runtime-e2e")
    send, gate = recorder._send, threading.Event()

    def held(*args):  # the sender is held until the caller has changed its object
        gate.wait(10)
        return send(*args)

    recorder._send = held
    try:
        recorder.normal(obj, "Created", "created VM vm-4")
        obj["metadata"]["resourceVersion"] = "999999"
        obj["metadata"]["name"] = "someone-else"
        gate.set()
        assert recorder.flush(30)
    finally:
        recorder.close()
    [event] = events_for(rest, namespace, "vm-4")
    assert event["involvedObject"]["resourceVersion"] == recorded_version
