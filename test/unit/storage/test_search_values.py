"""User strings on their way to the engine: search values are quoted literals or refused, ids
that go into URL paths are UUIDs; the disk layer and the FlexVolume driver against the oVirt simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt import search
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.ovirt.errors import NotFoundError
from machine_controller.storage.disks import GIB, DiskRequest, Disks

ROOT = Path(__file__).resolve().parents[3]
UNSEARCHABLE = ["*", "pvc-*", 'a"b', "back\\slash", "new\nline", "tab\there", ""]


def test_quote_keeps_spaces_and_refuses_patterns_and_quotes():
    assert search.equals("name", "my data disk") == 'name="my data disk"'
    assert search.quote("pvc-0b3c.x_y") == '"pvc-0b3c.x_y"'
    for value in UNSEARCHABLE:
        with pytest.raises(search.UnsearchableValue) as e:
            search.quote(value, "disk name")
        assert "disk name" in str(e.value), value
    with pytest.raises(search.UnsearchableValue, match="wildcard"):
        search.quote("*")


@pytest.fixture(scope="module")
def disks(tmp_path_factory):
    with running_simulator(tmp_path_factory.mktemp("sim")) as sim:
        pool = ConnectionPool(size=1)
        pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                              ca_file=sim.ca_file))
        yield Disks(OvirtClient(pool))
        pool.close()


def all_disk_names(disks: Disks) -> list[str]:
    return [d.name for d in disks.client.call("list disks", lambda s: s.disks_service().list())]


def test_disk_layer_never_searches_a_pattern(disks: Disks):
    made = disks.create(DiskRequest(name="pvc-star-victim", size_bytes=GIB, storage_domain="nfs-data"))
    for value in UNSEARCHABLE:
        with pytest.raises(search.UnsearchableValue):
            disks.find_by_name(value)
        with pytest.raises(search.UnsearchableValue):
            disks.storage_domain(value)
        with pytest.raises(search.UnsearchableValue):
            disks.create(DiskRequest(name="pvc-x", size_bytes=GIB, storage_domain=value))
    assert "pvc-x" not in all_disk_names(disks)
    # A name with spaces is searched as one quoted literal and found exactly.
    spaced = disks.create(DiskRequest(name="my data disk", size_bytes=GIB, storage_domain="nfs-data"))
    assert disks.find_by_name("my data disk").id == spaced.id
    assert disks.find_by_name("my data") is None
    for d in (made, spaced):
        disks.wait_ok(d.id, timeout_s=30, interval_s=0.2)
        disks.remove(d.id)


@pytest.mark.parametrize("bad_id", ["a b", "../disks", "pvc-1", "0b3c", "*"])
def test_ids_that_are_no_uuid_name_nothing(disks: Disks, bad_id: str):
    vm_id = "6f0f3c2c-1d1e-4c57-9d5e-0e4c4a7f2a11"
    assert disks.get(bad_id) is None
    assert disks.remove(bad_id) is False
    assert disks.attachment(vm_id, bad_id) is None and disks.attachment(bad_id, vm_id) is None
    assert disks.detach(vm_id, bad_id) is False and disks.detach(bad_id, vm_id) is False
    with pytest.raises(NotFoundError, match="no engine id"):
        disks.attach(bad_id, vm_id)
    with pytest.raises(NotFoundError, match="no engine id"):
        disks.attach(vm_id, bad_id)
    with pytest.raises(NotFoundError):
        disks.resize(bad_id, GIB)


@pytest.mark.parametrize("volume_id", ["a b", "../../sda", "pvc-1"])
def test_flexvolume_refuses_a_volume_id_that_is_no_uuid(tmp_path, volume_id):
    """Refused before any configuration, node or engine is read: the message names the bad id."""
    env = {**os.environ, "OVIRT_FLEXDRIVER_CONF": str(tmp_path / "absent.json"), "OVIRT_FLEXDRIVER_WAIT_S": "1"}
    opts = json.dumps({"volumeID": volume_id})
    for argv in (["attach", opts, "node-a"], ["isattached", opts, "node-a"], ["waitforattach", "", opts]):
        proc = subprocess.run([sys.executable, "-m", "machine_controller.storage.flexvolume", *argv],
                              capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
        out = json.loads(proc.stdout)
        assert out["status"] == "Failure" and "no oVirt disk id" in out["message"], (argv, out)


@pytest.mark.parametrize("domain", ["*", 'nfs"data', "nfs\ndata"])
def test_a_storage_class_naming_a_pattern_is_invalid(domain):
    from machine_controller.storage.provisioner import parse_params
    with pytest.raises(ValueError, match="storageDomainName"):
        parse_params({"storageDomainName": domain})
