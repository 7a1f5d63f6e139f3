"""Refusals of the engine's VM add that no retry can change, checked before any VM exists so that the Machine ends
`Failed` with a precise message instead of retrying a 400 forever (docs/compatibility.md#engine-limits).

The provider-spec validation (api/validation.py) refuses what no engine can give; these checks depend on the
Machine's name and on its cluster's compatibility level, which only the actuator knows.
"""

from __future__ import annotations

import ovirtsdk4.types as types

from api.provider_spec import OvirtMachineProviderSpec
from machine_controller.controllers.provider import InvalidMachineConfiguration

MAX_VM_NAME_LENGTH = 64  # MaxVmNameLength; the VM is named after its Machine
DEFAULT_MAX_MEMORY_RATIO = 4  # a VM added without memory_policy.max gets four times its memory as maximum
_TIB_MB = 1024 * 1024
# VM64BitMaxMemorySizeInMB by cluster level, newest first.
_PLATFORM_MEMORY_MB = (((4, 8), 64 * _TIB_MB), ((4, 6), 16 * _TIB_MB), ((0, 0), 6 * _TIB_MB))


def check_vm_name(name: str) -> None:
    if len(name) > MAX_VM_NAME_LENGTH:
        raise InvalidMachineConfiguration(
            f"metadata.name: Invalid value: {name!r}: must be no more than {MAX_VM_NAME_LENGTH} characters "
            f"(it is {len(name)}): the Machine's name is its oVirt VM's, and the engine refuses longer VM names")


def platform_memory_limit_mb(level: tuple[int, int]) -> int:
    return next(limit for since, limit in _PLATFORM_MEMORY_MB if level >= since)


def check_memory(spec: OvirtMachineProviderSpec, cluster: types.Cluster) -> None:
    """The engine gives a VM four times its memory as maximum and refuses a maximum above its cluster level's
    platform limit: memory above a quarter of that limit can never be added."""
    if spec.instance_type_id or not spec.memory_mb or cluster.version is None:
        return
    level = (cluster.version.major or 0, cluster.version.minor or 0)
    limit = platform_memory_limit_mb(level)
    if spec.memory_mb * DEFAULT_MAX_MEMORY_RATIO > limit:
        raise InvalidMachineConfiguration(
            f"spec.providerSpec.value.memory_mb: Invalid value: {spec.memory_mb}: must be at most "
            f"{limit // DEFAULT_MAX_MEMORY_RATIO} on cluster {cluster.name or cluster.id} "
            f"(level {level[0]}.{level[1]}): "
            f"the engine sets a VM's maximum memory to {DEFAULT_MAX_MEMORY_RATIO} times its memory and refuses a "
            f"maximum above the level's platform limit of {limit} MiB")
