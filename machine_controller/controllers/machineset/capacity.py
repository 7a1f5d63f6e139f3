"""Scale-from-zero capacity of a MachineSet, from its template's oVirt provider spec
(docs/compatibility.md#autoscaler). Pure: the reconciler writes the result onto the MachineSet.

cluster-autoscaler considers a MachineSet with 0 replicas only if it can build a template node, which needs CPU
and memory; it reads them from annotations on the MachineSet. OpenShift's forks up to release-4.18 read the
`machine.openshift.io/*` keys, newer ones prefer the upstream `capacity.cluster-autoscaler.kubernetes.io/*` keys,
so both spellings are written, with the same values.

- vCPU = sockets * cores * threads of `cpu` (the VM topology the actuator sends, docs/compatibility.md#provider-spec).
- memory = `memory_mb` MiB (the actuator sends memory_mb * 2^20 bytes): `memoryMb` is an integer MiB, the
  upstream `memory` a quantity in Mi.
- maxPods = 250: OpenShift's kubelet config sets maxPods 250, while the autoscaler assumes 110 without the key.
- No GPU keys: the oVirt provider spec has no way to attach a GPU.

With `instance_type_id` the VM's size is the oVirt instance type's, which only the engine knows; this controller
stays independent of oVirt, so the capacity is *unknown* then (likewise when cpu or memory_mb is missing: the
actuator would reject that spec anyway). The reconciler then withdraws the values it wrote earlier and says so in
an event; values a user set by hand (the documented way for instance types) are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from api import keys
from api.field_errors import InvalidProviderSpec
from api.provider_spec import parse_provider_spec
from api.validation import MAX_MEMORY_MB, MAX_VCPUS

# OpenShift's default KubeletConfig (machine-config-operator templates): maxPods 250.
OPENSHIFT_MAX_PODS = 250

CAPACITY_ANNOTATIONS = (
    keys.ANNOTATION_VCPU, keys.ANNOTATION_MEMORY_MB, keys.ANNOTATION_MAX_PODS,
    keys.ANNOTATION_CAPACITY_CPU, keys.ANNOTATION_CAPACITY_MEMORY, keys.ANNOTATION_CAPACITY_MAX_PODS,
)


@dataclass(frozen=True)
class Capacity:
    """The annotations to carry, or why none can be computed (`unknown` is then a sentence for an event)."""

    annotations: dict[str, str]
    unknown: str | None = None


def capacity_from_provider_spec(value: Mapping[str, Any] | str | None, max_pods: int = OPENSHIFT_MAX_PODS) -> Capacity:
    """The scale-from-zero annotations for a MachineSet whose template has this `providerSpec.value`."""
    try:
        spec = parse_provider_spec(value)
    except InvalidProviderSpec as e:
        return Capacity({}, f"the template's provider spec cannot be read: {e}")
    if spec.instance_type_id:
        return Capacity({}, f"the template uses oVirt instance type {spec.instance_type_id}, whose size only "
                            "the engine knows; set the capacity annotations by hand to scale from zero")
    cpu = spec.cpu
    # Each factor: two negative ones made a positive count.
    if cpu is None or min(cpu.sockets, cpu.cores, cpu.threads) <= 0 or spec.memory_mb <= 0:
        return Capacity({}, "the template's provider spec sets no positive cpu topology and memory_mb")
    vcpus = cpu.vcpus
    # Beyond what any oVirt VM has, and the memory beyond int64 bytes for the cluster-autoscaler to read.
    if vcpus > MAX_VCPUS or spec.memory_mb > MAX_MEMORY_MB:
        return Capacity({}, f"the template's provider spec asks for {vcpus} vCPUs and {spec.memory_mb} MiB, more "
                            f"than an oVirt VM has (at most {MAX_VCPUS} and {MAX_MEMORY_MB})")
    return Capacity({
        keys.ANNOTATION_VCPU: str(vcpus),
        keys.ANNOTATION_MEMORY_MB: str(spec.memory_mb),
        keys.ANNOTATION_MAX_PODS: str(max_pods),
        keys.ANNOTATION_CAPACITY_CPU: str(vcpus),
        keys.ANNOTATION_CAPACITY_MEMORY: f"{spec.memory_mb}Mi",
        keys.ANNOTATION_CAPACITY_MAX_PODS: str(max_pods),
    })
