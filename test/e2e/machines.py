"""Helpers of the Machine end-to-end tests: Machines shaped like the installer's, a controller process per
test, and bounded waits on what a user would look at (`kubectl get machine -o json`, the engine's VMs)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from api import keys
from hack import ovirt_install
from hack.controller_process import ControllerProcess
from testbed.mao_controllers import DROP_IN_CONTROLLERS, MaoControllers, install_openshift_config

INFRA_ID = "ocp-demo-x7k2p"  # the samples' infra ID (config/samples)
MACHINE_API_NS = "openshift-machine-api"

# How the controllers are deployed (docs/architecture.md#deployment-modes): this project's process runs every
# controller, or only the actuator side beside machine-api-operator's own machineset, nodelink and health-check
# controllers, built from MAO's Go module (hack/controlplane/mao.py).
STANDALONE = "standalone"
DROP_IN = "drop-in"
# A scenario that must behave the same in both modes: `@both_modes` on a test that takes `menv`.
both_modes = pytest.mark.parametrize("menv", [STANDALONE, DROP_IN], indirect=True)


def wait_for(what: str, probe: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """Poll until `probe()` is truthy and return it; fail naming `what` and the last value otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last value: {value!r}"
        time.sleep(interval)


def unique_name(prefix: str = "worker") -> str:
    # oVirt VM names are global, and the guest's Node is named after the VM: unique across the whole session.
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# A standalone Machine shaped like the installer's workers (see hack.ovirt_install.machine_for).
machine_manifest = ovirt_install.machine_for


class MachineEnv:
    """One test's view: its namespace (with the worker user-data secret) and the simulated engine."""

    def __init__(self, cluster, sim, namespace: str, tmp_path: Path, mode: str = STANDALONE):
        self.mode = mode
        self.cluster = cluster
        self.sim = sim
        self.inst = sim.installation
        self.namespace = namespace
        self.tmp_path = tmp_path
        user_data = ovirt_install.sample("worker-user-data.yaml")
        user_data["metadata"]["namespace"] = namespace
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(user_data))
        self.ignition = user_data["stringData"]["userData"]
        self._controllers: list[ControllerProcess] = []
        self.mao: MaoControllers | None = None

    # --- the controller ---------------------------------------------------------------------------------------
    def controller(self, user: str = "admin", namespace: str | None = None, leader_elect: bool = False,
                   extra_args: tuple[str, ...] = ()) -> ControllerProcess:
        """This project's controller process; in drop-in mode only its actuator side, and MAO's controllers for
        the namespace started first (once)."""
        if self.mode == DROP_IN:
            if self.mao is None:
                install_openshift_config(self.cluster.kubectl, INFRA_ID)
                self.mao = MaoControllers(self.cluster.kubeconfig, namespace or self.namespace, self.tmp_path)
                self.mao.start()
            extra_args = (*extra_args, f"--controllers={DROP_IN_CONTROLLERS}")
        n = len(self._controllers)
        proc = ControllerProcess(
            self.cluster.kubeconfig_for(user), self.tmp_path / f"controller-{n}.log",
            namespace=namespace or self.namespace, leader_elect=leader_elect,
            extra_args=("--backoff-base=0.2", "--backoff-cap=5", "--log-level=debug",
                        "--leader-elect-lease-duration=6", "--leader-elect-renew-deadline=4",
                        "--leader-elect-retry-period=1", *extra_args))
        self._controllers.append(proc)
        return proc.start()

    def stop_controllers(self) -> None:
        for proc in self._controllers:
            proc.stop()
        if self.mao is not None:
            self.mao.stop()

    def controller_logs(self) -> str:
        ours = "\n".join(f"--- {p.log_path.name}\n{p.log_text()[-6000:]}" for p in self._controllers)
        return ours + ("\n" + self.mao.logs() if self.mao is not None else "")

    # --- Machines ---------------------------------------------------------------------------------------------
    def create_machine(self, name: str | None = None, namespace: str | None = None, **overrides: Any) -> str:
        name = name or unique_name()
        manifest = machine_manifest(self.inst, namespace or self.namespace, name, **overrides)
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        return name

    def machine(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.cluster.read(f"/apis/{keys.API_VERSION}/namespaces/{namespace or self.namespace}/machines/{name}")

    def wait_machine(self, name: str, predicate: Callable[[dict], bool], what: str, timeout: float = 60.0,
                     namespace: str | None = None, on_poll: Callable[[dict], None] | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.machine(name, namespace)
            if last is not None and on_poll:
                on_poll(last)
            if last is not None and predicate(last):
                return last
            time.sleep(0.3)
        raise AssertionError(f"machine {name} never became {what} in {timeout}s; last: "
                             f"{json.dumps((last or {}).get('status'), indent=1)}\n{self.controller_logs()}")

    def wait_phase(self, name: str, phase: str, timeout: float = 60.0, **kw) -> dict[str, Any]:
        def ok(m: dict) -> bool:
            st = m.get("status") or {}
            return st.get("phase") == phase and (phase != "Running" or bool(st.get("nodeRef")))
        return self.wait_machine(name, ok, f"phase {phase}", timeout, **kw)

    def wait_gone(self, name: str, timeout: float = 60.0, namespace: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.machine(name, namespace) is None:
                return
            time.sleep(0.3)
        raise AssertionError(f"machine {name} still exists after {timeout}s\n{self.controller_logs()}")

    # --- the engine -------------------------------------------------------------------------------------------
    def vms_named(self, name: str) -> list[dict[str, Any]]:
        return [vm for vm in self.sim.control.vms() if vm.get("name") == name]
