"""The disk layer against the oVirt simulator (the unmodified SDK on the wire; nothing mocked)."""

from __future__ import annotations

import pytest

from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import GIB, MIB, DiskRequest, Disks, name_for_claim, round_size


def test_round_size_never_below_request():
    assert round_size(1) == MIB
    assert round_size(3 * GIB) == 3 * GIB
    assert round_size(3 * GIB + 1) == 3 * GIB + MIB


@pytest.fixture
def disks(tmp_path):
    with running_simulator(tmp_path) as sim:
        pool = ConnectionPool(size=2)
        pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                              ca_file=sim.ca_file))
        yield Disks(OvirtClient(pool))
        pool.close()


def test_create_find_wait_remove(disks: Disks):
    sd = disks.client.call("list sds", lambda s: s.storage_domains_service().list())[0].name
    name = name_for_claim("0b3c")
    assert disks.find_by_name(name) is None
    made = disks.create(DiskRequest(name=name, size_bytes=3 * GIB + 5, storage_domain=sd, thin=True))
    assert disks.find_by_name(name).id == made.id
    ok = disks.wait_ok(made.id, timeout_s=30, interval_s=0.2)
    assert ok.provisioned_size == 3 * GIB + MIB
    assert ok.sparse is True
    assert disks.remove(made.id) is True
    assert disks.remove(made.id) is False  # already gone: not an error
    assert disks.find_by_name(name) is None


def test_a_locked_disk_is_neither_attached_nor_removed(tmp_path):
    """While the engine holds a new disk locked, attach and remove refuse with DiskLocked and change nothing."""
    import ovirtsdk4.types as types

    from machine_controller.storage.disks import DiskLocked

    with running_simulator(tmp_path) as sim:
        sim.control.set_timings(disk_create=3.0)
        conn = sim.connection()
        s = conn.system_service()
        tpl = s.templates_service().list(search='name="rhcos"')[0]
        vm = s.vms_service().add(types.Vm(name="worker-0", cluster=types.Cluster(name="Default"),
                                          template=types.Template(id=tpl.id), memory=2 * GIB))
        conn.close()
        pool = ConnectionPool(size=1)
        pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                              ca_file=sim.ca_file))
        disks = Disks(OvirtClient(pool))
        made = disks.create(DiskRequest(name="pvc-locked", size_bytes=GIB, storage_domain="nfs-data"))
        with pytest.raises(DiskLocked):
            disks.attach(vm.id, made.id)
        with pytest.raises(DiskLocked):
            disks.remove(made.id)
        assert disks.attachments_of_disk(made.id) == [] and disks.get(made.id) is not None
        disks.wait_ok(made.id, timeout_s=30, interval_s=0.2)
        assert disks.attach(vm.id, made.id).id == made.id
        pool.close()
