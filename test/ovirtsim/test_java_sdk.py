"""A third, independent client: the oVirt Java SDK (its own HTTP, TLS and XML code) lives a machine's life against
the simulator, unchanged (hack/javaclient; docs/compatibility.md#simulator)."""

from __future__ import annotations

import subprocess

import pytest

from hack.javaclient.build import build
from hack.ovirtsim.testing import running_simulator


@pytest.fixture(scope="module")
def java_client() -> list[str]:
    return build()  # Maven only on the first run of a machine (or after hack/javaclient changes)


def _steps(stdout: str) -> dict[str, list[dict[str, str]]]:
    steps: dict[str, list[dict[str, str]]] = {}
    for line in stdout.splitlines():
        if line.startswith("step "):
            name, *facts = line.split()[1:]
            steps.setdefault(name, []).append(dict(f.split("=", 1) for f in facts))
    return steps


def test_java_sdk_creates_groups_tags_starts_and_removes_a_vm(java_client, tmp_path):
    with running_simulator(tmp_path) as sim:
        sim.control.inject_fault("/vms/*/start", method="POST", status=409,
                                 detail="[Cannot run VM: VM is locked. Please try again in a few minutes.]", count=1)
        run = subprocess.run([*java_client, sim.url, sim.username, sim.password, sim.ca_file, "java-worker-0"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and run.stdout.rstrip().endswith("done"), run.stdout + run.stderr
        steps = _steps(run.stdout)
        counts = sim.control.counts()
        log = sim.log_file.read_text()

    vm_id = steps["create"][0]["vm"]
    assert steps["create"][0]["status"] == "image_locked"
    assert float(steps["affinity"][0]["priority"]) == 1.0 and steps["affinity"][0]["members"] == "1"
    assert "Cannot_run_VM:_VM_is_locked." in steps["fault"][0]["message"]
    devices = {d["name"]: d for d in steps["device"]}
    assert set(devices) == {"eth0", "lo"} and devices["eth0"]["ips"].startswith("10.88.")
    assert steps["start"][0]["status"] == "up" and steps["start"][0]["fqdn"] == "java-worker-0"
    assert steps["remove"][0]["vm"] == vm_id
    assert int(steps["survey"][0]["objects"]) >= 20  # every other type served, read by the Java readers
    # What the engine saw: one create, two starts (the first one failed), one stop, one removal; Java's own agent.
    assert (counts["POST /vms"], counts["POST /vms/{vm}/start"], counts["POST /vms/{vm}/stop"],
            counts["DELETE /vms/{vm}"]) == (1, 2, 1, 1)
    assert counts["POST /vms/{vm}/tags"] == 1 and counts["POST /clusters/{cluster}/affinitygroups/{group}/vms"] == 1
    assert "Traceback" not in log
    # The SDK read every answer without a complaint (it logs, rather than raises, what its model cannot read).
    assert [line for line in run.stderr.splitlines() if " ERROR " in line or " WARN " in line] == []
