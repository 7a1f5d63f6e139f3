"""Bad input and races found by trying the controller as a new user would: each ends with a clear report and
loses nothing (docs/compatibility.md#machine-phases). Real API server, simulator and controller process."""

from __future__ import annotations

import json
import time

import ovirtsdk4 as sdk
import pytest
import yaml

from machine_controller.runtime.testing import wait_until
from machines import machine_manifest, unique_name

GIB = 1024 ** 3


def _events(menv, name: str) -> list[dict]:
    out = menv.cluster.kubectl("-n", menv.namespace, "get", "events", "--field-selector",
                               f"involvedObject.name={name}", "-o", "json").stdout
    return json.loads(out)["items"]


def _condition(machine: dict, ctype: str) -> dict | None:
    return next((c for c in (machine.get("status") or {}).get("conditions", []) if c["type"] == ctype), None)


@pytest.mark.parametrize("provider_spec", [None, {}], ids=["no_providerSpec", "empty_providerSpec"])
def test_machine_without_provider_spec_value_fails_naming_the_field(menv, provider_spec):
    menv.controller()
    name = unique_name("nospec")
    manifest = machine_manifest(menv.inst, menv.namespace, name)
    if provider_spec is None:
        del manifest["spec"]["providerSpec"]
    else:
        manifest["spec"]["providerSpec"] = provider_spec
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))

    m = menv.wait_phase(name, "Failed", timeout=60)
    assert m["status"]["errorReason"] == "InvalidConfiguration"
    assert "spec.providerSpec.value: Required value" in m["status"]["errorMessage"]
    assert menv.vms_named(name) == []
    assert any(e["type"] == "Warning" and e["reason"] == "FailedValidate" for e in _events(menv, name))


def test_os_disk_smaller_than_the_template_is_refused_before_any_vm(menv):
    """oVirt grows a disk but never shrinks it: a smaller OS disk can never be had, so it is invalid."""
    menv.controller()
    name = menv.create_machine(unique_name("small"), os_disk={"size_gb": 10})  # the template's disk is 16 GiB

    m = menv.wait_phase(name, "Failed", timeout=60)
    assert m["status"]["errorReason"] == "InvalidConfiguration"
    assert "spec.providerSpec.value.os_disk.size_gb: Invalid value: 10" in m["status"]["errorMessage"]
    assert "16 GiB" in m["status"]["errorMessage"]
    assert menv.vms_named(name) == []


@pytest.mark.parametrize("case", ["name_over_64", "memory_over_the_cluster_level"])
def test_what_the_engine_would_refuse_at_add_fails_before_any_vm(menv, case):
    """A 400 at add would be retried forever; the controller knows these limits
    (docs/compatibility.md#engine-limits)."""
    menv.controller()
    if case == "name_over_64":
        name = menv.create_machine(unique_name("w" * 58))  # 65 characters
        expected = "metadata.name: Invalid value"
    else:
        name = menv.create_machine(unique_name("huge"), memory_mb=5 * 1024 * 1024)  # 5 TiB; the 4.7 cluster: 4 TiB
        expected = "spec.providerSpec.value.memory_mb: Invalid value: 5242880: must be at most 4194304"

    m = menv.wait_phase(name, "Failed", timeout=60)
    assert m["status"]["errorReason"] == "InvalidConfiguration"
    assert expected in m["status"]["errorMessage"]
    assert menv.vms_named(name) == []


def test_engine_refusing_to_start_is_reported_and_retried_until_a_host_fits(menv):
    """A VM no host can run (more memory than any host has, yet valid for the engine) exists but cannot start:
    the Machine says so with the engine's words and keeps trying; it is never Failed. Once a host that fits joins
    the cluster, the same VM starts and the Machine runs."""
    control = menv.sim.control
    menv.controller()
    before = control.counts().get("POST /vms/{vm}/start", 0)
    name = menv.create_machine(unique_name("big"), memory_mb=512 * 1024)  # every seeded host has 128 GiB

    def refused(m: dict) -> bool:
        c = _condition(m, "InstanceRunning")
        return bool(c) and c["status"] == "False" and c["reason"] == "StartRefused"
    phases: list[str] = []
    m = menv.wait_machine(name, refused, "reporting the refused start", timeout=90,
                          on_poll=lambda m: phases.append((m.get("status") or {}).get("phase")))
    message = _condition(m, "InstanceRunning")["message"]
    assert "scheduling constraints" in message, message
    assert m["status"]["phase"] == "Provisioning" and not m["status"].get("errorReason")
    assert [e for e in _events(menv, name) if e["type"] == "Warning" and e["reason"] == "FailedStart"]
    vms = menv.vms_named(name)
    assert len(vms) == 1 and vms[0]["status"] == "down"

    # Retried with backoff: more start attempts come, the Machine stays Provisioning.
    menv.wait_machine(name, lambda _m: control.counts().get("POST /vms/{vm}/start", 0) - before >= 3,
                      "retrying the start", timeout=60,
                      on_poll=lambda m: phases.append((m.get("status") or {}).get("phase")))
    assert "Failed" not in phases

    control.add_host(f"big-host-{name}", memory=1024 * GIB, cores=64)
    m = menv.wait_phase(name, "Running", timeout=120)
    assert _condition(m, "InstanceRunning")["status"] == "True"
    assert len(menv.vms_named(name)) == 1
    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
    menv.wait_gone(name, timeout=90)


