"""The engine's add-time refusals that no retry changes, checked before any VM exists
(docs/compatibility.md#engine-limits)."""

from __future__ import annotations

import ovirtsdk4.types as types
import pytest

from api.provider_spec import parse_provider_spec
from machine_controller.controllers.provider import InvalidMachineConfiguration
from machine_controller.ovirt.engine_limits import check_memory, check_vm_name, platform_memory_limit_mb

TIB_MB = 1024 * 1024


def spec(**fields):
    return parse_provider_spec({"cluster_id": "c1", "template_name": "rhcos", "memory_mb": 16384, **fields})


def cluster(major: int, minor: int) -> types.Cluster:
    return types.Cluster(id="c1", name="Default", version=types.Version(major=major, minor=minor))


def test_vm_names_up_to_64_characters():
    check_vm_name("w" * 64)
    with pytest.raises(InvalidMachineConfiguration,
                       match=r"metadata.name: Invalid value: .*no more than 64 .*it is 65"):
        check_vm_name("w" * 65)


@pytest.mark.parametrize("level,limit", [((4, 2), 6), ((4, 5), 6), ((4, 6), 16), ((4, 7), 16), ((4, 8), 64)])
def test_platform_limit_by_cluster_level(level, limit):
    assert platform_memory_limit_mb(level) == limit * TIB_MB


def test_memory_beyond_a_quarter_of_the_level_limit_is_refused():
    check_memory(spec(memory_mb=4 * TIB_MB), cluster(4, 7))  # maximum 16 TiB: exactly the limit
    with pytest.raises(InvalidMachineConfiguration,
                       match=r"memory_mb: Invalid value: 4194305: must be at most 4194304 "
                             r"on cluster Default \(level 4.7\)"):
        check_memory(spec(memory_mb=4 * TIB_MB + 1), cluster(4, 7))
    check_memory(spec(memory_mb=4 * TIB_MB + 1), cluster(4, 8))  # 64 TiB platform limit there


def test_instance_types_and_unknown_levels_are_left_to_the_engine():
    check_memory(spec(memory_mb=5 * TIB_MB, instance_type_id="it1"), cluster(4, 5))
    check_memory(spec(memory_mb=5 * TIB_MB), types.Cluster(id="c1"))
