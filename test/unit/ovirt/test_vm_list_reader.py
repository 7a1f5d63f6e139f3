"""The cluster's VM list read from the engine's XML (machine_controller/ovirt/vm_list_reader.py) gives the same records
as the SDK's reader."""

from __future__ import annotations

import time

import ovirtsdk4.types as types
import pytest
from ovirtsdk4 import http as sdk_http

from hack import ovirt_install
from machine_controller.ovirt.vm_list_reader import (
    ListedAttachment,
    ListedDevice,
    ListedDisk,
    ListedIp,
    ListedTag,
    ListedVm,
)
from vm_list_xml import read_vms

FOLLOW = "reported_devices,tags,disk_attachments.disk"


def _from_sdk(vm: types.Vm) -> ListedVm:
    """What a ListedVm must hold, taken from the SDK's own reading of the same VM."""
    return ListedVm(
        id=vm.id, name=vm.name, status=vm.status,
        comment=vm.comment, tags=None if vm.tags is None else tuple(ListedTag(t.name) for t in vm.tags),
        reported_devices=None if vm.reported_devices is None else tuple(
            ListedDevice(d.name, d.type, tuple(ListedIp(ip.address) for ip in d.ips or ()))
            for d in vm.reported_devices),
        disk_attachments=None if vm.disk_attachments is None else tuple(
            ListedAttachment(a.id, a.bootable, None if a.disk is None else ListedDisk(
                a.disk.id, a.disk.status, a.disk.provisioned_size))
            for a in vm.disk_attachments))


def _raw(conn, query: dict) -> bytes:
    response = conn.wait(conn.send(sdk_http.Request(method="GET", path="/vms", query=query)))
    assert response.code == 200
    return response.body


def test_the_same_records_as_the_sdks_reader_for_vms_down_and_running(sim_and_client):
    sim, _ = sim_and_client
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        vms = conn.system_service().vms_service()
        ignition = ovirt_install.sample("worker-user-data.yaml")["stringData"]["userData"]  # its guest runs an agent
        created = [vms.add(types.Vm(name=f"w{i}", cluster=types.Cluster(id=inst.cluster_id),
                                    template=types.Template(name=inst.template_name),
                                    initialization=types.Initialization(custom_script=ignition, host_name=f"w{i}")))
                   for i in range(3)]
        tag = conn.system_service().tags_service().add(types.Tag(name="infra-1-tag"))
        vms.vm_service(created[0].id).tags_service().add(types.Tag(id=tag.id))
        deadline = time.monotonic() + 30
        while any(v.status != types.VmStatus.DOWN for v in vms.list(search="name=w*")):
            assert time.monotonic() < deadline, "the new VMs' disks were not unlocked"
            time.sleep(0.1)
        vms.vm_service(created[1].id).start()
        # Running with a guest address: reported devices with IPs are read too.
        while not any(d.ips for d in vms.vm_service(created[1].id).reported_devices_service().list()):
            assert time.monotonic() < deadline, "the started VM reported no address"
            time.sleep(0.1)
        cluster = conn.system_service().clusters_service().cluster_service(inst.cluster_id).get().name
        query = {"search": f"cluster={cluster}", "follow": FOLLOW}
        body = _raw(conn, query)
        by_sdk = vms.list(search=f"cluster={cluster}", follow=FOLLOW)
        linked_only = _raw(conn, {"search": f"cluster={cluster}"})
        linked_by_sdk = vms.list(search=f"cluster={cluster}")
    finally:
        conn.close()
    listed = read_vms(body)
    assert listed == [_from_sdk(v) for v in by_sdk]
    assert any(ip for v in listed for d in v.reported_devices or () for ip in d.ips)  # something was compared
    assert any(v.tags for v in listed) and all(v.disk_attachments for v in listed)
    # Not followed: the SDK makes an empty list of a linked one, and so does this.
    assert read_vms(linked_only) == [_from_sdk(v) for v in linked_by_sdk]


def test_a_vm_link_inside_a_vm_is_not_a_vm_of_the_list_and_odd_values_read_as_the_sdk_reads_them():
    body = b"""<vms>
      <vm href="/vms/1" id="1"><name>w0</name><status>no_such_state</status>
        <disk_attachments><disk_attachment id="a1"><bootable>TRUE</bootable><vm href="/vms/1" id="1"/>
          <disk id="d1"><status>locked</status><provisioned_size>42</provisioned_size></disk></disk_attachment>
        </disk_attachments>
      </vm>
      <vm href="/vms/2" id="2"><name>w1</name><status>up</status><tags/></vm>
    </vms>"""
    assert read_vms(body) == [
        ListedVm("1", "w0", None, None, None,
                 (ListedAttachment("a1", True, ListedDisk("d1", types.DiskStatus.LOCKED, 42)),)),
        ListedVm("2", "w1", types.VmStatus.UP, (), None, None),
    ]
    assert read_vms(b"<vms/>") == []
    with pytest.raises(ValueError, match="valid boolean"):
        read_vms(b"<vms><vm id='1'><disk_attachments><disk_attachment><bootable>yes</bootable>"
                 b"</disk_attachment></disk_attachments></vm></vms>")
