"""The simulator for the project's tests: start it, talk to its control API, stop it.

    from hack.ovirtsim.testing import running_simulator

    with running_simulator(tmp_path) as sim:           # HTTPS with a fresh CA, `fast` timings
        conn = sim.connection()                        # an ovirtsdk4.Connection (CA-file verification)
        ...
        sim.control.inject_fault("/vms/*/start", status=409, detail="[Cannot run VM. VM is locked.]")
        sim.control.crash_vm(vm_id)
        assert sim.control.counts()["POST /vms"] == 1
        sim.restart()                                  # kill and restart the process; state file kept

The simulator runs as a **subprocess** (`python -m hack.ovirtsim serve`): it has its own GIL, so it never slows
the code under test, it can be killed and restarted like a real engine, and its start costs ~0.3 s. Its stderr goes
to `<tmp_path>/ovirtsim.log`; its state to `<tmp_path>/ovirtsim-state.json`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


class ControlError(RuntimeError):
    pass


class ControlClient:
    """The control API (see `hack.ovirtsim.control`), one method per endpoint."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ControlError(f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None

    # faults
    def inject_fault(self, path: str, *, method: str = "*", status: int = 500,
                     reason: str | None = "Operation Failed", detail: str | None = "[Internal Engine Error]",
                     count: int | None = 1, probability: float = 1.0, delay: float = 0.0) -> int:
        """Answer matching requests with `status` and an engine fault (`reason=None`: empty body). Returns the
        rule id. `path` is a glob relative to the API (`/vms/*/start`) or absolute (`/ovirt-engine/sso/...`)."""
        rule = self._call("POST", "/faults", {"path": path, "method": method, "kind": "status", "status": status,
                                              "reason": reason, "detail": detail, "count": count,
                                              "probability": probability, "delay": delay})
        return int(rule["id"])

    def drop_connection(self, path: str, *, method: str = "*", count: int | None = 1,
                        probability: float = 1.0) -> int:
        """Close the connection of matching requests without an answer."""
        return int(self._call("POST", "/faults", {"path": path, "method": method, "kind": "drop", "count": count,
                                                  "probability": probability})["id"])

    def delay(self, path: str, seconds: float, *, method: str = "*", count: int | None = 1,
              probability: float = 1.0) -> int:
        """Hold matching requests `seconds` on their way, then carry them out and answer them normally: until it
        arrives the engine sees nothing of such a request (no job, no effect), and it is carried out even when the
        client gave up on it meanwhile (a request held in transit past the client's timeout)."""
        return int(self._call("POST", "/faults", {"path": path, "method": method, "kind": "delay", "delay": seconds,
                                                  "count": count, "probability": probability})["id"])

    def slow(self, path: str, seconds: float, *, method: str = "POST", count: int | None = 1) -> int:
        """Matching actions are taken at once (their job `started`) and carried out and answered `seconds` later:
        an engine whose command hangs on its host."""
        return int(self._call("POST", "/faults", {"path": path, "method": method, "kind": "slow", "delay": seconds,
                                                  "count": count})["id"])

    def faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "/faults")["faults"]

    def clear_faults(self, rule_id: int | None = None) -> None:
        self._call("DELETE", "/faults" if rule_id is None else f"/faults/{rule_id}")

    # engine state
    def expire_tokens(self) -> int:
        return int(self._call("POST", "/tokens/expire")["expired"])

    def vms(self) -> list[dict[str, Any]]:
        return self._call("GET", "/vms")["vms"]

    def vm(self, vm_id: str) -> dict[str, Any]:
        """Engine and guest view: status, host, ips, node_name, init_mode, block_devices, affinity_groups, tags."""
        return self._call("GET", f"/vms/{vm_id}")

    def crash_vm(self, vm_id: str) -> dict[str, Any]:
        return self._call("POST", f"/vms/{vm_id}/crash")

    def pause_vm(self, vm_id: str) -> dict[str, Any]:
        return self._call("POST", f"/vms/{vm_id}/pause")

    def fill_storage_domain(self, id_or_name: str, free_bytes: int = 0) -> dict[str, Any]:
        return self._call("POST", f"/storagedomains/{id_or_name}/fill", {"free_bytes": free_bytes})

    def set_host_status(self, id_or_name: str, status: str) -> dict[str, Any]:
        return self._call("POST", f"/hosts/{id_or_name}/status", {"status": status})

    def add_host(self, name: str, **capacity: int) -> dict[str, Any]:
        return self._call("POST", "/hosts", {"name": name, **capacity})

    def counts(self) -> dict[str, int]:
        """Requests so far by `METHOD template`, e.g. `{"GET /vms/{vm}": 12, "POST /sso/oauth/token": 1}`."""
        return self._call("GET", "/counts")["counts"]

    def reset_counts(self) -> None:
        self._call("DELETE", "/counts")

    def timings(self) -> dict[str, float]:
        return self._call("GET", "/timings")

    def set_timings(self, **seconds: float) -> dict[str, float]:
        return self._call("POST", "/timings", seconds)

    def restart_engine(self) -> None:
        """In-process restart: state reloaded from the state file, every token gone."""
        self._call("POST", "/restart")

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def real_guests(self, plane_dir: Path, images: list[Path], templates: list[str] | None = None,
                    vms: list[str] | None = None) -> dict[str, Any]:
        """Guests of `templates` (ids or names), and of VMs named like `vms` (fnmatch patterns), run as real nodes
        of the local control plane in `plane_dir`."""
        return self._call("POST", "/real-guests", {"plane": str(plane_dir), "images": [str(i) for i in images],
                                                   "templates": templates or [], "vms": vms or []})

    def real_nodes(self) -> dict[str, Any]:
        """{"templates": [...], "nodes": {vm id: Node name}, "cut_off": [vm ids whose node's kubelet is frozen],
        "errors": {vm id: why its node did not start}}"""
        return self._call("GET", "/real-guests")


