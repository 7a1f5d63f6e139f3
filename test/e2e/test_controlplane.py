"""The local control plane is a real Kubernetes: version-stamped binaries, RBAC enforced for the restricted
identity, controllers running, and a clean stop."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hack.controlplane.build import KUBE_VERSION
from hack.controlplane.cluster import LocalControlPlane, _alive

local_only = pytest.mark.skipif(bool(os.environ.get("KUBECONFIG")), reason="checks the local control plane itself")


def test_kubectl_and_server_report_the_pinned_release(cluster):
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert version["clientVersion"]["gitVersion"] == KUBE_VERSION
    if not os.environ.get("KUBECONFIG"):
        assert version["serverVersion"]["gitVersion"] == KUBE_VERSION


def test_restricted_identity_has_only_what_rbac_grants(cluster, namespace):
    who = json.loads(cluster.kubectl("auth", "whoami", "-o", "json", user="restricted").stdout)
    assert who["status"]["userInfo"]["username"] == cluster.RESTRICTED_USER
    denied = cluster.kubectl("-n", namespace, "get", "secrets", user="restricted", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    cluster.kubectl("-n", namespace, "create", "role", "read-secrets", "--verb=list", "--resource=secrets")
    cluster.kubectl("-n", namespace, "create", "rolebinding", "read-secrets", "--role=read-secrets",
                    "--serviceaccount=openshift-machine-api:machine-api-controllers")
    allowed = cluster.kubectl("-n", namespace, "auth", "can-i", "list", "secrets", user="restricted", check=False)
    assert allowed.stdout.strip() == "yes"


def test_controller_manager_runs_its_controllers(cluster, namespace):
    # The serviceaccount controller of kube-controller-manager creates `default` in every new namespace. A wait on a
    # condition fails at once while the object is not there yet: wait for its creation.
    cluster.kubectl("-n", namespace, "wait", "--for=create", "serviceaccount/default", "--timeout=60s")


@local_only
def test_down_stops_every_process_and_removes_its_directory(tmp_path: Path):
    plane = LocalControlPlane(tmp_path / "plane")
    state = plane.up()
    pids = dict(state.pids)
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
    assert all(_alive(p) for p in pids.values())
    etcd_data = Path(state.etcd_data)
    plane.down()
    assert not any(_alive(p) for p in pids.values()), pids
    assert not (tmp_path / "plane").exists()
    assert not etcd_data.exists()
