"""A request held on its way (`sim.control.delay`): the engine sees nothing of it, no job and no effect, until it
arrives; then it is carried out as any other, its job found by the request's correlation id, even though the client
gave up on it meanwhile (docs/fencing.md#requests-whose-answer-was-lost)."""

from __future__ import annotations

import time

import ovirtsdk4 as sdk
import pytest
from ovirtsdk4 import types

from .helpers import start_up_vm, vm_service, wait_status


def _jobs(conn, correlation_id: str) -> list[types.Job]:
    return conn.system_service().jobs_service().list(search=f'correlation_id="{correlation_id}"')


def test_a_stop_held_past_the_clients_timeout_shows_nothing_until_it_arrives_then_lands(sim, conn):
    vm = start_up_vm(conn, "held")
    held = 3.0
    sim.control.delay(f"/vms/{vm.id}/stop", held, method="POST")
    # Kept open to the end: closing it logs its session out, and a request arriving after that is refused.
    impatient = sim.connection(timeout=1)
    began = time.monotonic()
    try:
        with pytest.raises(sdk.Error):  # the client's timeout: the answer is lost
            vm_service(impatient, vm.id).stop(query={"correlation_id": "held-stop-1"})
        assert time.monotonic() - began < held
        assert _jobs(conn, "held-stop-1") == []  # on its way: the engine knows nothing of it
        assert vm_service(conn, vm.id).get().status == types.VmStatus.UP

        time.sleep(held - (time.monotonic() - began) + 0.5)
        [job] = _jobs(conn, "held-stop-1")
        assert job.description == "Stopping VM held"
        wait_status(conn, vm.id, types.VmStatus.DOWN)
    finally:
        impatient.close()
