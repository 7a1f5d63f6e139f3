"""A slow action (`sim.control.slow`): the engine takes the request at once, its job is `started` and found by the
request's correlation id, and the action's effect and answer come later, as when a command hangs on its host
(docs/compatibility.md#correlation-ids)."""

from __future__ import annotations

import threading
import time

import ovirtsdk4 as sdk
import pytest
from ovirtsdk4 import types

from .helpers import create_down_vm, start_up_vm, vm_service


def _jobs(conn, correlation_id: str) -> list[types.Job]:
    return conn.system_service().jobs_service().list(search=f'correlation_id="{correlation_id}"')


def test_a_slow_stop_has_its_job_started_at_once_and_lands_later(sim, conn):
    vm = start_up_vm(conn, "slow")
    sim.control.slow(f"/vms/{vm.id}/stop", 1.5)
    answered: list[float] = []
    began = time.monotonic()
    stop = threading.Thread(target=lambda: (vm_service(sim.connection(), vm.id).stop(
        query={"correlation_id": "slow-stop-1"}), answered.append(time.monotonic() - began)))
    stop.start()
    try:
        time.sleep(0.5)
        [job] = _jobs(conn, "slow-stop-1")
        assert job.status == types.JobStatus.STARTED
        assert vm_service(conn, vm.id).get().status == types.VmStatus.UP  # not carried out yet
    finally:
        stop.join(10)
    assert answered and answered[0] >= 1.5
    [job] = _jobs(conn, "slow-stop-1")
    assert job.description == "Stopping VM slow"
    assert vm_service(conn, vm.id).get().status in (types.VmStatus.POWERING_DOWN, types.VmStatus.DOWN)


def test_a_slow_action_the_engine_refuses_ends_its_job_failed(sim, conn):
    vm = create_down_vm(conn, "slowdown")
    sim.control.slow(f"/vms/{vm.id}/stop", 0.2)
    with pytest.raises(sdk.Error) as refused:  # a down VM cannot be stopped
        vm_service(conn, vm.id).stop(query={"correlation_id": "slow-stop-2"})
    assert refused.value.code == 409
    [job] = _jobs(conn, "slow-stop-2")
    assert job.status == types.JobStatus.FAILED
