"""The autoscaler's min/max annotations as cluster-autoscaler parses them (docs/compatibility.md#autoscaler)."""

from __future__ import annotations

import copy

import pytest

from api import keys
from fakes import RecordingEvents
from machine_controller.controllers.machineset.reconciler import MachineSetReconciler, autoscaler_bounds_problem
from machine_controller.runtime.informer import Store
from test_machineset_expectations import KEY, NS, SAMPLE, FakeRest

MIN, MAX = keys.ANNOTATION_AUTOSCALER_MIN_SIZE, keys.ANNOTATION_AUTOSCALER_MAX_SIZE


@pytest.mark.parametrize("annotations", [{}, {MIN: "0", MAX: "5"}, {MIN: "2", MAX: "2"}, {MAX: "3"}, {MIN: "1"}])
def test_valid_or_absent_bounds_are_no_problem(annotations):
    assert autoscaler_bounds_problem(annotations) is None


@pytest.mark.parametrize("annotations, words", [
    ({MIN: "one", MAX: "3"}, "not an integer"),
    ({MIN: "1", MAX: " 3"}, "not an integer"),  # Go's strconv.Atoi takes no space, no `_`, no other digits
    ({MIN: "1_0", MAX: "30"}, "not an integer"),
    ({MIN: "1", MAX: "\u0663"}, "not an integer"),
    ({MIN: "1", MAX: str(2**63)}, "not an integer"),
    ({MIN: "0", MAX: "-1"}, "negative"),
    ({MIN: "4", MAX: "2"}, "below min"),
])
def test_bounds_the_autoscaler_rejects_are_explained(annotations, words):
    assert words in autoscaler_bounds_problem(annotations)


def test_the_warning_says_the_autoscaler_stops_scaling_every_set():
    """cluster-autoscaler's clusterapi provider builds its node groups from all MachineSets at once and gives up on
    the whole list at the first set whose min/max annotations do not parse, so no set is scaled, not only this
    one (docs/compatibility.md#autoscaler). The Warning must say that, and name the annotation at fault."""
    ms = copy.deepcopy(SAMPLE)
    ms["metadata"].update(namespace=NS, uid="ms-uid", generation=1, resourceVersion="1",
                          annotations={MIN: "4", MAX: "2"})
    ms["spec"]["replicas"] = 0
    machinesets = Store()
    machinesets.put(ms)
    events = RecordingEvents()
    MachineSetReconciler(FakeRest(), machinesets, Store(), Store(), events).reconcile(KEY)
    (warning,) = [e for e in events.recorded if e.reason == "InvalidAutoscalerBounds"]
    assert warning.type == "Warning" and warning.involved.endswith(KEY)
    assert MAX in warning.message and "below" in warning.message, warning.message
    assert "scales no MachineSet" in warning.message and "skip" not in warning.message, warning.message
