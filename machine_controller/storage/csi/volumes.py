"""What a CSI volume of this driver can be: access modes, access types, fs types, sizes, parameters.

An oVirt disk without `shareable` is attached to one VM at a time, so only the single-node access modes are
offered (docs/storage.md#csi-driver); a mount volume gets ext4 (the default) or xfs, a block volume the raw device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from ..disks import GIB, round_size
from ..flexvolume import FS_TYPES
from ..provisioner import parse_params
from .errors import CsiError, invalid

DRIVER_NAME = "csi.ovirt.org"
DEFAULT_SIZE = GIB  # what a CreateVolume without capacity_range gets
DEFAULT_FS = "ext4"
# Keys the sidecars add to the StorageClass parameters for themselves (secrets, fstype, PVC metadata).
_SIDECAR_PREFIX = "csi.storage.k8s.io/"


def single_node_modes(pb: Any) -> set[int]:
    m = pb.VolumeCapability.AccessMode
    return {m.SINGLE_NODE_WRITER, m.SINGLE_NODE_READER_ONLY, m.SINGLE_NODE_SINGLE_WRITER,
            m.SINGLE_NODE_MULTI_WRITER}


def unsupported(pb: Any, cap: Any) -> str:
    """Why one VolumeCapability cannot be served, or "" when it can."""
    if cap.access_mode.mode not in single_node_modes(pb):
        name = pb.VolumeCapability.AccessMode.Mode.Name(cap.access_mode.mode)
        return f"access mode {name}: an oVirt disk is attached to one VM at a time"
    kind = cap.WhichOneof("access_type")
    if kind is None:
        return "a volume capability needs an access type (mount or block)"
    if kind == "mount":
        fs = (cap.mount.fs_type or DEFAULT_FS).lower()
        if fs not in FS_TYPES:
            return f"fs_type {fs!r} is not supported (use one of {', '.join(FS_TYPES)})"
    return ""


def check_capabilities(pb: Any, caps: Any) -> None:
    if not caps:
        raise invalid("volume_capabilities are required")
    for cap in caps:
        why = unsupported(pb, cap)
        if why:
            raise invalid(why)


def is_block(cap: Any) -> bool:
    return cap is not None and cap.WhichOneof("access_type") == "block"


def size_for(capacity_range: Any) -> int:
    """The disk size for a capacity range: at least required_bytes, MiB-rounded, never above limit_bytes."""
    required = capacity_range.required_bytes if capacity_range is not None else 0
    limit = capacity_range.limit_bytes if capacity_range is not None else 0
    if required < 0 or limit < 0:
        raise invalid("capacity_range bytes must not be negative")
    if limit and required > limit:
        raise invalid(f"required_bytes {required} exceeds limit_bytes {limit}")
    # round_size refuses what int64 cannot hold: DiskSizeOutOfRange, OUT_OF_RANGE (errors.py).
    size = round_size(required or (min(DEFAULT_SIZE, limit) if limit else DEFAULT_SIZE))
    if limit and size > limit:
        raise CsiError(grpc.StatusCode.OUT_OF_RANGE,
                       f"the engine allocates whole MiB: {size} bytes is the smallest size >= {required} and it "
                       f"exceeds limit_bytes {limit}")
    return size


def fits(size: int, capacity_range: Any) -> bool:
    required = capacity_range.required_bytes if capacity_range is not None else 0
    limit = capacity_range.limit_bytes if capacity_range is not None else 0
    return size >= required and (not limit or size <= limit)


# The StorageClass parameters this driver takes, and nothing else: the table in docs/storage.md#storageclass-parameters
# is this list (test/unit/storage/test_csi_volumes.py compares them).
FSTYPE_KEY = f"{_SIDECAR_PREFIX}fstype"
PARAMETERS = {
    "storageDomainName": "the oVirt data domain the disk is made in (required)",
    "thinProvisioning": "true (the default) or false (preallocated)",
    FSTYPE_KEY: "ext4 (the default) or xfs: the filesystem of mount volumes",
    f"{_SIDECAR_PREFIX}*": "the sidecars' other keys (secrets, PVC metadata), left to them",
}
# Keys of the FlexVolume classes (docs/compatibility.md#storage): refused with the key to write instead.
_FLEXVOLUME_KEYS = {"fsType": FSTYPE_KEY, "ovirtStorageDomain": "storageDomainName"}


@dataclass(frozen=True)
class Parameters:
    storage_domain: str
    thin: bool
    fs_type: str


def check_parameters(pb: Any, params: dict[str, str], caps: Any) -> Parameters:
    """The StorageClass parameters of a request with its volume capabilities, or INVALID_ARGUMENT naming the key.

    The filesystem is the volume capability's `fs_type`: external-provisioner turns the class's
    csi.storage.k8s.io/fstype into it, and the node makes the one the capability names. A caller that sends the key
    itself gets it honoured the same way: a capability that asks for another filesystem (or none: the node's ext4)
    is refused rather than given something else."""
    for key in sorted(params):
        if key in _FLEXVOLUME_KEYS:
            raise invalid(f"parameter {key} is a FlexVolume StorageClass key; this driver's is "
                          f"{_FLEXVOLUME_KEYS[key]} (docs/storage.md#storageclass-parameters)")
        if key not in PARAMETERS and not key.startswith(_SIDECAR_PREFIX):
            raise invalid(f"unknown parameter {key} (this driver takes {', '.join(PARAMETERS)})")
    if not params.get("storageDomainName"):
        raise invalid("parameter storageDomainName is required")
    try:
        domain, thin, _ = parse_params({k: params[k] for k in ("storageDomainName", "thinProvisioning") if k in params})
    except ValueError as e:
        raise invalid(str(e)) from None
    asked = params.get(FSTYPE_KEY, "").strip().lower()
    if asked and asked not in FS_TYPES:
        raise invalid(f"parameter {FSTYPE_KEY} {asked!r} is not supported (use one of {', '.join(FS_TYPES)})")
    for cap in caps:
        if cap.WhichOneof("access_type") != "mount":
            continue
        fs = (cap.mount.fs_type or DEFAULT_FS).lower()
        if asked and fs != asked:
            raise invalid(f"parameter {FSTYPE_KEY} asks for {asked} but the volume capability's fs_type is "
                          f"{cap.mount.fs_type or 'empty (' + DEFAULT_FS + ')'}")
        asked = asked or fs
    return Parameters(domain, thin, asked or DEFAULT_FS)
