"""ovirt-csi-driver's Node service on real block devices (loop devices standing for the hot-plugged disks,
hack/csi_host.py): a published volume is read-only when asked, data survives unstage/stage, the stats are the
filesystem's, an expanded volume's filesystem grows online, and paths the mount table spells otherwise (a
symlinked kubelet root, a space, a trailing slash) are staged, published and unmounted all the same."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from hack.csi_host import CsiClient, loop_devices_usable, node_host, online_resize_usable

GIB = 2**30


@pytest.fixture
def node(tmp_path):
    why = loop_devices_usable()
    if why:
        pytest.skip(f"machine limitation: {why}")
    with node_host(tmp_path) as host:
        csi = CsiClient(host.endpoint)
        try:
            yield csi, host.vm, tmp_path
        finally:
            csi.close()


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_stage_publish_readonly_restage_and_stats(node, fs):
    if not shutil.which(f"mkfs.{fs}"):
        pytest.skip(f"machine limitation: mkfs.{fs} is not installed")
    csi, vm, tmp = node
    pb = csi.pb
    assert csi.node.NodeGetInfo(pb.NodeGetInfoRequest()).node_id == vm
    vol = csi.create(f"pvc-{uuid.uuid4()}", required=GIB, caps=[csi.mount_cap(fs_type=fs)])
    cap = csi.mount_cap(fs_type=fs)
    csi.controller.ControllerPublishVolume(pb.ControllerPublishVolumeRequest(
        volume_id=vol.volume_id, node_id=vm, volume_capability=cap))
    staging, rw, ro = str(tmp / "staging"), str(tmp / "pods" / "rw"), str(tmp / "pods" / "ro")
    os.makedirs(staging)
    stage = pb.NodeStageVolumeRequest(volume_id=vol.volume_id, staging_target_path=staging, volume_capability=cap)
    csi.node.NodeStageVolume(stage, timeout=60)
    csi.node.NodeStageVolume(stage, timeout=60)  # idempotent
    for target, readonly in ((rw, False), (ro, True)):
        csi.node.NodePublishVolume(pb.NodePublishVolumeRequest(
            volume_id=vol.volume_id, staging_target_path=staging, target_path=target, volume_capability=cap,
            readonly=readonly))
    with open(os.path.join(rw, "hello"), "w") as f:
        f.write("data")
    assert open(os.path.join(ro, "hello")).read() == "data"
    with pytest.raises(OSError) as e:
        open(os.path.join(ro, "other"), "w")
    assert e.value.errno == errno.EROFS

    stats = csi.node.NodeGetVolumeStats(pb.NodeGetVolumeStatsRequest(volume_id=vol.volume_id, volume_path=rw))
    by_unit = {u.unit: u for u in stats.usage}
    total_before = by_unit[pb.VolumeUsage.BYTES].total
    assert 0.9 * GIB < total_before <= GIB and by_unit[pb.VolumeUsage.INODES].used > 0
    assert f" {fs} " in open("/proc/self/mounts").read()
    with pytest.raises(grpc.RpcError) as err:
        csi.node.NodeGetVolumeStats(pb.NodeGetVolumeStatsRequest(volume_id=vol.volume_id, volume_path=str(tmp / "x")))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    for target in (rw, ro):
        csi.node.NodeUnpublishVolume(pb.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=target))
        assert not os.path.exists(target)
    csi.node.NodeUnstageVolume(pb.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=staging))
    # Staged again (same device, same data): the filesystem is kept, never reformatted.
    csi.node.NodeStageVolume(stage, timeout=60)
    assert open(os.path.join(staging, "hello")).read() == "data"
    csi.node.NodeUnstageVolume(pb.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=staging))
    csi.controller.ControllerUnpublishVolume(pb.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=vm))
    csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))


@pytest.fixture(params=["ext4", "xfs"])
def online_resize(request, tmp_path):
    why = online_resize_usable(tmp_path / "resize-probe", request.param)
    if why:
        pytest.skip(f"machine limitation: {why}")
    return request.param


def test_online_expansion_grows_the_filesystem(online_resize, node):
    csi, vm, tmp = node
    pb = csi.pb
    cap = csi.mount_cap(fs_type=online_resize)
    vol = csi.create(f"pvc-{uuid.uuid4()}", required=GIB, caps=[cap])
    csi.controller.ControllerPublishVolume(pb.ControllerPublishVolumeRequest(
        volume_id=vol.volume_id, node_id=vm, volume_capability=cap))
    staging, rw = str(tmp / "staging"), str(tmp / "pods" / "rw")
    os.makedirs(staging)
    csi.node.NodeStageVolume(pb.NodeStageVolumeRequest(volume_id=vol.volume_id, staging_target_path=staging,
                                                       volume_capability=cap), timeout=60)
    csi.node.NodePublishVolume(pb.NodePublishVolumeRequest(
        volume_id=vol.volume_id, staging_target_path=staging, target_path=rw, volume_capability=cap))
    # Online expansion: the engine grows the disk, the guest sees a bigger device, the node grows the filesystem.
    grown = csi.controller.ControllerExpandVolume(pb.ControllerExpandVolumeRequest(
        volume_id=vol.volume_id, capacity_range=pb.CapacityRange(required_bytes=2 * GIB), volume_capability=cap),
        timeout=30)
    assert grown.node_expansion_required
    expand = pb.NodeExpandVolumeRequest(volume_id=vol.volume_id, volume_path=rw, staging_target_path=staging,
                                        volume_capability=cap, capacity_range=pb.CapacityRange(required_bytes=2 * GIB))
    deadline = 50
    while csi.node.NodeExpandVolume(expand, timeout=60).capacity_bytes < 2 * GIB and deadline:
        deadline -= 1  # the loop device follows the engine's new size within a poll of hack/csi_host.py
        time.sleep(0.1)
    stats = csi.node.NodeGetVolumeStats(pb.NodeGetVolumeStatsRequest(volume_id=vol.volume_id, volume_path=rw))
    assert {u.unit: u for u in stats.usage}[pb.VolumeUsage.BYTES].total > 1.8 * GIB

    csi.node.NodeUnpublishVolume(pb.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=rw))
    csi.node.NodeUnstageVolume(pb.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=staging))


def _mounted(path: str) -> bool:
    """util-linux's answer, independent of the driver's own reading of the mount table."""
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


def _quirky_root(tmp) -> str:
    """A kubelet root reached through a symlink, with a space in its name."""
    (tmp / "kubelet root").mkdir()
    (tmp / "kubelet link").symlink_to(tmp / "kubelet root")
    return f"{tmp}/kubelet link"


@dataclass
class Volume:
    """A new volume published to the node, and the node calls for it as the kubelet makes them."""
    csi: CsiClient
    cap: Any
    staging: str
    target: str
    volume_id: str = ""

    def __post_init__(self) -> None:
        pb = self.csi.pb
        self.volume_id = self.csi.create(f"pvc-{uuid.uuid4()}", required=GIB, caps=[self.cap]).volume_id
        self.csi.controller.ControllerPublishVolume(pb.ControllerPublishVolumeRequest(
            volume_id=self.volume_id, node_id=self.csi.node.NodeGetInfo(pb.NodeGetInfoRequest()).node_id,
            volume_capability=self.cap))

    def stage(self) -> None:
        self.csi.node.NodeStageVolume(self.csi.pb.NodeStageVolumeRequest(
            volume_id=self.volume_id, staging_target_path=self.staging, volume_capability=self.cap), timeout=60)

    def unstage(self) -> None:
        self.csi.node.NodeUnstageVolume(self.csi.pb.NodeUnstageVolumeRequest(
            volume_id=self.volume_id, staging_target_path=self.staging))

    def publish(self) -> None:
        self.csi.node.NodePublishVolume(self.csi.pb.NodePublishVolumeRequest(
            volume_id=self.volume_id, staging_target_path=self.staging, target_path=self.target,
            volume_capability=self.cap))

    def unpublish(self) -> None:
        self.csi.node.NodeUnpublishVolume(self.csi.pb.NodeUnpublishVolumeRequest(
            volume_id=self.volume_id, target_path=self.target))


def test_stage_under_symlink_with_space_and_trailing_slash(node):
    csi, _, tmp = node
    kubelet = _quirky_root(tmp)
    vol = Volume(csi, csi.mount_cap(), f"{kubelet}/staging dir/", f"{kubelet}/pods/vol 1/mount")
    vol.stage()
    assert _mounted(vol.staging)
    vol.unstage()
    assert not _mounted(vol.staging), "NodeUnstageVolume answered OK and left the filesystem mounted"

    vol.stage()
    vol.stage()  # idempotent on this path too
    vol.publish()
    vol.publish()
    with open(os.path.join(vol.target, "hello"), "w") as f:
        f.write("data")
    vol.unpublish()
    assert not os.path.lexists(vol.target)
    vol.unstage()
    assert not _mounted(vol.staging)


def test_block_publish_under_symlink_with_space(node):
    csi, _, tmp = node
    kubelet = _quirky_root(tmp)
    vol = Volume(csi, csi.block_cap(), f"{kubelet}/staging dir/", f"{kubelet}/plugins/volumeDevices/vol 1/dev")
    vol.stage()
    vol.publish()
    vol.publish()  # idempotent: no second bind mount over the first
    assert _mounted(vol.target)
    vol.unpublish()
    assert not os.path.lexists(vol.target) and not _mounted(vol.target)
    vol.unstage()


def test_unstage_removes_every_mount_stacked_at_the_staging_path(node):
    csi, _, tmp = node
    vol = Volume(csi, csi.mount_cap(), str(tmp / "staging"), str(tmp / "pods" / "rw"))
    vol.stage()
    # A second mount over the first, as a retried mount that raced the first one leaves it.
    subprocess.run(["mount", "--bind", vol.staging, vol.staging], check=True)
    vol.unstage()
    assert not _mounted(vol.staging), "NodeUnstageVolume answered OK over a mount it left"
