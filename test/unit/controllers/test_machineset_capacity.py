"""The capacity controller's decisions, case by case (docs/compatibility.md#autoscaler): when it applies, what, and
when it says the capacity is unknown. The e2e tests (test_machineset.py, test_mao_dropin.py) prove the same against
a real API server; here the Store is filled by hand, so each case is exact."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from api import keys
from machine_controller.controllers.machineset.capacity_controller import (
    CAPACITY_FIELD_MANAGER,
    MachineSetCapacityReconciler,
)
from machine_controller.runtime.informer import Store

REPO = Path(__file__).resolve().parents[3]
SAMPLE = yaml.safe_load((REPO / "config" / "samples" / "machineset.yaml").read_text())
NS = "openshift-machine-api"
KEY = f"{NS}/{SAMPLE['metadata']['name']}"
INSTANCE_TYPE = {"instance_type_id": "00000003-0003-0003-0003-0000000000be", "cpu": None, "memory_mb": None}


class FakeRest:
    def __init__(self) -> None:
        self.applied: list[tuple[dict, dict]] = []

    def request(self, method: str, path: str, query: dict, body: dict, content_type: str) -> dict:
        assert (method, content_type) == ("PATCH", "application/apply-patch+yaml")
        self.applied.append((query, body))
        return {}


class FakeEvents:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, obj: dict, reason: str, message: str) -> None:
        self.warnings.append(reason)


def setup(generation: int = 1, **value: Any) -> tuple[MachineSetCapacityReconciler, FakeRest, FakeEvents, Store]:
    ms = copy.deepcopy(SAMPLE)
    ms["metadata"].update(namespace=NS, uid="ms-uid", generation=generation, resourceVersion="1")
    provider = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
    provider.update(value)
    for k in [k for k, v in provider.items() if v is None]:
        del provider[k]
    store = Store()
    store.put(ms)
    rest, events = FakeRest(), FakeEvents()
    return MachineSetCapacityReconciler(rest, store, events), rest, events, store


def test_the_template_capacity_is_applied_under_its_own_manager_once():
    reconciler, rest, events, store = setup()
    reconciler.reconcile(KEY)
    assert len(rest.applied) == 1
    query, body = rest.applied[0]
    assert query == {"fieldManager": CAPACITY_FIELD_MANAGER, "force": "true"}
    annotations = body["metadata"]["annotations"]
    assert (annotations[keys.ANNOTATION_VCPU], annotations[keys.ANNOTATION_CAPACITY_MEMORY]) == ("4", "16348Mi")
    assert set(body) == {"apiVersion", "kind", "metadata"}  # the annotations only: no spec, no status
    assert body["metadata"]["uid"] == "ms-uid"  # never creates a set that is gone (test_machineset.py proves it)

    obj = store.get(KEY)
    obj["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}), **annotations}
    store.put(obj)
    reconciler.reconcile(KEY)  # already there: nothing written again
    assert len(rest.applied) == 1 and events.warnings == []


def test_unknown_capacity_is_said_once_per_generation_and_withdraws_only_what_it_wrote():
    reconciler, rest, events, store = setup(**INSTANCE_TYPE)
    reconciler.reconcile(KEY)
    reconciler.reconcile(KEY)
    assert events.warnings == ["CapacityUnknown"]
    assert rest.applied == []  # it never wrote any: nothing to withdraw

    obj = store.get(KEY)
    obj["metadata"]["generation"] = 2
    obj["metadata"]["managedFields"] = [{"manager": CAPACITY_FIELD_MANAGER, "operation": "Apply", "fieldsV1": {
        "f:metadata": {"f:annotations": {f"f:{keys.ANNOTATION_VCPU}": {}}}}}]
    store.put(obj)
    reconciler.reconcile(KEY)
    assert events.warnings == ["CapacityUnknown"] * 2  # a new edit, said again
    assert [body["metadata"]["annotations"] for _, body in rest.applied] == [{}]  # its own keys withdrawn


def test_a_set_being_deleted_or_gone_is_left_alone():
    reconciler, rest, events, store = setup()
    obj = store.get(KEY)
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    store.put(obj)
    reconciler.reconcile(KEY)
    store.remove(KEY)
    reconciler.reconcile(KEY)
    assert rest.applied == [] and events.warnings == []
