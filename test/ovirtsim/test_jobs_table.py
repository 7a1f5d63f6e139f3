"""The engine's jobs table stays bounded: the oldest finished jobs go, a started one stays however old."""

from __future__ import annotations

from ovirtsdk4 import types

from hack.ovirtsim import engine as engine_module
from hack.ovirtsim.config import SimConfig
from hack.ovirtsim.router import ApiRequest


def _request() -> ApiRequest:
    return ApiRequest(method="POST", path="/vms", query={}, headers={}, body=b"")


def test_the_oldest_finished_jobs_go_and_a_started_one_stays(monkeypatch):
    monkeypatch.setattr(engine_module, "MAX_JOBS", 3)
    engine = engine_module.Engine(SimConfig(seed=False))
    started = engine.start_job(_request(), "a slow action")  # the oldest, still running
    finished = [engine.add_job(_request(), f"job {i}") for i in range(5)]
    kept = list(engine.store.jobs.all())
    assert [j.id for j in kept] == [started.id, finished[3].id, finished[4].id]
    assert kept[0].status is types.JobStatus.STARTED
