"""The autoscaler's min/max annotations as cluster-autoscaler parses them (docs/compatibility.md#autoscaler)."""

from __future__ import annotations

import pytest

from api import keys
from machine_controller.controllers.machineset import autoscaler_bounds_problem

MIN, MAX = keys.ANNOTATION_AUTOSCALER_MIN_SIZE, keys.ANNOTATION_AUTOSCALER_MAX_SIZE


@pytest.mark.parametrize("annotations", [{}, {MIN: "0", MAX: "5"}, {MIN: "2", MAX: "2"}, {MAX: "3"}, {MIN: "1"}])
def test_valid_or_absent_bounds_are_no_problem(annotations):
    assert autoscaler_bounds_problem(annotations) is None


@pytest.mark.parametrize("annotations, words", [
    ({MIN: "one", MAX: "3"}, "not an integer"),
    ({MIN: "0", MAX: "-1"}, "negative"),
    ({MIN: "4", MAX: "2"}, "below min"),
])
def test_bounds_the_autoscaler_rejects_are_explained(annotations, words):
    assert words in autoscaler_bounds_problem(annotations)
