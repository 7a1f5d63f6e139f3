"""The one write path: only changed fields are sent, a lost race is the runtime's Conflict or Gone, and the controller
loop ends such a pass without an error (docs/architecture.md#writing-an-object)."""

from __future__ import annotations

import time

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from machine_controller.runtime.controller import Controller, Result, running
from machine_controller.runtime.kube import Resource
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.testing import wait_until
from machine_controller.runtime.workqueue import WorkQueue
from machine_controller.runtime.writes import Conflict, Gone, changed_fields, write

WIDGETS = Resource("example.com", "v1", "widgets", "Widget")


class RecordingRest:
    """Records merge patches and answers with the object patched, or with the given API error."""

    def __init__(self, fail_with: int | None = None) -> None:
        self.patches: list[tuple[str, dict, str | None]] = []
        self.fail_with = fail_with

    def merge_patch(self, resource, name, patch, namespace=None, subresource=None):
        self.patches.append((name, patch, subresource))
        if self.fail_with:
            raise ApiException(status=self.fail_with, reason="Conflict" if self.fail_with == 409 else "NotFound")
        return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "2"}, **patch}


def widget() -> dict:
    return {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "1",
                         "annotations": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"size": 1}, "status": {"phase": "Running", "detail": {"k": "v", "n": 1}}}


def test_changed_fields_keeps_only_what_a_merge_patch_must_carry():
    old = {"phase": "Running", "detail": {"k": "v", "n": 1}, "list": [1, 2]}
    assert changed_fields(old, {"phase": "Running"}) == {}
    assert changed_fields(old, {"phase": "Failed"}) == {"phase": "Failed"}
    assert changed_fields(old, {"detail": {"k": "v", "n": 2}}) == {"detail": {"n": 2}}, "a map is merged key by key"
    assert changed_fields(old, {"list": [1]}) == {"list": [1]}, "a list is replaced whole"
    assert changed_fields(old, {"gone": None}) == {}, "removing what is not there is no change"
    assert changed_fields(old, {"phase": None}) == {"phase": None}, "a null removes the field"


def test_status_write_sends_the_changed_fields_to_the_status_subresource_guarded():
    rest = RecordingRest()
    obj = widget()
    assert write(rest, WIDGETS, obj, status={"phase": "Running"}, guarded=True, stamp={"at": "t"}) is None
    assert rest.patches == [], "nothing changed: nothing is sent, not even the stamp"
    write(rest, WIDGETS, obj, status={"phase": "Failed", "detail": {"k": "v", "n": 1}}, guarded=True,
          stamp={"at": "t"})
    assert rest.patches == [("w", {"status": {"phase": "Failed", "at": "t"},
                                   "metadata": {"resourceVersion": "1"}}, "status")]


def test_metadata_write_goes_to_the_object_and_merges_maps():
    rest = RecordingRest()
    write(rest, WIDGETS, widget(), metadata={"annotations": {"a": "1", "c": "3"}}, spec={"size": 1})
    assert rest.patches == [("w", {"metadata": {"annotations": {"c": "3"}}}, None)]
    with pytest.raises(ValueError):
        write(rest, WIDGETS, widget(), metadata={"finalizers": []}, status={"phase": "x"})


@pytest.mark.parametrize("code, raised", [(409, Conflict), (404, Gone)])
def test_a_lost_race_is_the_runtimes_own_exception(code, raised):
    with pytest.raises(raised):
        write(RecordingRest(fail_with=code), WIDGETS, widget(), status={"phase": "Failed"}, guarded=True)


def test_other_errors_come_as_they_came():
    with pytest.raises(ApiException):
        write(RecordingRest(fail_with=500), WIDGETS, widget(), status={"phase": "Failed"})


def test_the_loop_repeats_a_conflicted_pass_soon_and_ends_a_gone_one_without_error():
    registry = CollectorRegistry()
    times: dict[str, list[float]] = {"ns/c": [], "ns/g": []}

    def reconcile(key: str) -> Result:
        times[key].append(time.monotonic())
        if key == "ns/c" and len(times[key]) == 1:
            raise Conflict("moved on")
        if key == "ns/g":
            raise Gone("deleted")
        return Result()

    queue = WorkQueue("c", rate_limiter=controller_rate_limiter(base=5, cap=5), registry=registry)
    with running(Controller("c", queue, reconcile, workers=1, registry=registry, conflict_requeue_s=0.1)) as c:
        c.queue.add("ns/c")
        c.queue.add("ns/g")
        assert wait_until(lambda: len(times["ns/c"]) == 2, timeout=3)
        time.sleep(0.2)
    assert times["ns/c"][1] - times["ns/c"][0] >= 0.1, "repeated after the conflict delay, not the error backoff"
    assert len(times["ns/g"]) == 1, "a deleted object is done"
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "c"}) == 0
