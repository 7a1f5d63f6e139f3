"""ovirt-csi-driver's Node service on real block devices (loop devices standing for the hot-plugged disks,
hack/csi_host.py): a published volume is read-only when asked, data survives unstage/stage, the stats are the
filesystem's, and an expanded volume's filesystem grows online."""

from __future__ import annotations

import errno
import os
import shutil
import time
import uuid

import grpc
import pytest

from hack.csi_host import CsiClient, loop_devices_usable, node_host, online_resize_usable

GIB = 2**30


@pytest.fixture
def node(tmp_path):
    why = loop_devices_usable()
    if why:
        pytest.skip(f"machine limitation: {why}")
    with node_host(tmp_path) as (_sim, vm, endpoint):
        csi = CsiClient(endpoint)
        try:
            yield csi, vm, tmp_path
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
