"""Run `ovirt-machine-controller` as a separate process, as a Deployment would: the demo and the end-to-end
tests use it, and tests can kill it (SIGKILL) at any moment to prove that nothing is lost or duplicated."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Self


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A controller binary run in its own session with its output in `log_path`; `health_port` is where it serves
    /readyz (None: it serves none)."""

    def __init__(self, args: list[str], log_path: Path, health_port: int | None, metrics_port: int | None = None,
                 env: dict[str, str] | None = None):
        self._args = args
        self.log_path = log_path
        self.health_port = health_port
        self.metrics_port = metrics_port
        self._env = env if env is not None else dict(os.environ)
        self.proc: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        return self.log_path.stem

    def start(self) -> Self:
        repo = Path(__file__).resolve().parents[1]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self._args, stdout=self._log, stderr=subprocess.STDOUT, cwd=repo, env=self._env,
                                     start_new_session=True)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until /readyz answers 200 (informers synced and credentials loaded)."""
        if self.health_port is None:
            raise ValueError(f"{self.name} serves no /readyz")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log: {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{self.name} not ready after {timeout}s; log: {self.log_path}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, no Lease release, as when a node dies."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 40.0) -> int | None:
        """SIGTERM and wait for the graceful shutdown."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class ControllerProcess(Process):
    """This project's `ovirt-machine-controller`."""

    def __init__(self, kubeconfig: Path, log_path: Path, namespace: str = "openshift-machine-api",
                 leader_elect: bool = False, identity: str | None = None, extra_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, python: str = sys.executable):
        """`python`: the interpreter to run the controller with (the benchmark's has the product's dependencies
        only, hack/bench/product_venv.py); the package itself is this source tree's either way."""
        health_port, metrics_port = free_port(), free_port()
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.identity = identity or f"controller-{health_port}"
        args = [
            python, "-m", "machine_controller",
            f"--kubeconfig={kubeconfig}", f"--namespace={namespace}", f"--identity={self.identity}",
            "--bind-address=127.0.0.1", f"--health-port={health_port}", f"--metrics-port={metrics_port}",
            "--leader-elect" if leader_elect else "--no-leader-elect",
            *extra_args,
        ]
        process_env = {**os.environ, **(env or {})}
        process_env.pop("KUBECONFIG", None)  # the flag is the one source of truth
        super().__init__(args, log_path, health_port, metrics_port, process_env)
