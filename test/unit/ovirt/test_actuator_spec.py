"""The actuator's spec gate: what makes a Machine an InvalidConfiguration before any VM exists."""

import pytest

from api.machine import Machine
from machine_controller.controllers.provider import InvalidMachineConfiguration
from machine_controller.ovirt.actuator import OvirtActuator

SPEC = {"userDataSecret": {"name": "u"}, "cluster_id": "5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b", "template_name": "t",
        "type": "server",
        "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory_mb": 4096, "os_disk": {"size_gb": 120},
        "auto_pinning_policy": "resize_and_pin"}


class _Engine:
    """Stands in for OvirtClient in this unit test only: it answers the one question spec_of asks."""

    def __init__(self, version):
        self.version = version

    def product_version(self):
        return self.version


def _machine(spec):
    return Machine.from_dict({"metadata": {"name": "m", "namespace": "ns"}, "spec": {"providerSpec": {"value": spec}}})


def test_auto_pinning_on_an_engine_older_than_4_4_5_is_invalid():
    with pytest.raises(InvalidMachineConfiguration,
                       match=r"auto_pinning_policy: Forbidden: .*4\.4\.5.*engine is 4\.4\.4"):
        OvirtActuator(_Engine((4, 4, 4)), user_data=lambda ns, n: "").spec_of(_machine(SPEC))


def test_auto_pinning_on_a_recent_engine_passes():
    assert OvirtActuator(_Engine((4, 5, 7)), user_data=lambda ns, n: "").spec_of(_machine(SPEC)).auto_pinning_enabled


def test_without_auto_pinning_the_engine_is_not_asked():
    spec = {**SPEC, "auto_pinning_policy": "none"}
    # An engine whose version is None would fail the comparison if it were asked.
    assert not OvirtActuator(_Engine(None), user_data=lambda ns, n: "").spec_of(_machine(spec)).auto_pinning_enabled


def test_every_spec_problem_is_in_the_one_message():
    with pytest.raises(InvalidMachineConfiguration) as err:
        OvirtActuator(_Engine((4, 5, 7)), user_data=lambda ns, n: "").spec_of(
            _machine({**SPEC, "type": "", "os_disk": None, "auto_pinning_policy": "none"}))
    assert "spec.providerSpec.value.type" in str(err.value) and "spec.providerSpec.value.os_disk" in str(err.value)
