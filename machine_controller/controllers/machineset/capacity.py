"""Scale-from-zero capacity of a MachineSet, from its template's oVirt provider spec
(docs/compatibility.md#autoscaler). Pure: the reconciler writes the result onto the MachineSet.

cluster-autoscaler considers a MachineSet with 0 replicas only if it can build a template node, which needs CPU
and memory; it reads them from annotations on the MachineSet. OpenShift's forks up to release-4.18 read the
`machine.openshift.io/*` keys, newer ones prefer the upstream `capacity.cluster-autoscaler.kubernetes.io/*` keys,
so both spellings are written, with the same values.

- vCPU and memory: the VM's size from its spec (api/capacity.py, shared with OvirtMachineTemplate's capacity):
  `memoryMb` is an integer MiB, the upstream `memory` a quantity in Mi.
- maxPods = 250: OpenShift's kubelet config sets maxPods 250, while the autoscaler assumes 110 without the key.
- No GPU keys: the oVirt provider spec has no way to attach a GPU.

When that size is unknown (an oVirt instance type, whose size only the engine knows: this controller stays
independent of oVirt; cpu or memory_mb missing), the reconciler withdraws the values it wrote earlier and says so
in an event; values a user set by hand (the documented way for instance types) are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from api import keys
from api.capacity import vm_size
from api.field_errors import InvalidProviderSpec
from api.provider_spec import parse_provider_spec

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
    size = vm_size(spec, "the template's provider spec", "set the capacity annotations by hand to scale from zero")
    if size.unknown is not None:
        return Capacity({}, size.unknown)
    return Capacity({
        keys.ANNOTATION_VCPU: str(size.vcpus),
        keys.ANNOTATION_MEMORY_MB: str(size.memory_mb),
        keys.ANNOTATION_MAX_PODS: str(max_pods),
        keys.ANNOTATION_CAPACITY_CPU: str(size.vcpus),
        keys.ANNOTATION_CAPACITY_MEMORY: size.memory_quantity,
        keys.ANNOTATION_CAPACITY_MAX_PODS: str(max_pods),
    })
