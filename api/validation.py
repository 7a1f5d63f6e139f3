"""Validation of an OvirtMachineProviderSpec before any oVirt call (docs/compatibility.md#provider-spec), reporting
every problem. All but the user data Secret's rule are the VM settings' (`validate_vm_spec`), which judge Cluster API's
OvirtMachine.spec too (api/infrastructure.py): one validation, in the same words, for both front ends.

The rules of the Go actuator's validations.go, in its order, plus those a careful implementation adds where
the Go code lets a bad spec through to a confusing engine fault or silently ignores a setting:
- template_name and cluster_id non-empty (the CRD of the Go provider marks them required), template_name searchable
  as a literal (api/search_text.py);
- cpu sockets/cores/threads > 0, memory_mb, guaranteed_memory_mb and os_disk.size_gb not negative, and none
  beyond what an oVirt engine can give (memory, CPU topology, disk size);
  guaranteed memory is forbidden with an instance type (the Go actuator would not send it);
- auto_pinning_policy limited to its documented values (Go enables pinning for any other string, 6.2 item 7);
- disk settings that need cloned disks (storage_domain_id, format raw, sparse=false) rejected when the
  template disks are not cloned: a thin VM's disks are qcow2 overlays on the template's own storage domain;
- format limited to raw/cow; affinity group names and vNIC profile ids non-empty, group names unique;
- every id (cluster_id, instance_type_id, storage_domain_id, vnic_profile_id) an engine UUID when set: ids go into
  the engine's URL paths, where a space turns into an HTTP error that looks transient and is retried for ever
  (docs/architecture.md#acting-only-on-what-is-ours).
The engine-version check for auto-pinning needs the engine and is the actuator's job.
"""

from __future__ import annotations

from typing import Any, Mapping

from api.field_errors import FieldError, InvalidProviderSpec
from api.ids import NOT_AN_OVIRT_ID, is_ovirt_id
from api.provider_spec import (
    HUGEPAGES_SIZES,
    PROVIDER_SPEC_PATH,
    AutoPinningPolicy,
    DiskFormat,
    OvirtMachineProviderSpec,
    VMSpec,
    VMType,
    parse_provider_spec,
)
from api.search_text import UNSEARCHABLE, unsearchable_char

__all__ = ["FieldError", "InvalidProviderSpec", "load_provider_spec", "validate_provider_spec", "validate_vm_spec"]

# The engine's own limits (its vdc_options, docs/compatibility.md#engine-limits). They depend on the cluster level;
# these are the most generous of current levels (4.6/4.7), so nothing a real engine accepts is refused here, and
# values no engine can satisfy fail at once instead of leaving a VM that never starts.
MAX_MEMORY_MB = 6 * 1024 * 1024  # VM64BitMaxMemorySizeInMB: 6 TiB
MAX_VCPUS = 710  # MaxNumOfVmCpus for x86_64
MAX_SOCKETS = 10000  # MaxNumOfVmSockets
MAX_CORES_PER_SOCKET = 254  # MaxNumOfCpuPerSocket
MAX_THREADS_PER_CORE = 8  # MaxNumOfThreadsPerCpu
MAX_DISK_GB = (2 ** 63 - 1) // (1024 ** 3)  # provisioned_size is a signed 64-bit byte count


def _quoted(values: Any) -> str:
    return ", ".join(f'"{v}"' for v in values)


class _Errors:
    def __init__(self, base: str):
        self.base = base
        self.items: list[FieldError] = []

    def add(self, field: str, message: str) -> None:
        self.items.append(FieldError(f"{self.base}.{field}", message))

    def required(self, field: str, detail: str) -> None:
        self.add(field, f"Required value: {detail}")

    def invalid(self, field: str, value: Any, detail: str) -> None:
        shown = f'"{value}"' if isinstance(value, str) else value
        self.add(field, f"Invalid value: {shown}: {detail}")

    def unsupported(self, field: str, value: Any, supported: str) -> None:
        shown = f'"{value}"' if isinstance(value, str) else value
        self.add(field, f"Unsupported value: {shown}: supported values: {supported}")

    def forbidden(self, field: str, detail: str) -> None:
        self.add(field, f"Forbidden: {detail}")

    def positive(self, field: str, value: int) -> None:
        if value <= 0:
            self.invalid(field, value, "must be greater than 0")


def validate_provider_spec(spec: OvirtMachineProviderSpec, base: str = PROVIDER_SPEC_PATH) -> list[FieldError]:
    """Every problem of `spec`, in a stable order; an empty list means valid."""
    errs = _Errors(base)
    _secrets(spec, errs)
    _vm(spec, errs)
    return errs.items


def validate_vm_spec(spec: VMSpec, base: str) -> list[FieldError]:
    """Every problem of the VM settings `spec`, with paths under `base` (`spec` for an OvirtMachine), in the
    provider spec's order and words: one validation for both front ends."""
    errs = _Errors(base)
    _vm(spec, errs)
    return errs.items


def _vm(spec: VMSpec, errs: _Errors) -> None:
    _placement(spec, errs)
    _ids(spec, errs)
    _sizing(spec, errs)
    if spec.os_disk is None:
        errs.required("os_disk", "must give the size of the bootable disk")
    else:
        errs.positive("os_disk.size_gb", spec.os_disk.size_gb)
        if spec.os_disk.size_gb > MAX_DISK_GB:
            errs.invalid("os_disk.size_gb", spec.os_disk.size_gb,
                         f"must be at most {MAX_DISK_GB} (the engine counts disk sizes in bytes as a 64-bit number)")
    _vm_type(spec, errs)
    if spec.auto_pinning_policy and spec.auto_pinning_policy not in set(AutoPinningPolicy):
        errs.unsupported("auto_pinning_policy", spec.auto_pinning_policy, _quoted(AutoPinningPolicy))
    if spec.hugepages not in HUGEPAGES_SIZES:
        errs.unsupported("hugepages", spec.hugepages, ", ".join(str(s) for s in HUGEPAGES_SIZES if s))
    _disks(spec, errs)
    _names(spec, errs)


