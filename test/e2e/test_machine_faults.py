"""Bad input fails clearly and creates nothing; transient oVirt faults never fail a Machine; a missing oVirt
object is reported and re-checked until it appears (docs/compatibility.md#machine-phases)."""

from __future__ import annotations

import json

import ovirtsdk4.types as types
import pytest

from machines import unique_name

INVALID = {
    "missing_os_disk": ({"os_disk": None}, "spec.providerSpec.value.os_disk: Required value"),
    "unknown_type": ({"type": "gaming"}, 'spec.providerSpec.value.type: Unsupported value: "gaming"'),
    "instance_type_with_cpu": ({"instance_type_id": "it-1"}, "spec.providerSpec.value.cpu: Forbidden"),
    "bad_hugepages": ({"hugepages": 1234}, "spec.providerSpec.value.hugepages: Unsupported value: 1234"),
    "guaranteed_over_memory": ({"guaranteed_memory_mb": 99999},
                               "spec.providerSpec.value.guaranteed_memory_mb: Invalid value: 99999"),
    "zero_sockets": ({"cpu": {"sockets": 0, "cores": 4, "threads": 1}},
                     "spec.providerSpec.value.cpu.sockets: Invalid value: 0"),
    # Values no oVirt engine can satisfy: before, the VM was created and stayed down with nothing reported.
    "memory_beyond_any_engine": ({"memory_mb": 1000000000000000},
                                 "spec.providerSpec.value.memory_mb: Invalid value: 1000000000000000: must be at most"),
    "cores_beyond_the_engine": ({"cpu": {"sockets": 1, "cores": 300, "threads": 1}},
                                "spec.providerSpec.value.cpu.cores: Invalid value: 300: must be at most 254"),
}


def test_each_invalid_spec_fails_with_a_precise_message_and_no_vm(menv):
    menv.controller()
    names = {case: menv.create_machine(unique_name("bad"), **overrides)
             for case, (overrides, _) in INVALID.items()}
    for case, name in names.items():
        m = menv.wait_phase(name, "Failed", timeout=60)
        st = m["status"]
        assert st["errorReason"] == "InvalidConfiguration", case
        assert INVALID[case][1] in st["errorMessage"], (case, st["errorMessage"])
        assert m["metadata"]["annotations"]["machine.openshift.io/instance-state"] == "Unknown"
        assert menv.vms_named(name) == [], case
    events = menv.cluster.kubectl("-n", menv.namespace, "get", "events", "-o", "json").stdout
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in json.loads(events)["items"]}
    assert all((name, "FailedCreate") in reasons for name in names.values())


def _phases_seen(menv, name):
    seen: list[str] = []

    def record(m):
        phase = (m.get("status") or {}).get("phase")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
    return seen, record


@pytest.mark.parametrize("fault", ["engine_errors", "locked_vm", "dropped_connections", "token_expiry"])
def test_transient_faults_end_running_and_never_failed(menv, fault):
    control = menv.sim.control
    if fault == "engine_errors":
        control.inject_fault("/vms", method="POST", status=500, count=2)
        control.inject_fault("/templates", method="GET", status=503, reason="Service Unavailable", count=2)
    elif fault == "locked_vm":
        control.inject_fault("/vms/*/start", method="POST", status=409,
                             detail="[Cannot run VM: VM is locked. Please try again in a few minutes.]", count=3)
    elif fault == "dropped_connections":
        # A read a Machine's creation makes (the list of its cluster's VMs), and a write: the add to its affinity
        # group, sent again (adding a member twice is idempotent, test/unit/ovirt/test_fewer_requests.py).
        control.drop_connection("/vms", method="GET", count=3)
        control.drop_connection("/clusters/*/affinitygroups/*/vms", method="POST", count=1)
    menv.controller()
    name = menv.create_machine(unique_name())
    seen, record = _phases_seen(menv, name)
    if fault == "token_expiry":
        menv.wait_machine(name, lambda m: "VmId" in m["metadata"].get("annotations", {}), "created", on_poll=record)
        assert control.expire_tokens() >= 1
    m = menv.wait_phase(name, "Running", timeout=120, on_poll=record)
    assert "Failed" not in seen, seen
    assert not m["status"].get("errorReason")
    assert len(menv.vms_named(name)) == 1
    if fault != "token_expiry":
        # Every injected fault was really met by the controller, each as many times as it was armed for.
        rules = control.faults()
        assert rules and all(r["count"] == 0 and r["fired"] >= 1 for r in rules), rules


def test_missing_affinity_group_is_reported_then_resolved_when_created(menv):
    menv.controller()
    group = f"{menv.inst.infra_id}-late-{unique_name('g')}"
    name = menv.create_machine(unique_name(), affinity_groups_names=[group])

    def reported(m):
        return any(c["type"] == "InstanceExists" and c["status"] == "False" and group in c.get("message", "")
                   for c in (m.get("status") or {}).get("conditions", []))
    m = menv.wait_machine(name, reported, "reporting the missing affinity group", timeout=60)
    assert m["status"]["phase"] == "Provisioning"
    assert menv.vms_named(name) == []  # nothing is created before every dependency exists
    events = json.loads(menv.cluster.kubectl("-n", menv.namespace, "get", "events", "--field-selector",
                                             f"involvedObject.name={name}", "-o", "json").stdout)["items"]
    assert any(e["type"] == "Warning" and group in e["message"] for e in events)

    conn = menv.sim.connection()
    try:
        conn.system_service().clusters_service().cluster_service(menv.inst.cluster_id).affinity_groups_service() \
            .add(types.AffinityGroup(name=group, positive=False, enforcing=False))
    finally:
        conn.close()
    menv.wait_phase(name, "Running", timeout=90)
    assert len(menv.vms_named(name)) == 1
