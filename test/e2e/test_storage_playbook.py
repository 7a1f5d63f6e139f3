"""config/storage/ansible/deploy.yml, run with ansible-playbook against the local control plane, twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def run_playbook(cluster, tmp_path, openshift: bool) -> str:
    exe = Path(sys.executable).parent / "ansible-playbook"
    if not exe.exists():
        pytest.fail("ansible-playbook is missing: install the test extra")
    extra = {"kubeconfig": str(cluster.kubeconfig), "kubectl": str(cluster.kubectl_path), "openshift": openshift,
             "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_RETRY_FILES_ENABLED="0")
    r = subprocess.run([str(exe), "-i", "localhost,", "-c", "local", str(REPO / "config/storage/ansible/deploy.yml"),
                        "-e", json.dumps(extra)], capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-2000:]
    return r.stdout


def test_playbook_deploys_and_is_idempotent(cluster, tmp_path):
    first = run_playbook(cluster, tmp_path, openshift=True)
    assert re.search(r"changed=[1-9]", first)
    for kind, name in (("deployment", "ovirt-volume-provisioner"), ("daemonset", "ovirt-flexvolume-driver"),
                       ("clusterrole", "ovirt-volume-provisioner"), ("serviceaccount", "ovirt-flexvolume-driver")):
        cluster.kubectl("get", kind, name, "-n", "openshift-machine-api")
    ds = json.loads(cluster.kubectl("get", "daemonset", "ovirt-flexvolume-driver", "-n", "openshift-machine-api",
                                    "-o", "json").stdout)
    assert ds["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] == \
        "/etc/kubernetes/kubelet-plugins/volume/exec"
    cluster.kubectl("get", "storageclass", "ovirt")
    second = run_playbook(cluster, tmp_path, openshift=True)
    assert "changed=0" in second and "failed=0" in second
    cluster.kubectl("delete", "-k", str(REPO / "config/storage"), "--ignore-not-found", "--wait=false", check=False)
    cluster.kubectl("delete", "storageclass", "ovirt", "--ignore-not-found", check=False)
