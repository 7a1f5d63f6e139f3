"""Fencing a Cluster API Machine's VM (docs/fencing.md#both-front-ends), against the simulated engine: the VM of an
OvirtMachine is the target's only when it bears the OvirtMachine's name AND its owner mark (the namespace is part of
the proof, since OvirtMachine names are unique per namespace only: ovirt/owner_mark.py). Another namespace's VM of
the same name, or one with no mark, is neither read nor sent anything."""

from __future__ import annotations

import time

import ovirtsdk4.types as types
import pytest

from api.machine import Machine
from hack import ovirt_install
from hack.ovirtsim.testing import running_simulator
from machine_controller.controllers.provider import InstanceNotOwned, PowerState
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.ovirt.engines import OWNER_MARKS
from machine_controller.ovirt.power import OvirtPower

STOP = "POST /vms/{vm}/stop"


def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.05)


@pytest.fixture
def engine(tmp_path):
    """The simulator and a client; `vm(name, comment)` makes a running VM and gives its id."""
    with running_simulator(tmp_path) as sim:
        conn = sim.connection()
        pool = ConnectionPool(size=2, timeout_s=5)
        try:
            inst = ovirt_install.prepare(conn, "infra-1")
            vms = conn.system_service().vms_service()

            def vm(name: str, comment: str | None) -> str:
                made = vms.add(types.Vm(name=name, comment=comment, cluster=types.Cluster(id=inst.cluster_id),
                                        template=types.Template(name=inst.template_name)))
                _until(lambda: vms.vm_service(made.id).get().status == types.VmStatus.DOWN)
                vms.vm_service(made.id).start()
                return made.id

            pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                                  ca_file=sim.ca_file))
            yield sim, OvirtClient(pool), vm
        finally:
            pool.close()
            conn.close()


def _mark(namespace: str, name: str) -> str:
    return OWNER_MARKS.mark(Machine.from_dict({"metadata": {"name": name, "namespace": namespace, "uid": "u1"}}))


def test_the_vm_bearing_the_ovirtmachines_name_and_mark_is_read_and_stopped(engine):
    sim, client, vm = engine
    vm_id = vm("w0", _mark("team-a", "w0"))
    power = OvirtPower(client, owner_marks=OWNER_MARKS, namespace="team-a")
    assert power.power(f"ovirt://{vm_id}", "w0") is not None
    stops = sim.control.counts().get(STOP, 0)
    assert power.power_off(f"ovirt://{vm_id}", "w0") is True
    assert sim.control.counts().get(STOP, 0) == stops + 1
    _until(lambda: (p := power.power(f"ovirt://{vm_id}", "w0")) is not None and p.state is PowerState.OFF)


@pytest.mark.parametrize("comment, says", [
    (_mark("team-b", "w0"), "team-b/w0"),  # the same name in another namespace: another Cluster's VM
    (None, "bears no owner mark"),
], ids=["another-namespaces-mark", "no-mark"])
def test_a_vm_of_the_name_without_this_namespaces_mark_is_neither_read_nor_sent_anything(engine, comment, says):
    sim, client, vm = engine
    vm_id = vm("w0", comment)
    power = OvirtPower(client, owner_marks=OWNER_MARKS, namespace="team-a")
    stops = sim.control.counts().get(STOP, 0)
    for call in (power.power, power.power_off, power.power_off_under_way, power.power_on):
        with pytest.raises(InstanceNotOwned) as refused:
            call(f"ovirt://{vm_id}", "w0")
        assert vm_id in str(refused.value) and says in str(refused.value), str(refused.value)
    assert sim.control.counts().get(STOP, 0) == stops
    # Without marks (the Machine API's one engine), the name alone is the proof, as before.
    assert OvirtPower(client).power(f"ovirt://{vm_id}", "w0") is not None
