"""oVirt's side of fencing against the simulated engine (docs/fencing.md#power-actions-are-sent-once): a power
action is one request, whatever its answer; one of ours still running at the engine (its job, found by the
action's correlation id) is not sent again, and no start is sent while a stop of ours may still land; the VM
found by the providerID's id is the target's only when it bears the target's name."""

from __future__ import annotations

import datetime as dt
import time

import ovirtsdk4.types as types
import pytest

from hack import ovirt_install
from hack.ovirtsim.testing import running_simulator
from machine_controller.config import parse
from machine_controller.controllers.provider import ActionRefused, InstanceNotOwned, PowerState
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.ovirt.errors import TransientError
from machine_controller.ovirt.power import ActionPending, OvirtPower

TIMEOUT_S = 1
STOP = "POST /vms/{vm}/stop"
START = "POST /vms/{vm}/start"


@pytest.fixture
def engine(tmp_path):
    """The simulator, a client whose requests time out after TIMEOUT_S, and a running VM `w0`."""
    with running_simulator(tmp_path) as sim:
        conn = sim.connection()
        pool = ConnectionPool(size=2, timeout_s=TIMEOUT_S)
        try:
            inst = ovirt_install.prepare(conn, "infra-1")
            vms = conn.system_service().vms_service()
            vm = vms.add(types.Vm(name="w0", cluster=types.Cluster(id=inst.cluster_id),
                                  template=types.Template(name=inst.template_name)))
            _until(lambda: vms.vm_service(vm.id).get().status == types.VmStatus.DOWN)
            vms.vm_service(vm.id).start()
            pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                                  ca_file=sim.ca_file))
            yield sim, OvirtClient(pool), vm.id
        finally:
            pool.close()
            conn.close()


def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.05)


def _sent(sim, what: str) -> int:
    return sim.control.counts().get(what, 0)


def test_a_stop_answered_after_the_timeout_is_one_request_and_is_not_sent_again_while_it_runs(engine):
    sim, client, vm_id = engine
    power = OvirtPower(client)
    pid = f"ovirt://{vm_id}"
    sim.control.slow(f"/vms/{vm_id}/stop", 4 * TIMEOUT_S)
    assert not power.power_off_under_way(pid, "w0")

    with pytest.raises(TransientError) as lost:
        power.power_off(pid, "w0")
    assert not isinstance(lost.value, ActionRefused)  # a lost answer: the stop may have happened
    assert _sent(sim, STOP) == 1
    assert power.power_off_under_way(pid, "w0")
    power.power_off(pid, "w0")  # the engine's job says the stop is under way: nothing more is sent
    assert _sent(sim, STOP) == 1
    with pytest.raises(ActionPending):  # a start now would be undone when the stop lands
        power.power_on(pid, "w0")
    assert _sent(sim, START) == 1  # the fixture's own start only

    _until(lambda: power.power(pid, "w0").state == PowerState.OFF)
    _until(lambda: not any(j.status == types.JobStatus.STARTED for j in client.jobs(f"off-{vm_id.replace('-', '')}")))
    assert not power.power_off_under_way(pid, "w0")  # ended: a VM up now was started since, and is stopped again
    power.power_on(pid, "w0")
    assert (_sent(sim, STOP), _sent(sim, START)) == (1, 2)


def test_a_refused_stop_is_one_request(engine):
    sim, client, vm_id = engine
    sim.control.inject_fault(f"/vms/{vm_id}/stop", method="POST", status=409, count=None,
                             detail="[Cannot stop VM. Related operation is currently in progress.]")
    with pytest.raises(ActionRefused):
        OvirtPower(client).power_off(f"ovirt://{vm_id}", "w0")
    assert _sent(sim, STOP) == 1


def test_a_job_left_started_long_ago_does_not_hold_power_actions_back(engine):
    """A job the engine never ended (an engine restart in the middle of a command) is not a stop under way."""
    sim, client, vm_id = engine
    sim.control.slow(f"/vms/{vm_id}/stop", 4 * TIMEOUT_S)
    with pytest.raises(TransientError):
        OvirtPower(client).power_off(f"ovirt://{vm_id}", "w0")
    later = OvirtPower(client, clock=lambda: dt.datetime.now(dt.UTC) + dt.timedelta(minutes=11))
    assert OvirtPower(client).power_off_under_way(f"ovirt://{vm_id}", "w0")
    assert not later.power_off_under_way(f"ovirt://{vm_id}", "w0")
    later.power_off(f"ovirt://{vm_id}", "w0")
    assert _sent(sim, STOP) == 2


def test_a_vm_that_bears_another_name_is_neither_read_nor_sent_anything(engine):
    sim, client, vm_id = engine
    power = OvirtPower(client)
    stops, starts = _sent(sim, STOP), _sent(sim, START)
    for call in (power.power, power.power_off, power.power_off_under_way, power.power_on):
        with pytest.raises(InstanceNotOwned) as refused:
            call(f"ovirt://{vm_id}", "w1")
        assert vm_id in str(refused.value) and "'w0'" in str(refused.value) and "'w1'" in str(refused.value)
    assert (_sent(sim, STOP), _sent(sim, START)) == (stops, starts)
    assert power.power(f"ovirt://{vm_id}", "w0") is not None


@pytest.mark.parametrize("value, why", [("0", "at least 1"), ("-5", "at least 1"), ("3601", "at most 3600"),
                                        ("soon", "not an integer")])
def test_the_engine_request_timeout_is_range_checked(value, why, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse([f"--ovirt-timeout={value}"])
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip()
    assert "--ovirt-timeout" in line and why in line, line
    assert parse([]).ovirt_timeout_s == 60