def test_machine_gone_while_its_reconcile_is_in_flight_ends_quietly(menv):
    """The Machine disappears (deleted, its finalizer removed by hand) while a reconcile waits on the engine to
    create its VM: the write that follows meets 404, and that ends the reconcile without an error or a retry."""
    control = menv.sim.control
    proc = menv.controller()
    control.delay("/vms", 4.0, method="POST", count=1)  # the VM create answers after 4 s
    name = menv.create_machine(unique_name("gone"))
    key = f"{menv.namespace}/{name}"
    assert wait_until(lambda: control.faults()[0]["fired"] >= 1, timeout=60, interval=0.2), "no VM create came"

    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
    menv.cluster.kubectl("-n", menv.namespace, "patch", "machine", name, "--type=merge",
                         "-p", '{"metadata":{"finalizers":null}}')
    menv.wait_gone(name, timeout=30)

    def lines() -> list[str]:
        return [line for line in proc.log_text().splitlines() if f'"{key}"' in line]
    assert wait_until(lambda: any("object deleted during the reconcile" in line for line in lines()), timeout=30,
                      interval=0.2), "the in-flight reconcile did not end quietly:\n" + "\n".join(lines()[-20:])
    assert [line for line in lines() if "reconcile failed" in line] == []

    # Removing a finalizer by hand leaves the VM to its user; the test removes it once its disks are copied.
    conn = menv.sim.connection()
    try:
        vms = conn.system_service().vms_service()

        def removed() -> bool:
            try:
                for vm in vms.list(search=f"name={name}"):
                    vms.vm_service(vm.id).remove()
                return True
            except sdk.Error:
                return False  # still locked
        assert wait_until(removed, timeout=60, interval=0.5)
    finally:
        conn.close()


def _cluster_requests(menv) -> int:
    return sum(n for k, n in menv.sim.control.counts().items() if "/clusters/" in k)


@pytest.mark.parametrize("cluster_id", ["5f4c6a1e-8d3b-4f2a-9c7e 1b2d3e4f5a6b", "Default"], ids=["space", "a_name"])
def test_an_id_that_is_no_uuid_fails_naming_the_field_sends_nothing_and_the_machine_is_deleted(menv, cluster_id):
    """An id goes into the engine's URL paths: one that is no UUID (a space, a cluster's name) was sent, the engine
    (or curl) refused the path, and the controller retried for ever, without an event, even to delete the Machine.
    Now it is refused where it enters: the Machine fails naming the field, nothing is created, nothing carrying
    the id reaches the engine, and its deletion (which needs nothing of the spec) ends at once
    (docs/architecture.md#acting-only-on-what-is-ours)."""
    menv.controller()
    before = _cluster_requests(menv)
    name = menv.create_machine(unique_name("badid"), cluster_id=cluster_id)

    m = menv.wait_phase(name, "Failed", timeout=60)
    assert m["status"]["errorReason"] == "InvalidConfiguration"
    assert (f'spec.providerSpec.value.cluster_id: Invalid value: "{cluster_id}": must be an oVirt ID'
            in m["status"]["errorMessage"]), m["status"]["errorMessage"]
    assert any(e["type"] == "Warning" and "spec.providerSpec.value.cluster_id" in e["message"]
               for e in _events(menv, name))
    assert menv.vms_named(name) == []

    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
    menv.wait_gone(name, timeout=30)
    assert menv.vms_named(name) == []
    assert _cluster_requests(menv) == before, "a request for a cluster was sent"


def test_deletion_waits_while_the_engine_cannot_answer_says_why_and_ends_once_it_does(menv):
    """A Machine whose spec became invalid after its VM was created (the VM is made here under its name, as a
    create sent before the edit would have made it): its deletion looks for the VM by the Machine's name, which
    needs nothing of the spec. While the engine cannot answer, nothing is removed on a guess: the Machine says why
    it waits (a FailedDelete Warning, InstanceExists=Unknown with the engine's words) and keeps asking with
    backoff; once the engine answers, its VM is removed and the finalizer goes."""
    control = menv.sim.control
    menv.controller()
    name = menv.create_machine(unique_name("waits"), cluster_id="Default")
    menv.wait_phase(name, "Failed", timeout=60)
    conn = menv.sim.connection()
    try:
        vms = conn.system_service().vms_service()
        vms.add(sdk.types.Vm(name=name, cluster=sdk.types.Cluster(id=menv.inst.cluster_id),
                             template=sdk.types.Template(name=menv.inst.template_name)))
    finally:
        conn.close()
    assert wait_until(lambda: [v["status"] for v in menv.vms_named(name)] == ["down"], timeout=60, interval=0.5)

    control.inject_fault("/vms*", status=503, reason="Service Unavailable", detail="the engine is starting",
                         count=None)
    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")

    def told(m: dict) -> bool:
        c = _condition(m, "InstanceExists")
        return bool(c) and c["status"] == "Unknown" and c["reason"] == "ErrorCheckingProvider" \
            and "503" in c["message"] and "deletion waits" in c["message"]
    menv.wait_machine(name, told, "telling why its deletion waits", timeout=60)
    assert wait_until(lambda: any(e["type"] == "Warning" and e["reason"] == "FailedDelete" and "503" in e["message"]
                                  for e in _events(menv, name)), timeout=30, interval=0.5)
    time.sleep(5)  # it keeps asking, and removes nothing meanwhile
    assert menv.machine(name) is not None and len(menv.vms_named(name)) == 1
    asked = control.faults()[0]["fired"]
    assert asked >= 2, asked

    control.clear_faults()
    menv.wait_gone(name, timeout=60)
    assert menv.vms_named(name) == []
