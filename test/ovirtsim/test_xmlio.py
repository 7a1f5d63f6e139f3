"""The simulator's response writer produces exactly the SDK's documents (it drives the SDK's generated writers)."""

from __future__ import annotations

import datetime

import ovirtsdk4  # noqa: F401 - importing the package registers the SDK's readers and writers
from ovirtsdk4 import types
from ovirtsdk4.reader import Reader
from ovirtsdk4.writer import Writer

from hack.ovirtsim import xmlio


def _rich_vm() -> types.Vm:
    vm = types.Vm(
        id="v1", name='odd <name> & "quotes"\r', memory=2**33, status=types.VmStatus.IMAGE_LOCKED,
        creation_time=datetime.datetime(2024, 5, 1, 10, 0, tzinfo=datetime.timezone.utc), stateless=False,
        cpu=types.Cpu(topology=types.CpuTopology(cores=2, sockets=1, threads=1)),
        custom_properties=[types.CustomProperty(name="hugepages", value="1048576")],
        initialization=types.Initialization(custom_script='{"ignition": {"version": "3.2.0"}}\n', host_name="h"),
        cluster=types.Cluster(id="c1"), disk_attachments=[], high_availability=types.HighAvailability(priority=1))
    vm.href = "/ovirt-engine/api/vms/v1"
    return vm


def test_writer_output_is_byte_identical_to_the_sdk_writer():
    vm = _rich_vm()
    assert xmlio.write(vm) == Writer.write(vm)
    assert xmlio.write([vm, vm], root="vms") == Writer.write([vm, vm], root="vms")
    assert xmlio.write([], root="vms") == Writer.write([], root="vms")


def test_rendered_entity_reads_back_with_links_as_followable_lists():
    vm = _rich_vm()
    back = Reader.read(xmlio.render(vm))
    assert back.name == vm.name and back.initialization.custom_script == vm.initialization.custom_script
    assert back.nics.href == "/ovirt-engine/api/vms/v1/nics"
    assert back.disk_attachments.href == "/ovirt-engine/api/vms/v1/diskattachments"
    assert Reader.read(xmlio.render(vm, skip_links=["nics"])).nics is None
