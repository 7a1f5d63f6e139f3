"""Engine restarts keep state; counters are exact; TLS with a CA file and insecure; the raw wire format."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request

import ovirtsdk4 as sdk
import pytest
from ovirtsdk4 import types

from hack.ovirtsim.testing import running_simulator

from .helpers import create_down_vm, default_cluster, start_up_vm, vm_service, wait_for, wait_status


def _snapshot(conn):
    system = conn.system_service()
    cluster = default_cluster(conn)
    groups = system.clusters_service().cluster_service(cluster.id).affinity_groups_service()
    return {
        "vms": sorted((v.id, v.name, v.status.value) for v in system.vms_service().list()),
        "disks": sorted((d.id, d.status.value, d.provisioned_size) for d in system.disks_service().list()),
        "groups": sorted((g.name, tuple(sorted(m.id for m in g.vms or []))) for g in groups.list()),
        "nics": sorted((n.mac.address for v in system.vms_service().list()
                        for n in vm_service(conn, v.id).nics_service().list())),
    }


def _populate(conn):
    down = create_down_vm(conn, "keep-down")
    up = start_up_vm(conn, "keep-up")
    cluster = default_cluster(conn)
    groups = conn.system_service().clusters_service().cluster_service(cluster.id).affinity_groups_service()
    group = groups.add(types.AffinityGroup(name="kept", vms_rule=types.AffinityRule(enforcing=True)))
    groups.group_service(group.id).vms_service().add(types.Vm(id=down.id))
    groups.group_service(group.id).vms_service().add(types.Vm(id=up.id))
    return down, up


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_restart_keeps_every_vm_disk_and_group(tmp_path, kill):
    with running_simulator(tmp_path) as sim:
        conn = sim.connection()
        down, up = _populate(conn)
        before = _snapshot(conn)
        if kill:  # only what the periodic save (every 0.5 s while dirty) wrote survives a crash: wait for it
            wait_for(lambda: up.id in json.loads(sim.state_file.read_text())["tables"]["affinity_groups"],
                     timeout=5)
        created = sim.control.counts()["POST /vms"]
        sim.restart(kill=kill)
        # The SDK's token died with the engine: the next call gets 401, logs in again and goes on.
        after = _snapshot(conn)
        assert after == before
        assert sim.control.counts()["POST /vms"] == created == 2  # the counters ride along in the state file
        # The running VM is still running and reports its IPs; the down one can be started.
        assert vm_service(conn, up.id).get().status == types.VmStatus.UP
        assert wait_for(lambda: vm_service(conn, up.id).reported_devices_service().list())
        vm_service(conn, down.id).start()
        wait_status(conn, down.id, types.VmStatus.UP)
        conn.close()


def test_restart_mid_transition_completes_it(tmp_path):
    # The copy outlasts a restart even on a loaded machine (a restart is two process spawns).
    with running_simulator(tmp_path, timings={"vm_create": 8.0}) as sim:
        conn = sim.connection()
        vm = conn.system_service().vms_service().add(types.Vm(
            name="midway", cluster=types.Cluster(name="Default"), template=types.Template(name="rhcos")))
        sim.restart()
        assert vm_service(conn, vm.id).get().status == types.VmStatus.IMAGE_LOCKED
        wait_status(conn, vm.id, types.VmStatus.DOWN, timeout=20)
        conn.close()


def test_in_process_engine_restart_reloads_state_and_drops_tokens(sim, conn):
    vm = create_down_vm(conn, "inproc")
    sim.control.restart_engine()
    assert vm_service(conn, vm.id).get().name == "inproc"
    assert sim.control.counts()["POST /sso/oauth/token"] == 2


def test_request_counters_are_exact(sim, conn):
    sim.control.reset_counts()
    vms = conn.system_service().vms_service()
    for _ in range(7):
        vms.list()
    vm = create_down_vm(conn, "counted")
    svc = vm_service(conn, vm.id)
    for _ in range(3):
        svc.get()
    counts = sim.control.counts()
    assert counts["GET /vms"] == 7
    assert counts["POST /vms"] == 1
    assert counts["GET /templates"] == 1 and counts["GET /clusters"] == 1
    # wait_status polled an unknown number of times; the three explicit gets are on top of those.
    polled = counts["GET /vms/{vm}"]
    svc.get()
    assert sim.control.counts()["GET /vms/{vm}"] == polled + 1
    assert counts["POST /sso/oauth/token"] == 1  # the SDK logs in lazily, at its first call


def test_tls_ca_file_verification_and_insecure(sim):
    assert sim.url.startswith("https://") and sim.ca_file
    good = sim.connection()
    assert good.test(raise_exception=True)
    good.close()
    insecure = sim.connection(ca_file=None, insecure=True)
    assert insecure.test(raise_exception=True)
    insecure.close()
    untrusted = sim.connection(ca_file=None)  # system roots do not know the simulator's CA
    with pytest.raises(sdk.Error):
        untrusted.test(raise_exception=True)


def test_wire_format_of_errors_and_hrefs(sim):
    """What non-SDK clients see: bare `<fault>` for add, `<action><fault>` for actions, empty 404, links."""
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    auth = "Basic " + __import__("base64").b64encode(f"{sim.username}:{sim.password}".encode()).decode()

    def call(method, path, body=None):
        req = urllib.request.Request(sim.url + path, data=body, method=method,
                                     headers={"Authorization": auth, "Content-Type": "application/xml"})
        try:
            with urllib.request.urlopen(req, context=ctx) as resp:
                return resp.status, resp.headers, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.headers, err.read().decode()

    status, _, body = call("POST", "/vms", b"<vm><name>x</name></vm>")
    assert status == 400 and body.split("?>", 1)[1].lstrip().startswith("<fault>")
    status, _, body = call("POST", "/vms/6a4f0000-0000-4000-8000-000000000000/start", b"<action/>")
    assert status == 400 and "<action>" in body and "<status>failed</status>" in body
    status, _, body = call("GET", "/vms/6a4f0000-0000-4000-8000-000000000000")
    assert status == 404 and body == ""
    status, headers, body = call("GET", "/templates?search=name%3Drhcos")
    assert status == 200 and headers["Content-Type"].startswith("application/xml")
    assert 'rel="diskattachments"' in body and 'href="/ovirt-engine/api/templates/' in body
    assert headers["Correlation-Id"]
    status, _, body = call("DELETE", "/tags/00000000-0000-0000-0000-000000000000")
    assert status == 400
    req = urllib.request.Request(sim.url + "/vms", headers={"Authorization": "Bearer nope"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, context=ctx)
    assert info.value.code == 401


def test_control_api_reports_vms(sim, conn):
    vm = start_up_vm(conn, "observed")
    wait_for(lambda: sim.control.vm(vm.id)["ips"])
    info = sim.control.vm(vm.id)
    assert info["status"] == "up" and info["host"].startswith("host") and info["init_mode"] == "ignition"
    assert info["ignition_valid"] is True and info["provisioned"] is True
    assert [v["name"] for v in sim.control.vms()] == ["observed"]
    assert json.loads(json.dumps(sim.control.health()))["ok"] is True


def test_huge_ignition_payload_goes_through_expect_100_continue(sim, conn):
    """libcurl sends `Expect: 100-continue` for bodies over 1 MiB (docs/compatibility.md#simulator): a big Ignition
    config."""
    big = json.dumps({"ignition": {"version": "3.2.0"},
                      "storage": {"files": [{"path": f"/etc/f{i}", "contents": {"source": "data:," + "x" * 1000}}
                                            for i in range(1500)]}})
    assert len(big) > 1.2 * 2**20
    vm = conn.system_service().vms_service().add(types.Vm(
        name="bigign", cluster=types.Cluster(name="Default"), template=types.Template(name="rhcos"),
        initialization=types.Initialization(custom_script=big, host_name="bigign")))
    assert vm_service(conn, vm.id).get().initialization.custom_script == big
    assert "100-continue for POST /ovirt-engine/api/vms" in sim.log_file.read_text()


def test_starts_and_reports_its_start_time(tmp_path):
    """The start time a benchmark reads (hack/bench/sim_throughput.py, docs/benchmarks.md): reported, and healthy
    once started. How long it takes is the benchmark's to say, never a timed test's."""
    with running_simulator(tmp_path) as sim:
        assert sim.control.health()["ok"]
        assert sim.startup_seconds > 0


def test_logout_revokes_the_token(sim):
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    sso = sim.url.replace("/ovirt-engine/api", "/ovirt-engine/sso/oauth/token")
    form = urllib.parse.urlencode({"grant_type": "password", "scope": "ovirt-app-api",
                                   "username": sim.username, "password": sim.password}).encode()
    with urllib.request.urlopen(urllib.request.Request(sso, data=form), context=ctx) as resp:
        token = json.loads(resp.read())["access_token"]
    conn = sim.connection(username=None, password=None, token=token)
    assert conn.system_service().get().product_info is not None
    conn.close()  # logs out: POST /ovirt-engine/services/sso-logout with the token
    assert sim.control.counts()["POST /services/sso-logout"] == 1
    req = urllib.request.Request(sim.url, headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, context=ctx)
    assert info.value.code == 401


def test_realtime_profile_and_timing_overrides(tmp_path):
    with running_simulator(tmp_path, profile="realtime", timings={"vm_create": 0.5}) as sim:
        timings = sim.control.timings()
        assert timings["powering_up"] == 45.0 and timings["vm_create"] == 0.5
        assert sim.control.set_timings(powering_up=1.0)["powering_up"] == 1.0
