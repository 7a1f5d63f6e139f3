"""The Ansible `ovirt.ovirt` collection (bundled in PyPI's `ansible`) runs a VM lifecycle playbook against the
simulator: a second, independent pattern of client use (quoted searches, follow_link, its own waits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOK = Path(__file__).parent / "ansible" / "vm_lifecycle.yml"


def _ansible_playbook() -> Path:
    path = Path(sys.executable).parent / "ansible-playbook"
    if not path.exists():
        pytest.fail("ansible-playbook is missing: install the test extra (`make venv`)")
    return path


def test_ovirt_ovirt_playbook_creates_and_removes_a_vm(sim, tmp_path):
    extra = {"ovirt_url": sim.url, "ovirt_username": sim.username, "ovirt_password": sim.password,
             "ovirt_ca_file": sim.ca_file, "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_HOME=str(tmp_path / "ansible-home"),
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_STDOUT_CALLBACK="default")
    result = subprocess.run(
        [str(_ansible_playbook()), "-i", "localhost,", "-c", "local", str(PLAYBOOK), "-e", json.dumps(extra)],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "failed=0" in result.stdout
    counts = sim.control.counts()
    assert counts["POST /vms"] == 1 and counts["DELETE /vms/{vm}"] == 1
    assert counts["POST /vms/{vm}/start"] == 1
    assert sim.control.vms() == []
