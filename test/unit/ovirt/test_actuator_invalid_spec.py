"""A Machine whose provider spec names an id that is no UUID, against the simulated engine: nothing of that spec is
sent, it fails naming the field, and its deletion needs nothing of the spec (its VM is looked for by its name), so
it always ends (docs/architecture.md#acting-only-on-what-is-ours)."""

from __future__ import annotations

import time

import ovirtsdk4.types as types
import pytest

from api import keys
from api.machine import Machine
from api.provider_spec import parse_provider_spec
from hack import ovirt_install
from machine_controller.controllers.provider import InvalidMachineConfiguration
from machine_controller.ovirt import actuator as actuator_module
from machine_controller.ovirt.actuator import OvirtActuator
from machine_controller.ovirt.errors import TransientError

BAD_CLUSTER = "5f4c6a1e-8d3b-4f2a-9c7e 1b2d3e4f5a6b"


def _setup(sim, ovirt, name: str, **overrides):
    conn = sim.connection()
    inst = ovirt_install.prepare(conn, "infra-1")
    raw = ovirt_install.machine_for(inst, "ns", name, affinity_groups_names=None, **overrides)
    return conn, inst, raw, OvirtActuator(ovirt, user_data=lambda ns, name: "{}")


def _api_requests(sim) -> dict[str, int]:
    """The engine's API requests since the counts were reset (a login is not one)."""
    return {k: n for k, n in sim.control.counts().items() if "/sso/" not in k}


def _cluster_requests(sim) -> int:
    return sum(n for k, n in _api_requests(sim).items() if "/clusters/" in k)


def test_an_invalid_spec_fails_the_machine_and_nothing_of_it_is_sent(sim_and_client):
    sim, ovirt = sim_and_client
    conn, _, raw, actuator = _setup(sim, ovirt, "worker-i", cluster_id=BAD_CLUSTER)
    try:
        sim.control.reset_counts()
        with pytest.raises(InvalidMachineConfiguration, match=r"spec\.providerSpec\.value\.cluster_id: Invalid value"):
            actuator.provision(Machine.from_dict(raw))
        assert _api_requests(sim) == {}
    finally:
        conn.close()


def test_an_id_the_validation_let_through_is_stopped_by_the_client_and_fails_the_machine_naming_its_field(
        sim_and_client, monkeypatch):
    """The client is the last guard: were the validation to miss an id, it still never reaches the engine, and the
    Machine fails naming the field that holds it."""
    sim, ovirt = sim_and_client
    monkeypatch.setattr(actuator_module, "load_provider_spec", parse_provider_spec)  # no validation
    conn, _, raw, actuator = _setup(sim, ovirt, "worker-g", cluster_id=BAD_CLUSTER)
    try:
        sim.control.reset_counts()
        with pytest.raises(InvalidMachineConfiguration) as failed:
            actuator.provision(Machine.from_dict(raw))
        assert str(failed.value).startswith(f'spec.providerSpec.value.cluster_id: Invalid value: "{BAD_CLUSTER}": '
                                            "must be an oVirt ID"), str(failed.value)
        assert _cluster_requests(sim) == 0
        # Deleting it looks for its VM by name alone.
        assert actuator.delete(Machine.from_dict(raw)).done
        assert _cluster_requests(sim) == 0
    finally:
        conn.close()


@pytest.mark.parametrize("bad", [BAD_CLUSTER, "Default"])
def test_deleting_a_machine_with_an_invalid_spec_asks_for_its_name_only_and_ends_when_no_vm_has_it(sim_and_client,
                                                                                                  bad):
    sim, ovirt = sim_and_client
    conn, _, raw, actuator = _setup(sim, ovirt, "worker-n", cluster_id=bad)
    try:
        sim.control.reset_counts()
        assert actuator.delete(Machine.from_dict(raw)).done
        assert _api_requests(sim) == {"GET /vms": 1}  # the search for its name
    finally:
        conn.close()


def test_the_vm_of_a_machine_whose_spec_became_invalid_is_removed_with_it(sim_and_client):
    """A create may have been sent before the spec was edited: the VM of the Machine's name is its own whatever
    the spec says now, so it is found by that name, stopped and removed, never left behind."""
    sim, ovirt = sim_and_client
    conn, inst, raw, actuator = _setup(sim, ovirt, "worker-e", cluster_id="Default")
    try:
        vms = conn.system_service().vms_service()
        vm = vms.add(types.Vm(name="worker-e", cluster=types.Cluster(id=inst.cluster_id),
                              template=types.Template(name=inst.template_name)))
        deadline = time.monotonic() + 30
        while vms.vm_service(vm.id).get().status != types.VmStatus.DOWN:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        vms.vm_service(vm.id).start()
        machine = Machine.from_dict(raw)
        sim.control.reset_counts()
        for _ in range(100):
            progress = actuator.delete(machine)
            if progress.done:
                break
            time.sleep(min(progress.requeue_after, 0.5))
        assert progress.done
        assert vms.list(search="name=worker-e") == []
        assert _cluster_requests(sim) == 0
    finally:
        conn.close()


def test_a_deletion_the_engine_cannot_answer_raises_and_removes_nothing(sim_and_client):
    """No answer is no proof that the VM is gone: the deletion is not done, the error says why, and the caller
    retries it."""
    sim, ovirt = sim_and_client
    conn, _, raw, actuator = _setup(sim, ovirt, "worker-u", cluster_id="Default")
    try:
        sim.control.inject_fault("/vms*", status=503, reason="Service Unavailable", detail="engine restarting",
                                 count=None)
        with pytest.raises(TransientError, match="503"):
            actuator.delete(Machine.from_dict(raw))
        sim.control.clear_faults()
        assert actuator.delete(Machine.from_dict(raw)).done
    finally:
        conn.close()


def test_a_recorded_id_that_is_no_uuid_is_no_hint(sim_and_client):
    sim, ovirt = sim_and_client
    conn, _, raw, actuator = _setup(sim, ovirt, "worker-r")
    try:
        raw["metadata"]["annotations"] = {keys.ANNOTATION_VM_ID: "bad id"}
        raw["spec"]["providerID"] = "ovirt://bad id"
        raw["status"] = {"providerStatus": {"instanceId": "bad id"}}
        sim.control.reset_counts()
        assert actuator.delete(Machine.from_dict(raw)).done
        assert "GET /vms/{vm}" not in sim.control.counts()
    finally:
        conn.close()
