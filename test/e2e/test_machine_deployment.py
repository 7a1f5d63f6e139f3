"""The controller as deployed: under the ServiceAccount RBAC of config/rbac, and as two replicas that elect one
leader and fail over (docs/architecture.md#deployment-modes)."""

from __future__ import annotations

import json
import time

import yaml

from hack.ovirt_install import REPO
from machines import MACHINE_API_NS, unique_name


def test_controller_works_with_only_the_shipped_rbac(menv):
    cluster = menv.cluster
    cluster.kubectl("apply", "-k", str(REPO / "config" / "rbac"))
    user_data = yaml.safe_load((REPO / "config" / "samples" / "worker-user-data.yaml").read_text())
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(user_data))
    lease_id = f"rbac-{unique_name('lease')}"
    ctl = menv.controller(user="restricted", namespace=MACHINE_API_NS, leader_elect=True,
                          extra_args=(f"--leader-election-id={lease_id}",
                                      f"--leader-election-namespace={MACHINE_API_NS}"))
    name = menv.create_machine(unique_name(), namespace=MACHINE_API_NS)
    m = menv.wait_phase(name, "Running", timeout=120, namespace=MACHINE_API_NS)
    assert m["spec"]["providerID"].startswith("ovirt://")
    cluster.kubectl("-n", MACHINE_API_NS, "delete", "machine", name, "--wait=false")
    menv.wait_gone(name, timeout=90, namespace=MACHINE_API_NS)
    assert menv.vms_named(name) == []
    logs = ctl.log_text()
    assert "forbidden" not in logs.lower(), logs[-3000:]


def _holder(cluster, namespace: str, lease: str) -> str | None:
    r = cluster.kubectl("-n", namespace, "get", "lease", lease, "-o", "json", check=False)
    return json.loads(r.stdout)["spec"].get("holderIdentity") if r.returncode == 0 else None


def test_two_replicas_elect_one_leader_and_fail_over(menv):
    lease = "cluster-api-provider-ovirt-leader"
    args = (f"--leader-election-namespace={menv.namespace}",)
    a = menv.controller(leader_elect=True, extra_args=args)
    b = menv.controller(leader_elect=True, extra_args=args)
    deadline = time.monotonic() + 30
    while _holder(menv.cluster, menv.namespace, lease) not in (a.identity, b.identity):
        assert time.monotonic() < deadline, menv.controller_logs()
        time.sleep(0.2)
    leader_id = _holder(menv.cluster, menv.namespace, lease)
    leader, standby = (a, b) if leader_id == a.identity else (b, a)

    first = menv.create_machine(unique_name())
    menv.wait_phase(first, "Running", timeout=90)
    assert "created VM" not in standby.log_text()  # the standby reconciles nothing

    leader.kill()  # no release: the standby must wait for the lease to expire, then take over
    second = menv.create_machine(unique_name())
    menv.wait_phase(second, "Running", timeout=120)
    assert _holder(menv.cluster, menv.namespace, lease) == standby.identity
    assert "created VM" in standby.log_text()
    assert len(menv.vms_named(second)) == 1

