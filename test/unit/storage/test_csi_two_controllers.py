"""Two ovirt-csi-driver controller processes against one simulator, as the controller Deployment's two replicas are
when the provisioner and the attacher lead on different ones: the in-process locks do not reach
across processes, so the engine alone must keep one name one disk and a deleted volume never published
(docs/storage.md#two-controller-processes). Real driver processes, gRPC over unix sockets."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable

import grpc
import pytest

from hack.csi_host import CsiClient, make_vm, running_driver
from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import Disks

ROUNDS = 12
# What a sidecar retries: the driver's "not now" answers (another call holds the volume, the engine holds the disk).
RETRIED = (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    root = tmp_path_factory.mktemp("csi2")
    with running_simulator(root / "sim") as sim:
        vm = make_vm(sim)
        with running_driver(root / "a", sim, services="controller") as ep_a, \
                running_driver(root / "b", sim, services="controller") as ep_b:
            clients = [CsiClient(ep_a), CsiClient(ep_b)]
            pool = ConnectionPool(size=2)
            pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                                  ca_file=sim.ca_file))
            yield {"clients": clients, "vm": vm, "disks": Disks(OvirtClient(pool))}
            for c in clients:
                c.close()
            pool.close()


def at_once(*calls: Callable[[], Any]) -> list[tuple[grpc.StatusCode, Any]]:
    """Run the calls in threads released together; each one's (status, answer)."""
    start = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        start.wait()
        try:
            out[i] = (grpc.StatusCode.OK, call())
        except grpc.RpcError as e:
            out[i] = (e.code(), e.details())

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def until_answered(call: Callable[[], Any], tries: int = 20) -> Any:
    """As a sidecar does: call again while the answer is ABORTED or UNAVAILABLE."""
    for _ in range(tries):
        try:
            return call()
        except grpc.RpcError as e:
            if e.code() not in RETRIED:
                raise
    raise AssertionError(f"still not answered after {tries} tries")


def disks_named(disks: Disks, name: str) -> list:
    return [d for d in disks.client.call("list disks", lambda s: s.disks_service().list()) if d.name == name]


def test_concurrent_create_of_one_name_makes_one_disk(bed):
    a, b = bed["clients"]
    disks = bed["disks"]
    for _ in range(ROUNDS):
        name = f"pvc-{uuid.uuid4()}"
        answers = at_once(lambda n=name: until_answered(lambda: a.create(n)),
                          lambda n=name: until_answered(lambda: b.create(n)))
        assert [code for code, _ in answers] == [grpc.StatusCode.OK] * 2, answers
        ids = {vol.volume_id for _, vol in answers}
        assert len(ids) == 1, f"two volume ids for {name}: {ids}"
        made = disks_named(disks, name)
        assert [d.id for d in made] == list(ids), f"{len(made)} disks named {name}"
        # Every later call finds that one volume, from either process.
        assert a.create(name).volume_id == b.create(name).volume_id == ids.pop()
        request = a.pb.DeleteVolumeRequest(volume_id=made[0].id)
        until_answered(lambda r=request: a.controller.DeleteVolume(r))
        assert disks_named(disks, name) == []


def test_publish_racing_delete_never_both_answer_ok(bed):
    a, b = bed["clients"]
    disks, vm = bed["disks"], bed["vm"]
    pb = a.pb
    outcomes = set()
    for _ in range(ROUNDS):
        vol = a.create(f"pvc-{uuid.uuid4()}")
        publish = pb.ControllerPublishVolumeRequest(volume_id=vol.volume_id, node_id=vm,
                                                    volume_capability=a.mount_cap())
        delete = pb.DeleteVolumeRequest(volume_id=vol.volume_id)
        (pub, _), (dele, _) = at_once(lambda p=publish: a.controller.ControllerPublishVolume(p, timeout=30),
                                      lambda d=delete: b.controller.DeleteVolume(d, timeout=30))
        outcomes.add((pub.name, dele.name))
        disk, attached = disks.get(vol.volume_id), disks.attachments_of_disk(vol.volume_id)
        assert not (pub == dele == grpc.StatusCode.OK), "publish and delete both answered OK"
        if pub == grpc.StatusCode.OK:
            assert disk is not None and attached == [vm], (pub, dele, attached)
        if dele == grpc.StatusCode.OK:
            assert disk is None and attached == [], (pub, dele, attached)
        if disk is not None and attached:  # whatever answered, an attachment is to a disk that exists
            assert attached == [vm]
        # Clean up as the CO would: unpublish, then delete.
        unpublish = pb.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=vm)
        until_answered(lambda u=unpublish: a.controller.ControllerUnpublishVolume(u))
        until_answered(lambda d=delete: b.controller.DeleteVolume(d))
        assert disks.get(vol.volume_id) is None
    # A delete refused because the volume is attached leaves it as it was: published again, then deleted.
    vol = a.create(f"pvc-{uuid.uuid4()}")
    publish = pb.ControllerPublishVolumeRequest(volume_id=vol.volume_id, node_id=vm, volume_capability=a.mount_cap())
    a.controller.ControllerPublishVolume(publish)
    with pytest.raises(grpc.RpcError) as refused:
        b.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    unpublish = pb.ControllerUnpublishVolumeRequest(volume_id=vol.volume_id, node_id=vm)
    b.controller.ControllerUnpublishVolume(unpublish)
    a.controller.ControllerPublishVolume(publish)
    assert disks.attachments_of_disk(vol.volume_id) == [vm]
    b.controller.ControllerUnpublishVolume(unpublish)
    b.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=vol.volume_id))
    assert disks.get(vol.volume_id) is None
    with pytest.raises(grpc.RpcError) as gone:
        a.controller.ControllerPublishVolume(publish)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
