"""The size of one VM made from a VM spec (vCPUs and memory), for the cluster-autoscaler's scale from zero: one
computation for both front ends (docs/compatibility.md#autoscaler), a MachineSet's capacity annotations and an
OvirtMachineTemplate's `status.capacity`. Pure: no engine is asked.

- vCPUs = sockets * cores * threads of `cpu` (the VM topology the actuator sends, docs/compatibility.md#provider-spec).
- memory = `memory_mb` MiB (the actuator sends memory_mb * 2^20 bytes), as a Kubernetes quantity in Mi.

With `instance_type_id` the VM's size is the oVirt instance type's, which only the engine knows, so the size is
*unknown* then; likewise when cpu or memory_mb is missing or not positive (the actuator would reject that spec
anyway), or beyond what any oVirt VM has (docs/compatibility.md#engine-limits). `unknown` then says why, in words
for an event.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.provider_spec import VMSpec
from api.validation import MAX_MEMORY_MB, MAX_VCPUS


@dataclass(frozen=True)
class VMSize:
    """vCPUs and MiB of memory, or why they cannot be known (`unknown`, a sentence; the numbers are then 0)."""

    vcpus: int = 0
    memory_mb: int = 0
    unknown: str | None = None

    @property
    def memory_quantity(self) -> str:
        """The memory as a Kubernetes quantity: what the autoscaler parses (resource.ParseQuantity)."""
        return f"{self.memory_mb}Mi"


def vm_size(spec: VMSpec, spec_name: str, by_hand: str) -> VMSize:
    """The size of a VM made from `spec`. `spec_name` names the spec in the reasons ("the template's provider
    spec"), `by_hand` says what a user can do when only the engine knows the size."""
    if spec.instance_type_id:
        return VMSize(unknown=f"the template uses oVirt instance type {spec.instance_type_id}, whose size only "
                              f"the engine knows; {by_hand}")
    cpu = spec.cpu
    # Each factor: two negative ones made a positive count.
    if cpu is None or min(cpu.sockets, cpu.cores, cpu.threads) <= 0 or spec.memory_mb <= 0:
        return VMSize(unknown=f"{spec_name} sets no positive cpu topology and memory_mb")
    vcpus = cpu.vcpus
    # Beyond what any oVirt VM has, and the memory beyond int64 bytes for the cluster-autoscaler to read.
    if vcpus > MAX_VCPUS or spec.memory_mb > MAX_MEMORY_MB:
        return VMSize(unknown=f"{spec_name} asks for {vcpus} vCPUs and {spec.memory_mb} MiB, more than an oVirt "
                              f"VM has (at most {MAX_VCPUS} and {MAX_MEMORY_MB})")
    return VMSize(vcpus, spec.memory_mb)
