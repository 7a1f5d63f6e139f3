"""Fixtures of the oVirt provider's tests: a simulated engine of their own (hack/ovirtsim) and a client of it."""

from __future__ import annotations

import pytest

from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials


def _sim_and_client(directory):
    with running_simulator(directory) as sim:
        pool = ConnectionPool(size=1)
        try:
            pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                                  ca_file=sim.ca_file))
            yield sim, OvirtClient(pool)
        finally:
            pool.close()


@pytest.fixture
def sim_and_client(tmp_path):
    yield from _sim_and_client(tmp_path)


@pytest.fixture(scope="module")
def module_sim_and_client(tmp_path_factory):
    """One simulator for a module whose tests leave nothing behind in it."""
    yield from _sim_and_client(tmp_path_factory.mktemp("sim"))
