"""The CSI Node service: the attached disk's device, staged (formatted if empty, mounted at the staging path),
bind-mounted into pods (read-only when asked), grown and measured (docs/storage.md#csi-driver).

The device is found by the disk's serial under /dev/disk/by-id, as the FlexVolume driver finds it (full and
20-character serials, virtio-scsi and virtio-blk links; `OVIRT_FLEXDRIVER_BY_ID_DIR` points tests at a directory
of their own links to loop devices), so the node needs no engine credentials. The node id is the VM id: `--node-id`,
else the SMBIOS UUID the VM reports (/sys/class/dmi/id/product_uuid, what kubelet reports as systemUUID).
"""

from __future__ import annotations

import os
import time
from typing import Any

import grpc

from api.ids import is_ovirt_id

from .. import mounts
from ..flexvolume import current_fs, device_links, find_device, format_and_mount, must_run
from .errors import CsiError, invalid, not_found, require, rpc
from .volumes import DEFAULT_FS, is_block, unsupported

DEVICE_WAIT_S = 10.0  # udev may create the by-id link a moment after the hot-plug


def _volume_path_and_device(request) -> tuple[str, str]:
    """The stats and expand requests' volume path and the device of their volume, both required to exist."""
    require(request, "volume_id", "volume_path")
    path = request.volume_path
    if not os.path.exists(path):
        raise not_found(f"{path} does not exist")
    device = find_device(request.volume_id)
    if device is None:
        raise not_found(f"volume {request.volume_id} is not attached to this node")
    return path, device


def _device_size(device: str) -> int:
    with open(device, "rb") as f:
        return f.seek(0, os.SEEK_END)


def node_servicer(pb: Any, pb_grpc: Any, node_id: str, device_wait_s: float = DEVICE_WAIT_S) -> Any:
    caps = pb.NodeServiceCapability.RPC.Type

    def wait_device(volume_id: str) -> str:
        if not is_ovirt_id(volume_id):  # volume ids are disk ids: anything else was never published here
            raise not_found(f"volume {volume_id!r} is no oVirt disk id (a UUID)")
        deadline = time.monotonic() + device_wait_s
        while True:
            dev = find_device(volume_id)
            if dev:
                return dev
            if time.monotonic() >= deadline:
                raise not_found(f"no device for volume {volume_id} (looked for "
                                f"{', '.join(str(p) for p in device_links(volume_id))}); is it published here?")
            time.sleep(0.2)

    def check_cap(request: Any) -> Any:
        require(request, "volume_capability")
        why = unsupported(pb, request.volume_capability)
        if why:
            raise invalid(why)
        return request.volume_capability

    def unmount(path: str) -> None:
        # Every mount stacked there, proven gone: an OK over a live mount lets the disk be detached under it.
        try:
            mounts.unmount_all(path, lambda point: must_run(["umount", point]))
        except mounts.StillMounted as e:
            raise CsiError(grpc.StatusCode.INTERNAL, str(e)) from None

    class Node(pb_grpc.NodeServicer):
        @rpc
        def NodeGetCapabilities(self, request, context):
            return pb.NodeGetCapabilitiesResponse(capabilities=[
                pb.NodeServiceCapability(rpc=pb.NodeServiceCapability.RPC(type=t))
                for t in (caps.STAGE_UNSTAGE_VOLUME, caps.GET_VOLUME_STATS, caps.EXPAND_VOLUME)])

        @rpc
        def NodeGetInfo(self, request, context):
            return pb.NodeGetInfoResponse(node_id=node_id)

        @rpc
        def NodeStageVolume(self, request, context):
            require(request, "volume_id", "staging_target_path")
            cap = check_cap(request)
            device = wait_device(request.volume_id)
            if is_block(cap):
                return pb.NodeStageVolumeResponse()  # the raw device is bind-mounted at publish
            path = mounts.canonical(request.staging_target_path)
            staged = mounts.top_mount(path)
            if staged is not None:
                if not mounts.holds_device(staged, device):
                    raise CsiError(grpc.StatusCode.ALREADY_EXISTS,
                                   f"{request.staging_target_path} holds {staged.source}, not {device}")
                return pb.NodeStageVolumeResponse()
            fs = (cap.mount.fs_type or DEFAULT_FS).lower()
            format_and_mount(device, path, fs, list(cap.mount.mount_flags))
            return pb.NodeStageVolumeResponse()

        @rpc
        def NodeUnstageVolume(self, request, context):
            require(request, "volume_id", "staging_target_path")
            unmount(request.staging_target_path)
            return pb.NodeUnstageVolumeResponse()

        @rpc
        def NodePublishVolume(self, request, context):
            require(request, "volume_id", "target_path", "staging_target_path")  # this driver stages volumes
            cap = check_cap(request)
            target = mounts.canonical(request.target_path)
            if mounts.is_mountpoint(target):
                return pb.NodePublishVolumeResponse()
            if is_block(cap):
                source = wait_device(request.volume_id)
                os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
                open(target, "a").close()  # a bind mount of a device needs a file to cover
            else:
                source = mounts.canonical(request.staging_target_path)
                if not mounts.is_mountpoint(source):
                    raise CsiError(grpc.StatusCode.FAILED_PRECONDITION, f"volume is not staged at {source}")
                os.makedirs(target, exist_ok=True)
            must_run(["mount", "-o", "bind", source, target])
            if request.readonly:
                # A bind mount takes `ro` only on a remount (mount(8)).
                must_run(["mount", "-o", "remount,bind,ro", target])
            return pb.NodePublishVolumeResponse()

        @rpc
        def NodeUnpublishVolume(self, request, context):
            require(request, "volume_id", "target_path")
            target = mounts.canonical(request.target_path)
            unmount(target)
            if os.path.isdir(target):
                os.rmdir(target)
            elif os.path.lexists(target):
                os.remove(target)
            return pb.NodeUnpublishVolumeResponse()

        @rpc
        def NodeGetVolumeStats(self, request, context):
            path, _ = _volume_path_and_device(request)
            usage = pb.VolumeUsage
            if os.path.isfile(path) or not os.path.isdir(path):  # a block volume: the device bound on a file
                return pb.NodeGetVolumeStatsResponse(usage=[usage(unit=usage.BYTES,
                                                                  total=_device_size(path))])
            st = os.statvfs(path)
            return pb.NodeGetVolumeStatsResponse(usage=[
                usage(unit=usage.BYTES, total=st.f_blocks * st.f_frsize, available=st.f_bavail * st.f_frsize,
                      used=(st.f_blocks - st.f_bfree) * st.f_frsize),
                usage(unit=usage.INODES, total=st.f_files, available=st.f_favail, used=st.f_files - st.f_ffree)])

        @rpc
        def NodeExpandVolume(self, request, context):
            path, device = _volume_path_and_device(request)
            if (request.HasField("volume_capability") and is_block(request.volume_capability)) or os.path.isfile(path):
                return pb.NodeExpandVolumeResponse(capacity_bytes=_device_size(device))
            fs = current_fs(device)
            if not fs:  # a raw block volume (the user's data, no filesystem of ours): the device itself grew
                return pb.NodeExpandVolumeResponse(capacity_bytes=_device_size(device))
            if fs.startswith("ext"):
                must_run(["resize2fs", device])
            elif fs == "xfs":
                must_run(["xfs_growfs", path])
            else:
                raise invalid(f"cannot grow filesystem {fs!r} on {device}")
            return pb.NodeExpandVolumeResponse(capacity_bytes=_device_size(device))

    return Node()
