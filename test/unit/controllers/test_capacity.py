"""Scale-from-zero capacity annotations from an oVirt provider spec (docs/compatibility.md#autoscaler)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from api import keys
from machine_controller.controllers.machineset.capacity import CAPACITY_ANNOTATIONS, capacity_from_provider_spec

REPO = Path(__file__).resolve().parents[3]
SAMPLE = yaml.safe_load((REPO / "config" / "samples" / "machineset.yaml").read_text())
SPEC = SAMPLE["spec"]["template"]["spec"]["providerSpec"]["value"]  # 1 socket x 4 cores x 1 thread, 16348 MiB


def spec(**changes) -> dict:
    value = copy.deepcopy(SPEC)
    for k, v in changes.items():
        if v is None:
            value.pop(k, None)
        else:
            value[k] = v
    return value


def test_sample_worker_gets_both_spellings_with_the_same_values():
    capacity = capacity_from_provider_spec(SPEC)
    assert capacity.unknown is None
    assert capacity.annotations == {
        keys.ANNOTATION_VCPU: "4",
        keys.ANNOTATION_MEMORY_MB: "16348",
        keys.ANNOTATION_MAX_PODS: "250",
        keys.ANNOTATION_CAPACITY_CPU: "4",
        keys.ANNOTATION_CAPACITY_MEMORY: "16348Mi",
        keys.ANNOTATION_CAPACITY_MAX_PODS: "250",
    }
    assert set(capacity.annotations) == set(CAPACITY_ANNOTATIONS)


def test_vcpus_multiply_sockets_cores_and_threads():
    capacity = capacity_from_provider_spec(spec(cpu={"sockets": 2, "cores": 3, "threads": 2}))
    assert capacity.annotations[keys.ANNOTATION_VCPU] == "12"
    assert capacity.annotations[keys.ANNOTATION_CAPACITY_CPU] == "12"


def test_max_pods_can_be_overridden():
    capacity = capacity_from_provider_spec(SPEC, max_pods=110)
    assert capacity.annotations[keys.ANNOTATION_MAX_PODS] == "110"
    assert capacity.annotations[keys.ANNOTATION_CAPACITY_MAX_PODS] == "110"


def test_yaml_text_provider_spec_is_read_like_a_mapping():
    assert capacity_from_provider_spec(yaml.safe_dump(SPEC)) == capacity_from_provider_spec(SPEC)


def test_no_gpu_keys_are_written():
    annotations = capacity_from_provider_spec(SPEC).annotations
    assert keys.ANNOTATION_GPU not in annotations
    assert keys.ANNOTATION_CAPACITY_GPU_COUNT not in annotations


def test_instance_type_makes_capacity_unknown_and_says_why():
    capacity = capacity_from_provider_spec(spec(instance_type_id="a1b2-large", cpu=None, memory_mb=None))
    assert capacity.annotations == {}
    assert "a1b2-large" in capacity.unknown and "by hand" in capacity.unknown


def test_missing_cpu_or_memory_makes_capacity_unknown():
    for changes in ({"cpu": None}, {"memory_mb": None}, {"memory_mb": 0},
                    {"cpu": {"sockets": 0, "cores": 4, "threads": 1}}):
        capacity = capacity_from_provider_spec(spec(**changes))
        assert capacity.annotations == {} and capacity.unknown, changes


def test_unreadable_or_absent_provider_spec_makes_capacity_unknown():
    for value in (None, "cpu: [unclosed", {"memory_mb": "lots"}):
        capacity = capacity_from_provider_spec(value)
        assert capacity.annotations == {} and "cannot be read" in capacity.unknown, value
