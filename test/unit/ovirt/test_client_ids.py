"""The oVirt client is the last guard before the engine: an id that is no engine UUID is never put into a request
(docs/architecture.md#acting-only-on-what-is-ours). Whatever a caller passes, a method that puts an id into a URL
path (or a request body) refuses it with `NotAnOvirtId`, a fault that is not retried, and the engine sees nothing."""

from __future__ import annotations

import ovirtsdk4.types as types
import pytest

from machine_controller.ovirt.client import NotAnOvirtId
from machine_controller.ovirt.errors import BadRequestError

GOOD = "0000000a-000a-000a-000a-00000000000a"
BAD = ["bad id", "", f"{GOOD}/../../clusters", f"{GOOD}\n", "Default", "*"]

# Each method that puts an id into a request, with the positions of its ids.
CALLS = {
    "vm": lambda c, i: c.vm(i),
    "vm_disk_attachments": lambda c, i: c.vm_disk_attachments(i),
    "cluster": lambda c, i: c.cluster(i),
    "template_disk_attachments": lambda c, i: c.template_disk_attachments(i),
    "vnic_profile_exists": lambda c, i: c.vnic_profile_exists(i),
    "affinity_group": lambda c, i: c.affinity_group(i, "group"),
    "disk_attachments": lambda c, i: c.disk_attachments(i),
    "disk": lambda c, i: c.disk(i),
    "resize_disk": lambda c, i: c.resize_disk(i, 1024, "cid"),
    "detach_disk": lambda c, i: c.detach_disk(i, GOOD),
    "nics": lambda c, i: c.nics(i),
    "remove_nic": lambda c, i: c.remove_nic(i, GOOD),
    "add_nic (VM)": lambda c, i: c.add_nic(i, "nic1", GOOD),
    "add_nic (vNIC profile)": lambda c, i: c.add_nic(GOOD, "nic1", i),
    "graphics_consoles": lambda c, i: c.graphics_consoles(i),
    "remove_graphics_console": lambda c, i: c.remove_graphics_console(i, "7370696365"),
    "vm_tags": lambda c, i: c.vm_tags(i),
    "add_vm_tag": lambda c, i: c.add_vm_tag(i, "infra"),
    "add_vm_to_affinity_group (cluster)": lambda c, i: c.add_vm_to_affinity_group(i, GOOD, GOOD),
    "add_vm_to_affinity_group (group)": lambda c, i: c.add_vm_to_affinity_group(GOOD, i, GOOD),
    "add_vm_to_affinity_group (VM)": lambda c, i: c.add_vm_to_affinity_group(GOOD, GOOD, i),
    "auto_pin": lambda c, i: c.auto_pin(i),
    "start_vm": lambda c, i: c.start_vm(i, "cid"),
    "stop_vm": lambda c, i: c.stop_vm(i, "cid"),
    "remove_vm": lambda c, i: c.remove_vm(i),
    "reported_devices": lambda c, i: c.reported_devices(i),
    "create_vm (cluster)": lambda c, i: c.create_vm(types.Vm(name="w0", cluster=types.Cluster(id=i),
                                                             template=types.Template(id=GOOD)), True, "cid"),
    "create_vm (template)": lambda c, i: c.create_vm(types.Vm(name="w0", cluster=types.Cluster(id=GOOD),
                                                              template=types.Template(id=i)), True, "cid"),
}


@pytest.mark.parametrize("bad", BAD, ids=repr)
@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_an_id_that_is_no_uuid_never_reaches_the_engine(module_sim_and_client, call, bad):
    sim, client = module_sim_and_client
    before = sim.control.counts()
    with pytest.raises(NotAnOvirtId) as refused:
        call(client, bad)
    assert isinstance(refused.value, BadRequestError) and not refused.value.transient
    assert refused.value.value == bad and repr(bad) in str(refused.value)
    assert "UUID" in str(refused.value)
    assert sim.control.counts() == before, "a request was sent"


def test_a_uuid_is_sent(module_sim_and_client):
    sim, client = module_sim_and_client
    assert client.cluster(GOOD) is None  # asked, and the engine has no such cluster
    assert client.vm(GOOD.upper()) is None
