"""Every type the simulator serves carries the elements a real engine always sends, whatever the client set
(docs/compatibility.md#always-sent-elements). The expectations are the engine's REST mappers, read as XML off the
wire, so a client stricter than the Python SDK finds what it finds on an engine."""

from __future__ import annotations

import base64
import ssl
import urllib.request
import xml.etree.ElementTree as ET

import pytest
from ovirtsdk4 import types

from hack.ovirtsim.testing import running_simulator

from .helpers import create_down_vm, default_cluster, rhcos_template, start_up_vm, vm_service, wait_for

# path to GET (formatted with the objects made below), element holding one object, elements it must carry
CASES = {
    "vm": ("/vms/{vm}", ".", [
        "name", "description", "comment", "status", "memory", "memory_policy/guaranteed", "memory_policy/max",
        "memory_policy/ballooning", "cpu/architecture", "cpu/topology/cores", "cpu/topology/sockets",
        "cpu/topology/threads",
        "cpu_shares", "high_availability/enabled", "high_availability/priority", "bios/boot_menu/enabled",
        "migration_downtime", "stateless", "delete_protected", "start_paused", "multi_queues_enabled",
        "next_run_configuration_exists", "creation_time", "origin", "type", "os/type", "cluster", "template",
        "original_template"]),
    "template": ("/templates/{template}", ".", [
        "name", "description", "comment", "status", "memory", "memory_policy/ballooning", "cpu/topology/cores",
        "high_availability/enabled", "bios/boot_menu/enabled", "stateless", "delete_protected",
        "version/version_number"]),
    "instance_type": ("/instancetypes", "instance_type", ["name", "description", "comment", "memory",
                                                          "cpu/topology/cores"]),
    "cluster": ("/clusters/{cluster}", ".", ["name", "description", "comment", "data_center", "version/major",
                                             "cpu/architecture", "ballooning_enabled", "threads_as_cores",
                                             "virt_service", "gluster_service", "tunnel_migration", "trusted_service",
                                             "ha_reservation", "vnc_encryption", "ksm/enabled", "memory_policy"]),
    "data_center": ("/datacenters", "data_center", ["name", "description", "comment", "local", "status"]),
    "host": ("/hosts", "host", ["name", "comment", "address", "status", "spm/priority", "summary/total", "memory",
                                "max_scheduling_memory", "cpu/topology/cores", "ksm/enabled", "numa_supported",
                                "update_available", "reinstallation_required", "ovn_configured",
                                "device_passthrough/enabled", "protocol", "os/type"]),
    "storage_domain": ("/storagedomains", "storage_domain", [
        "name", "description", "comment", "type", "available", "used", "committed", "master",
        "warning_low_space_indicator", "critical_space_action_blocker", "storage/type", "wipe_after_delete",
        "discard_after_delete", "supports_discard", "supports_discard_zeroes_data", "backup"]),
    "network": ("/networks", "network", ["name", "description", "comment", "stp", "mtu", "port_isolation",
                                         "data_center"]),
    "vnic_profile": ("/vnicprofiles", "vnic_profile", ["name", "network", "pass_through/mode", "port_mirroring"]),
    "disk": ("/disks/{disk}", ".", ["name", "alias", "description", "provisioned_size", "actual_size", "format",
                                    "sparse", "status", "storage_type", "content_type", "shareable",
                                    "wipe_after_delete", "propagate_errors", "storage_domains/storage_domain"]),
    "disk_attachment": ("/vms/{vm}/diskattachments", "disk_attachment", [
        "active", "bootable", "interface", "pass_discard", "read_only", "uses_scsi_reservation", "disk", "vm"]),
    "nic": ("/vms/{vm}/nics", "nic", ["name", "interface", "linked", "plugged", "synced", "mac/address",
                                      "vnic_profile", "vm"]),
    "reported_device": ("/vms/{up}/reporteddevices", "reported_device", ["name", "description", "type",
                                                                        "mac/address", "ips/ip/address", "vm"]),
    "affinity_group": ("/clusters/{cluster}/affinitygroups/{group}", ".", [
        "name", "priority", "enforcing", "vms_rule/enabled", "vms_rule/enforcing", "vms_rule/positive",
        "hosts_rule/enabled", "hosts_rule/enforcing", "cluster", "vms", "hosts"]),
    "tag": ("/tags", "tag", ["name", "description"]),
    "job": ("/jobs", "job", ["description", "status", "start_time", "auto_cleared", "external"]),
    "step": ("/jobs/{job}/steps", "step", ["description", "type", "number", "status", "start_time", "external",
                                          "job"]),
    "graphics_console": ("/vms/{vm}/graphicsconsoles", "graphics_console", ["protocol", "vm"]),
    "snapshot": ("/vms/{vm}/snapshots", "snapshot", ["description", "snapshot_type", "snapshot_status",
                                                     "persist_memorystate", "date", "vm"]),
    "api": ("/", ".", ["product_info/version/major", "product_info/name", "special_objects/blank_template",
                       "special_objects/root_tag", "summary/vms/total", "time"]),
}