def load_provider_spec(raw: bytes | str | Mapping[str, Any] | None) -> OvirtMachineProviderSpec:
    """Parse and validate a providerSpec value; raises InvalidProviderSpec carrying every problem found."""
    spec = parse_provider_spec(raw)
    errors = validate_provider_spec(spec)
    if errors:
        raise InvalidProviderSpec(errors)
    return spec


def _secrets(spec: OvirtMachineProviderSpec, errs: _Errors) -> None:
    if spec.user_data_secret is None:
        errs.required("userDataSecret", "must reference the Secret holding the Ignition user data")
    elif not spec.user_data_secret.name:
        errs.required("userDataSecret.name", "must name the Secret holding the Ignition user data")


def _placement(spec: VMSpec, errs: _Errors) -> None:
    if not spec.template_name:
        errs.required("template_name", "must name the oVirt template to create the VM from")
    elif unsearchable_char(spec.template_name) is not None:
        errs.invalid("template_name", spec.template_name, UNSEARCHABLE)  # it is searched for by name
    if not spec.cluster_id:
        errs.required("cluster_id", "must be the ID of the oVirt cluster to create the VM in")


def _ids(spec: VMSpec, errs: _Errors) -> None:
    # An empty id is unset (or refused as required by its own rule).
    for field, value in spec.ids():
        if value and not is_ovirt_id(value):
            errs.invalid(field, value, NOT_AN_OVIRT_ID)


def _sizing(spec: VMSpec, errs: _Errors) -> None:
    if spec.instance_type_id:
        # The instance type fixes CPU and memory; the Go actuator refuses both alongside it (4.2).
        for field, is_set in (
            ("memory_mb", spec.memory_mb != 0),
            ("cpu", spec.cpu is not None),
            ("guaranteed_memory_mb", spec.guaranteed_memory_mb != 0),
        ):
            if is_set:
                errs.forbidden(field, "must not be set together with instance_type_id")
        return
    if spec.memory_mb == 0:
        errs.required("memory_mb", "must be set when instance_type_id is not set")
    else:
        errs.positive("memory_mb", spec.memory_mb)
    if spec.memory_mb > MAX_MEMORY_MB:
        errs.invalid("memory_mb", spec.memory_mb, f"must be at most {MAX_MEMORY_MB} (6 TiB, the most any oVirt "
                                                  "engine gives a 64-bit VM)")
    if spec.cpu is None:
        errs.required("cpu", "must be set when instance_type_id is not set")
    else:
        for field in ("sockets", "cores", "threads"):
            errs.positive(f"cpu.{field}", getattr(spec.cpu, field))
        for field, limit in (("sockets", MAX_SOCKETS), ("cores", MAX_CORES_PER_SOCKET),
                             ("threads", MAX_THREADS_PER_CORE)):
            value = getattr(spec.cpu, field)
            if value > limit:
                errs.invalid(f"cpu.{field}", value, f"must be at most {limit}")
        vcpus = spec.cpu.sockets * spec.cpu.cores * spec.cpu.threads
        if vcpus > MAX_VCPUS:
            errs.invalid("cpu", f"{spec.cpu.sockets}x{spec.cpu.cores}x{spec.cpu.threads}",
                         f"{vcpus} vCPUs; an oVirt VM has at most {MAX_VCPUS}")
    if spec.guaranteed_memory_mb < 0:
        errs.invalid("guaranteed_memory_mb", spec.guaranteed_memory_mb, "must not be negative")
    elif spec.memory_mb > 0 and spec.guaranteed_memory_mb > spec.memory_mb:
        errs.invalid(
            "guaranteed_memory_mb", spec.guaranteed_memory_mb, f"must not exceed memory_mb ({spec.memory_mb})"
        )


def _vm_type(spec: VMSpec, errs: _Errors) -> None:
    supported = _quoted(VMType)
    if not spec.type:
        errs.required("type", f"supported values: {supported}")
    elif spec.type not in set(VMType):
        errs.unsupported("type", spec.type, supported)


def _disks(spec: VMSpec, errs: _Errors) -> None:
    if spec.format and spec.format not in set(DiskFormat):
        errs.unsupported("format", spec.format, _quoted(DiskFormat))
    if spec.effective_clone:
        return
    why = "clone is false" if spec.clone is False else f'clone defaults to false for type "{spec.type}"'
    if spec.storage_domain_id:
        errs.forbidden(
            "storage_domain_id",
            f"needs cloned template disks but {why}; thin disks stay on the template's storage domain",
        )
    if spec.format == DiskFormat.RAW:
        errs.forbidden("format", f'"raw" needs cloned template disks but {why}; thin disks are cow overlays')
    if spec.sparse is False:
        errs.forbidden("sparse", f"false (preallocated) needs cloned template disks but {why}; thin disks are sparse")


def _names(spec: VMSpec, errs: _Errors) -> None:
    seen: set[str] = set()
    for i, name in enumerate(spec.affinity_groups_names):
        field = f"affinity_groups_names[{i}]"
        if not name.strip():
            errs.invalid(field, name, "must be a non-empty affinity group name")
        elif name in seen:
            errs.add(field, f'Duplicate value: "{name}"')
        seen.add(name)
    for i, nic in enumerate(spec.network_interfaces):
        if not nic.vnic_profile_id:
            errs.required(f"network_interfaces[{i}].vnic_profile_id", "must be the ID of an oVirt vNIC profile")
