"""Fixtures: a fresh simulator per test (a subprocess, ~0.3 s to start) and an SDK connection to it."""

from __future__ import annotations

from typing import Iterator

import ovirtsdk4 as sdk
import pytest

from hack.ovirtsim.testing import SimulatorHandle, running_simulator


@pytest.fixture
def sim(tmp_path) -> Iterator[SimulatorHandle]:
    with running_simulator(tmp_path) as handle:
        yield handle


@pytest.fixture
def conn(sim: SimulatorHandle) -> Iterator[sdk.Connection]:
    connection = sim.connection()
    yield connection
    connection.close()