@dataclass
class SimulatorHandle:
    url: str  # e.g. https://127.0.0.1:PORT/ovirt-engine/api
    ca_file: str | None
    username: str
    password: str
    control: ControlClient
    state_file: Path | None  # None: the engine keeps its state in memory only, and cannot be restarted with it
    log_file: Path
    process: subprocess.Popen = field(repr=False)
    argv: list[str] = field(repr=False, default_factory=list)
    startup_seconds: float = 0.0
    pod_url: str = ""  # the same API at the machine's address, which a pod on a real node reaches

    def connection(self, **kwargs: Any) -> Any:
        """An `ovirtsdk4.Connection` to the simulator (CA-file verification over TLS unless overridden)."""
        import ovirtsdk4 as sdk

        params: dict[str, Any] = {"url": self.url, "username": self.username, "password": self.password}
        if self.ca_file:
            params["ca_file"] = self.ca_file
        params.update(kwargs)
        return sdk.Connection(**params)

    def restart(self, kill: bool = False) -> None:
        """Stop the process (SIGTERM saves the state; `kill=True` is SIGKILL: only what was already written
        survives, as with a crashed engine) and start it again on the same ports with the same state file."""
        if self.state_file is None:
            raise RuntimeError("this simulator keeps no state file: restarted, it would be a new, empty engine")
        self.stop(kill=kill)
        fresh = _spawn(self.argv, self.log_file)
        self.process = fresh.process
        self.url, self.pod_url = fresh.info["url"], fresh.info["pod_url"]
        self.startup_seconds = fresh.info["startup_seconds"]

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@dataclass
class _Spawned:
    process: subprocess.Popen
    info: dict[str, Any]


def _spawn(argv: list[str], log_file: Path) -> _Spawned:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    log = open(log_file, "ab")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, cwd=REPO_ROOT, env=env)
    log.close()
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not line or not line[0]:
        proc.kill()
        raise RuntimeError(f"ovirtsim did not start; see {log_file}:\n{log_file.read_text()[-3000:]}")
    return _Spawned(proc, json.loads(line[0]))


@contextmanager
def running_simulator(tmp_path: Path, kubeconfig: str | Path | None = None, tls: bool = True,
                      profile: str = "fast", timings: dict[str, float] | None = None,
                      state_file: Path | None = None, extra_args: tuple[str, ...] = (),
                      persist: bool = True) -> Iterator[SimulatorHandle]:
    """Start a simulator for one test (or session) and stop it afterwards.

    Its state is written to `state_file` (by default one in `tmp_path`) every half second while it changes, so that
    `restart` finds it; `persist=False` keeps it in memory only, for a run that never restarts the engine: each
    write is a snapshot of the whole store under its lock, which at a thousand VMs took a sixth of the simulator's
    CPU (hack/bench/machines.py).

    `timings` overrides single timings of the profile (see `hack.ovirtsim.config.Timings`), e.g.
    `{"vm_create": 2.0}`; `kubeconfig` makes provisioned guests join that cluster as Nodes.
    """
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    state = None if not persist else Path(state_file) if state_file else tmp_path / "ovirtsim-state.json"
    log_file = tmp_path / "ovirtsim.log"
    argv = [sys.executable, "-m", "hack.ovirtsim", "serve", "--profile", profile,
            "--cert-dir", str(tmp_path / "ovirtsim-pki"), "--log-level", "INFO"]
    if state is not None:
        argv += ["--state-file", str(state)]
    if tls:
        argv.append("--tls")
    if kubeconfig:
        argv += ["--kubeconfig", str(kubeconfig)]
    for name, seconds in (timings or {}).items():
        argv += ["--timing", f"{name}={seconds}"]
    argv += list(extra_args)
    first = _spawn(argv, log_file)
    # Pin the ports so a restart keeps the URL the clients already hold.
    port = first.info["url"].split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    control_port = first.info["control_url"].rsplit(":", 1)[1]
    argv += ["--port", port, "--control-port", control_port]
    handle = SimulatorHandle(url=first.info["url"], ca_file=first.info["ca_file"], username=first.info["username"],
                             password=first.info["password"], control=ControlClient(first.info["control_url"]),
                             state_file=state, log_file=log_file, process=first.process, argv=argv,
                             startup_seconds=first.info["startup_seconds"], pod_url=first.info["pod_url"])
    try:
        yield handle
    finally:
        handle.stop()
