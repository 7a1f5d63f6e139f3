"""The reconciler does not repeat a burst of creates or deletes, nor count short after a lost adoption race, while
its cache lags behind its own writes.

On a real API server the informer is usually quick enough to hide the race (the e2e test counts creates too);
here the cache is a Store the test fills by hand, so the lag is certain.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from machine_controller.controllers.machineset.reconciler import MachineSetReconciler
from machine_controller.controllers.resources import MACHINES
from machine_controller.runtime.informer import Store

REPO = Path(__file__).resolve().parents[3]
SAMPLE = yaml.safe_load((REPO / "config" / "samples" / "machineset.yaml").read_text())
NS = "openshift-machine-api"


class FakeRest:
    """Records writes; creates answer with a server-generated name, as the API server does for generateName."""

    def __init__(self) -> None:
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.conflict_on_machine_patch = False
        self._ids = itertools.count()

    def create(self, resource, body: dict, namespace: str | None = None) -> dict:
        assert resource == MACHINES
        obj = copy.deepcopy(body)
        obj["metadata"]["name"] = f"{body['metadata']['generateName']}{next(self._ids):05d}"
        obj["metadata"]["resourceVersion"] = "1"
        self.created.append(obj)
        return obj

    def delete(self, resource, name: str, namespace: str | None = None) -> dict:
        self.deleted.append(name)
        return {}

    def merge_patch(self, resource, *args: Any, **kwargs: Any) -> dict:
        if resource == MACHINES and self.conflict_on_machine_patch:
            raise ApiException(status=409, reason="Conflict")
        return {}

    def request(self, *args: Any, **kwargs: Any) -> dict:
        return {}


class FakeEvents:
    def normal(self, *args: Any) -> None:
        pass

    def warning(self, *args: Any) -> None:
        pass


def setup(replicas: int) -> tuple[MachineSetReconciler, FakeRest, Store, Store]:
    ms = copy.deepcopy(SAMPLE)
    ms["metadata"].update(namespace=NS, uid="ms-uid", generation=1, resourceVersion="1")
    ms["spec"]["replicas"] = replicas
    machinesets, machines, nodes = Store(), Store(), Store()
    machinesets.put(ms)
    rest = FakeRest()
    return MachineSetReconciler(rest, machinesets, machines, nodes, FakeEvents()), rest, machinesets, machines


KEY = f"{NS}/{SAMPLE['metadata']['name']}"


def test_creates_are_not_repeated_until_the_cache_shows_them():
    reconciler, rest, _, machines = setup(replicas=3)
    reconciler.reconcile(KEY)
    assert len(rest.created) == 3
    result = reconciler.reconcile(KEY)  # the cache still shows no Machine
    assert len(rest.created) == 3
    assert result is not None and result.requeue_after > 0  # looks again even if no event came
    for obj in rest.created[:2]:
        machines.put(obj)
    reconciler.reconcile(KEY)  # one still unseen: still no scaling
    assert len(rest.created) == 3
    machines.put(rest.created[2])
    reconciler.reconcile(KEY)
    assert len(rest.created) == 3 and rest.deleted == []


def test_deletes_are_not_repeated_until_the_cache_shows_them():
    reconciler, rest, machinesets, machines = setup(replicas=3)
    reconciler.reconcile(KEY)
    for obj in rest.created:
        machines.put(obj)
    scaled = copy.deepcopy(machinesets.get(KEY))
    scaled["spec"]["replicas"] = 1
    machinesets.put(scaled)
    reconciler.reconcile(KEY)
    assert len(rest.deleted) == 2
    reconciler.reconcile(KEY)  # the deleted Machines are still in the cache
    assert len(rest.deleted) == 2
    for name in rest.deleted:
        machines.remove(f"{NS}/{name}")
    reconciler.reconcile(KEY)
    assert len(rest.deleted) == 2 and len(rest.created) == 3


def test_a_lost_adoption_race_holds_scaling_back():
    reconciler, rest, machinesets, machines = setup(replicas=1)
    template = machinesets.get(KEY)["spec"]["template"]
    machines.put({"metadata": {"name": "orphan", "namespace": NS, "resourceVersion": "7",
                               "labels": dict(template["metadata"]["labels"])}, "spec": template["spec"]})
    rest.conflict_on_machine_patch = True  # e.g. this set adopted it a moment ago; the cache still shows an orphan
    result = reconciler.reconcile(KEY)
    assert rest.created == []
    assert result is not None and 0 < result.requeue_after <= 1
    rest.conflict_on_machine_patch = False
    reconciler.reconcile(KEY)
    assert rest.created == []  # adopted now: it is the one replica
