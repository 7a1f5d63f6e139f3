"""What a CSI volume of this driver can be: access modes, access types, fs types, sizes, parameters.

An oVirt disk without `shareable` is attached to one VM at a time, so only the single-node access modes are
offered (docs/storage.md#csi-driver); a mount volume gets ext4 (the default) or xfs, a block volume the raw device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..disks import CSI_DESCRIPTION_PREFIX, GIB, MAX_DISK_BYTES, round_size
from ..flexvolume import FS_TYPES
from ..provisioner import parse_params
from .errors import CsiError, invalid

import grpc

DRIVER_NAME = "csi.ovirt.org"
DEFAULT_SIZE = GIB  # what a CreateVolume without capacity_range gets
DEFAULT_FS = "ext4"
# Keys the sidecars add to the StorageClass parameters for themselves (secrets, fstype, PVC metadata).
_SIDECAR_PREFIX = "csi.storage.k8s.io/"


def description_for(name: str) -> str:
    # The mark of this driver's disks: DeleteVolume removes no other disk (a FlexVolume one, a VM's).
    return f"{CSI_DESCRIPTION_PREFIX} {name}"


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
    size = round_size(required or (min(DEFAULT_SIZE, limit) if limit else DEFAULT_SIZE))
    if size > MAX_DISK_BYTES:
        raise CsiError(grpc.StatusCode.OUT_OF_RANGE, f"required_bytes {required} is larger than the largest disk "
                       f"size ({MAX_DISK_BYTES} bytes: int64 in whole MiB)")
    if limit and size > limit:
        raise CsiError(grpc.StatusCode.OUT_OF_RANGE,
                       f"the engine allocates whole MiB: {size} bytes is the smallest size >= {required} and it "
                       f"exceeds limit_bytes {limit}")
    return size


def fits(size: int, capacity_range: Any) -> bool:
    required = capacity_range.required_bytes if capacity_range is not None else 0
    limit = capacity_range.limit_bytes if capacity_range is not None else 0
    return size >= required and (not limit or size <= limit)


@dataclass(frozen=True)
class Parameters:
    storage_domain: str
    thin: bool


def parameters(params: dict[str, str]) -> Parameters:
    """The StorageClass parameters (the same keys as the volume provisioner's; the fs type comes with the volume
    capability instead, which external-provisioner fills from csi.storage.k8s.io/fstype)."""
    own = {k: v for k, v in params.items() if not k.startswith(_SIDECAR_PREFIX)}
    try:
        domain, thin, _fs = parse_params(own)
    except ValueError as e:
        raise invalid(str(e))
    return Parameters(domain, thin)