class _Wire:
    """GETs as any non-SDK client makes them (Basic auth, the simulator's CA)."""

    def __init__(self, sim) -> None:
        self.url = sim.url
        self.ctx = ssl.create_default_context(cafile=sim.ca_file)
        self.auth = "Basic " + base64.b64encode(f"{sim.username}:{sim.password}".encode()).decode()

    def get(self, path: str) -> ET.Element:
        req = urllib.request.Request(self.url + path, headers={"Authorization": self.auth})
        with urllib.request.urlopen(req, context=self.ctx) as resp:
            return ET.fromstring(resp.read())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One simulator with one object of every type, each made without the optional fields a client may omit."""
    with running_simulator(tmp_path_factory.mktemp("always-sent")) as sim:
        conn = sim.connection()
        vm = create_down_vm(conn, "plain")  # no comment, no description
        up = start_up_vm(conn, "running")
        wait_for(lambda: vm_service(conn, up.id).reported_devices_service().list())
        cluster = default_cluster(conn)
        groups = conn.system_service().clusters_service().cluster_service(cluster.id).affinity_groups_service()
        group = groups.add(types.AffinityGroup(name="no-priority"))  # no priority, no rules, no members
        disk = conn.system_service().disks_service().add(types.Disk(
            name="floating", provisioned_size=2**30, format=types.DiskFormat.COW,
            storage_domains=[types.StorageDomain(name="nfs-data")]))  # no description, no flags
        conn.system_service().tags_service().add(types.Tag(name="bare"))
        ids = {"vm": vm.id, "up": up.id, "cluster": cluster.id, "group": group.id, "disk": disk.id,
               "template": rhcos_template(conn).id, "job": conn.system_service().jobs_service().list()[0].id}
        yield sim, conn, ids
        conn.close()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_every_object_carries_what_the_engine_always_sends(world, kind):
    sim, _, ids = world
    path, item, expected = CASES[kind]
    root = _Wire(sim).get(path.format(**ids))
    objects = [root] if item == "." else root.findall(item)
    assert objects, f"{path} served no {item}"
    for obj in objects:
        missing = [e for e in expected if obj.find(e) is None]
        assert not missing, f"{kind} {obj.get('id')} lacks {missing}"


def test_unset_comment_is_empty_and_a_given_one_is_kept(world):
    sim, conn, ids = world
    wire = _Wire(sim)
    vm = wire.get(f"/vms/{ids['vm']}")
    assert vm.find("comment").text in (None, "") and vm.find("description").text in (None, "")
    commented = create_down_vm(conn, "commented", comment="kept", description="said")
    vm = wire.get(f"/vms/{commented.id}")
    assert vm.find("comment").text == "kept" and vm.find("description").text == "said"
    assert vm_service(conn, ids["vm"]).get().comment == ""  # the Python SDK reads the empty element too


def test_affinity_group_without_priority_has_the_engine_default(world):
    sim, conn, ids = world
    group = _Wire(sim).get(f"/clusters/{ids['cluster']}/affinitygroups/{ids['group']}")
    assert float(group.find("priority").text) == 1.0
    assert group.find("vms_rule/enabled").text == "false"  # no rule given: disabled (AffinityGroupMapper)
    groups = conn.system_service().clusters_service().cluster_service(ids["cluster"]).affinity_groups_service()
    assert groups.add(types.AffinityGroup(name="prioritised", priority=3.5)).priority == 3.5


def test_followed_objects_are_complete_and_references_stay_bare(world):
    sim, _, ids = world
    vm = _Wire(sim).get(f"/vms/{ids['vm']}?follow=disk_attachments.disk,nics")
    attachment = vm.find("disk_attachments/disk_attachment")
    assert attachment.find("pass_discard") is not None and attachment.find("disk/description") is not None
    assert vm.find("nics/nic/synced") is not None
    assert list(vm.find("cluster")) == [] and vm.find("cluster").get("id") == ids["cluster"]
