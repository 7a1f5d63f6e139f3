"""OvirtMachineProviderSpec / OvirtMachineProviderStatus (`ovirtproviderconfig.machine.openshift.io/v1beta1`,
docs/compatibility.md#provider-spec): the raw `spec.providerSpec.value` of an oVirt Machine and its
`status.providerStatus`.

The JSON keys are those of cluster-api-provider-ovirt: snake_case for the VM settings, camelCase for the two
secret references. The Go actuator YAML-unmarshals the raw value, so JSON and YAML are both accepted and
unknown keys are ignored; parsing does the same. Semantic checks live in `api.validation`
(`load_provider_spec` there parses and validates in one call).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Iterator, Mapping, TypeVar

import yaml

from api._codec import DecodeError, JSONObject, from_dict
from api._fields import prop
from api.field_errors import FieldError, InvalidProviderSpec
from api.meta import LocalObjectReference

T = TypeVar("T")

PROVIDER_API_VERSION = "ovirtproviderconfig.machine.openshift.io/v1beta1"
PROVIDER_SPEC_KIND = "OvirtMachineProviderSpec"
PROVIDER_STATUS_KIND = "OvirtMachineProviderStatus"
# Where the value sits in a Machine; the prefix of every FieldError path.
PROVIDER_SPEC_PATH = "spec.providerSpec.value"


class VMType(StrEnum):
    DESKTOP = "desktop"
    SERVER = "server"
    HIGH_PERFORMANCE = "high_performance"


class AutoPinningPolicy(StrEnum):
    NONE = "none"
    RESIZE_AND_PIN = "resize_and_pin"


class DiskFormat(StrEnum):
    RAW = "raw"
    COW = "cow"


# KiB page sizes the engine supports as the `hugepages` custom property; 0 = none (docs/compatibility.md#provider-spec).
HUGEPAGES_SIZES = (0, 2048, 1048576)


@dataclass
class CPU(JSONObject):
    """VM CPU topology; total vCPUs = sockets * cores * threads."""

    sockets: int = prop("sockets", default=0, omitempty=False)
    cores: int = prop("cores", default=0, omitempty=False)
    threads: int = prop("threads", default=0, omitempty=False)

    @property
    def vcpus(self) -> int:
        return self.sockets * self.cores * self.threads


@dataclass
class OSDisk(JSONObject):
    """The bootable disk; grown to size_gb GiB if the template disk is smaller, never shrunk (4.3 step 8)."""

    size_gb: int = prop("size_gb", default=0, omitempty=False)


@dataclass
class NetworkInterface(JSONObject):
    vnic_profile_id: str = prop("vnic_profile_id", default="", omitempty=False)


@dataclass
class VMSpec(JSONObject):
    """The VM settings of an oVirt machine, one definition for both front ends of the seam
    (docs/architecture.md#the-seam): the Machine API's provider spec (OvirtMachineProviderSpec) and Cluster API's
    OvirtMachine.spec (api/infrastructure.py). `api.validation.validate_vm_spec` judges them for both."""

    template_name: str = prop("template_name", default="", omitempty=False,
                              doc="Name of the oVirt template the VM is created from.")
    cluster_id: str = prop("cluster_id", default="", omitempty=False,
                           doc="ID of the oVirt cluster the VM is created in.")
    instance_type_id: str = prop("instance_type_id", default="",
                                 doc="ID of an oVirt instance type; it fixes CPU and memory.")
    cpu: CPU | None = prop("cpu", default=None, doc="CPU topology; required without instance_type_id.")
    memory_mb: int = prop("memory_mb", default=0, doc="Memory in MiB; required without instance_type_id.")
    os_disk: OSDisk | None = prop("os_disk", default=None, doc="The bootable disk, grown to size_gb GiB, never shrunk.")
    type: str = prop("type", default="", doc="VM type: desktop, server or high_performance.")
    network_interfaces: list[NetworkInterface] = prop("network_interfaces", default_factory=list,
                                                      doc="The VM's NICs, each with its oVirt vNIC profile.")
    affinity_groups_names: list[str] = prop("affinity_groups_names", default_factory=list,
                                            doc="oVirt affinity groups the VM joins.")
    auto_pinning_policy: str = prop("auto_pinning_policy", default="", doc="none or resize_and_pin.")
    hugepages: int = prop("hugepages", default=0, doc="Huge page size in KiB: 0, 2048 or 1048576.")
    guaranteed_memory_mb: int = prop("guaranteed_memory_mb", default=0, doc="Guaranteed memory in MiB.")
    clone: bool | None = prop("clone", default=None,
                              doc="Clone the template's disks; default false for desktop VMs, true otherwise.")
    sparse: bool | None = prop("sparse", default=None, doc="Thin-provisioned disks.")
    format: str = prop("format", default="", doc="Disk format of cloned disks: raw or cow.")
    storage_domain_id: str = prop("storage_domain_id", default="",
                                  doc="ID of the storage domain cloned disks go to.")

    @property
    def effective_clone(self) -> bool:
        """Whether template disks are cloned: `clone` if set, else false for desktop VMs and true otherwise
        (docs/compatibility.md#provider-spec, BZ 2082535)."""
        if self.clone is not None:
            return self.clone
        return self.type != VMType.DESKTOP

    @property
    def auto_pinning_enabled(self) -> bool:
        return self.auto_pinning_policy not in ("", AutoPinningPolicy.NONE)

    def ids(self) -> Iterator[tuple[str, str]]:
        """(field path under the spec, value) of every field that names an engine object by its id, set or not:
        what goes into the engine's URL paths, which must be a UUID (api/ids.py)."""
        yield "cluster_id", self.cluster_id
        yield "instance_type_id", self.instance_type_id
        yield "storage_domain_id", self.storage_domain_id
        for i, nic in enumerate(self.network_interfaces):
            yield f"network_interfaces[{i}].vnic_profile_id", nic.vnic_profile_id


def vm_fields(spec: VMSpec) -> dict[str, Any]:
    """The VM settings of `spec` as keyword arguments of any VMSpec subclass (copying between front ends)."""
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(VMSpec)}


@dataclass
class _ProviderSpecHeader(JSONObject):
    # The keys the Go provider spec puts before the VM settings; a base of its own so that the declaration order
    # (to_dict's key order, the admission policy's rule order) stays the Go type's.
    api_version: str = prop("apiVersion", default=PROVIDER_API_VERSION)
    kind: str = prop("kind", default=PROVIDER_SPEC_KIND)
    user_data_secret: LocalObjectReference | None = prop("userDataSecret", default=None)
    # Ignored since 2021: credentials always come from openshift-machine-api/ovirt-credentials (4.1, 4.7).
    credentials_secret: LocalObjectReference | None = prop("credentialsSecret", default=None)
    # `id` and `name` are unused (the VM name is the Machine name) but Go always writes them.
    id: str = prop("id", default="", omitempty=False)
    name: str = prop("name", default="", omitempty=False)


@dataclass
class OvirtMachineProviderSpec(VMSpec, _ProviderSpecHeader):
    """The Machine API's provider spec: the header keys, then the VM settings of VMSpec. `id` is not among ids():
    it is never sent (the VM is found by the Machine's name)."""


@dataclass
class OvirtMachineProviderStatus(JSONObject):
    """Written to Machine.status.providerStatus. MAO rewrites `instanceState` to "Unknown" when the Machine
    fails (docs/compatibility.md#machine-phases), so the key must stay exactly this."""

    instance_id: str | None = prop("instanceId", default=None)
    instance_state: str | None = prop("instanceState", default=None)


def _load(raw: bytes | str | Mapping[str, Any] | None) -> Any:
    if raw is None or isinstance(raw, Mapping):
        return raw
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as e:
        raise InvalidProviderSpec([FieldError(PROVIDER_SPEC_PATH, f"Invalid value: not UTF-8 text: {e}")]) from None
    try:
        # JSON first: a JSON document that YAML 1.1 would read differently (e.g. tabs) must still parse.
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidProviderSpec(
            [FieldError(PROVIDER_SPEC_PATH, f"Invalid value: cannot parse as JSON or YAML: {e}")]) from None


def parse_provider_spec(raw: bytes | str | Mapping[str, Any] | None) -> OvirtMachineProviderSpec:
    """Parse a providerSpec value given as JSON/YAML text or an already-decoded mapping.

    Unknown keys are ignored. A missing value, a non-object document or a value of the wrong JSON type raise
    InvalidProviderSpec (the actuator turns it into an InvalidConfiguration failure,
    docs/compatibility.md#creating-a-vm).
    """
    data = _load(raw)
    if data is None:
        raise InvalidProviderSpec(
            [FieldError(PROVIDER_SPEC_PATH, "Required value: the oVirt provider spec is missing")])
    return decode_spec(OvirtMachineProviderSpec, data, PROVIDER_SPEC_PATH)


def decode_spec(cls: type[T], data: Any, base: str) -> T:
    """`data` decoded as `cls`; a value of the wrong JSON type raises InvalidProviderSpec naming its path under
    `base` (where the spec sits in its object), for both front ends alike."""
    try:
        return from_dict(cls, data)
    except DecodeError as e:
        path = f"{base}.{e.path}" if e.path else base
        raise InvalidProviderSpec([FieldError(path, f"Invalid value: {e.message}")]) from None


def parse_provider_status(raw: Mapping[str, Any] | None) -> OvirtMachineProviderStatus:
    return OvirtMachineProviderStatus.from_dict(raw)
