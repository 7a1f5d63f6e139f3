"""The simulated engine: state, clock, jobs, and the dispatch of one API request to its handler.

The HTTP layer (`server`) owns sockets, TLS, SSO endpoints, fault injection and counting; everything that is the
engine's own behaviour is here and in the handlers of `resources`.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import threading
import time
from typing import Any

from ovirtsdk4 import types

from hack.ovirtsim import persistence, resources, statemachine, xmlio
from hack.ovirtsim.auth import TokenStore
from hack.ovirtsim.config import API_PREFIX, SimConfig
from hack.ovirtsim.errors import ApiError
from hack.ovirtsim.faults import FaultInjector, RequestCounters
from hack.ovirtsim.guest import NodeAgent
from hack.ovirtsim.router import ROUTES, ApiRequest, ApiResponse, correlation_id
from hack.ovirtsim.seed import seed
from hack.ovirtsim.store import Store, Transition, href, new_id

log = logging.getLogger("ovirtsim")

MAX_JOBS = 5000  # the engine auto-clears finished jobs; keep the table bounded under benchmarks
SAVE_INTERVAL = 0.5  # seconds between state-file writes while the state changes
TICK = 0.02


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class Engine:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.timings = config.timings()
        self.store = Store()
        self.faults = FaultInjector()
        self.counters = RequestCounters()
        self.tokens = TokenStore(config.username, config.password, self.timings.token_ttl)
        self.started_at = time.time()
        self._stop = threading.Event()
        self._last_save = 0.0
        self._thread: threading.Thread | None = None
        self.load_or_seed()
        self.node_agent = NodeAgent(self, config.kubeconfig) if config.kubeconfig else None

    # -- lifecycle ------------------------------------------------------------------------------------------
    def load_or_seed(self) -> None:
        with self.store.lock:
            counts = persistence.load(self.config.state_file, self.store) if self.config.state_file else None
            if counts is not None:
                self.counters.reset(counts)
                log.info("state loaded from %s", self.config.state_file)
                return
            if self.config.seed:
                seed(self.store)
            self.store.dirty = True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="engine-clock", daemon=True)
        self._thread.start()
        if self.node_agent:
            self.node_agent.start()

    def stop(self) -> None:
        self._stop.set()
        if self.node_agent:
            self.node_agent.stop()
        if self._thread:
            self._thread.join(timeout=5)
        self.save()

    def restart(self) -> None:
        """What an `ovirt-engine` service restart does to clients: every SSO token is gone, and the state is
        whatever the database (the state file) holds."""
        with self.store.lock:
            self.save()
            self.tokens.expire_all()
            if self.config.state_file:
                persistence.load(self.config.state_file, self.store)  # counters: this process kept them

    def save(self) -> None:
        if not self.config.state_file:
            return
        with self.store.lock:
            data = persistence.snapshot(self.store, self.counters.snapshot())
            self.store.dirty = False
            self._last_save = time.time()
        persistence.write(self.config.state_file, data)

    def _loop(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self.tick()
                if self.store.dirty and time.time() - self._last_save >= SAVE_INTERVAL:
                    self.save()
            except Exception:  # the clock must keep running; log and carry on
                log.exception("engine clock")

    # -- the clock ------------------------------------------------------------------------------------------
    def tick(self) -> None:
        store = self.store
        now = time.time()
        if not store.timeline or store.timeline[0].due > now:
            return
        with store.lock:
            for t in list(store.due(now)):
                self._apply(t)

    def _apply(self, t: Transition) -> None:
        store = self.store
        if t.kind == "vm":
            vm = store.vms.get(t.target)
            if vm is not None:
                statemachine.apply_vm_transition(store, vm, t.value, t.gen)
        elif t.kind == "disk":
            disk = store.disks.get(t.target)
            if disk is not None:
                disk.status = types.DiskStatus(t.value)
        elif t.kind == "disk_delete":
            resources.disks.purge(self, t.target)
        elif t.kind == "job":
            job = store.jobs.get(t.target)
            if job is not None and job.status is types.JobStatus.STARTED:
                job.status = types.JobStatus(t.value or "finished")
                job.end_time = job.last_updated = utcnow()
        store.dirty = True

    # -- jobs (docs/compatibility.md#correlation-ids) ------------------------------------------------------------------
    def add_job(self, req: ApiRequest, description: str, duration: float = 0.0) -> types.Job:
        """The request's job, finished after `duration` (at once when 0)."""
        now = utcnow()
        job = req.job or self.start_job(req, description)  # a slow action's job started when it came in
        job.description, job.last_updated = description, now
        if duration > 0:
            self.store.schedule(duration, "job", job.id, "finished")
        else:
            job.status = types.JobStatus.FINISHED
            job.end_time = now
        self._trim_jobs()
        return job

    def start_job(self, req: ApiRequest, description: str) -> types.Job:
        """A `started` job for the request, which stays so until `add_job` (or a failure) ends it."""
        now = utcnow()
        job = types.Job(id=new_id(), description=description, status=types.JobStatus.STARTED, auto_cleared=True,
                        external=False, start_time=now, last_updated=now)
        job.href = href("jobs", job.id)
        self.store.jobs.put(job)
        self.store.runtime.job_correlation[job.id] = req.correlation_id
        self._trim_jobs()
        return job

    def _trim_jobs(self) -> None:
        jobs = self.store.jobs
        excess = len(jobs) - MAX_JOBS
        if excess <= 0:
            return
        # The oldest finished jobs go: found from the oldest on, not by copying the whole table at every job.
        done = list(itertools.islice((j for j in jobs.all() if j.status is not types.JobStatus.STARTED), excess))
        for job in done:
            jobs.remove(job.id)
            self.store.runtime.job_correlation.pop(job.id, None)

    # -- dispatch -------------------------------------------------------------------------------------------
    def route(self, method: str, path: str) -> tuple[Any, dict[str, str], str]:
        """(route or None, path params, counter template) of an API path (absolute)."""
        rel = api_relative(path)
        if rel is None:
            return None, {}, path
        r, params = ROUTES.match(method, rel)
        return r, params, (r.template if r else (ROUTES.template_for(method, rel) or "<unmatched>"))

    def handle(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: bytes, matched: tuple[Any, dict[str, str]] | None = None, slow: float = 0.0) -> ApiResponse:
        """One API request; `matched` is the (route, params) the caller already looked up, if any. An action made
        `slow` (faults.FaultKind.SLOW) has its job started at once and is carried out `slow` seconds later."""
        rel = api_relative(path) or "/"
        r, params = matched if matched is not None else ROUTES.match(method, rel)
        req = ApiRequest(method, rel, query, headers, body, params, r.template if r else "",
                         correlation_id(headers, query))
        if not self.tokens.check(headers.get("authorization")):
            resp = ApiResponse(401, xmlio.render_fault(ApiError(401, "Unauthorized", "Authentication required")))
            resp.headers["WWW-Authenticate"] = 'Bearer realm="RESTAPI"'
            return resp
        if r is None:
            status = 405 if ROUTES.template_for(method, rel) else 404
            log.info("no route for %s %s: %d", method, rel, status)
            return ApiResponse(status, b"")
        action: types.Action | None = None
        if slow and r.is_action:
            with self.store.lock:
                req.job = self.start_job(req, f"{method} {rel}")
            time.sleep(slow)
        try:
            with self.store.lock:
                self.tick()
                if r.is_action:
                    action = req.parse(types.Action) if req.body.strip() else types.Action()
                    req.action = action
                resp = r.handler(self, req)
                self.store.dirty = self.store.dirty or method != "GET"
        except ApiError as err:
            if req.job is not None and req.job.status is types.JobStatus.STARTED:
                with self.store.lock:
                    req.job.status, req.job.end_time = types.JobStatus.FAILED, utcnow()
            if err.reason is None:
                resp = ApiResponse(err.status, b"")
            else:
                resp = ApiResponse(err.status, xmlio.render_fault(err, as_action=r.is_action, action=action))
        resp.headers.setdefault("Correlation-Id", req.correlation_id)
        return resp


def api_relative(path: str) -> str | None:
    """`/ovirt-engine/api/vms` -> `/vms`; the `/v4` variant is accepted too (docs/compatibility.md#simulator)."""
    for prefix in (API_PREFIX + "/v4", API_PREFIX):
        if path == prefix:
            return "/"
        if path.startswith(prefix + "/"):
            return path[len(prefix):]
    return None
