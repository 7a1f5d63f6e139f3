"""The FlexVolume driver run as kubelet runs it: a subprocess, kubelet's argv, one JSON reply, nothing on stderr.

The engine is the oVirt simulator. The Node lookup is served by a small HTTP server answering GET
/api/v1/nodes/<name> with a Node object (the e2e test uses the real API server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import ovirtsdk4.types as types
import pytest

from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.storage.disks import GIB, DiskRequest, Disks

ROOT = Path(__file__).resolve().parents[3]


def run_driver(*argv: str, env: dict | None = None) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "machine_controller.storage.flexvolume", *argv],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=60)
    assert proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)  # exactly one JSON object, nothing else
    assert out["status"] in ("Success", "Failure", "Not supported")
    assert proc.returncode == (0 if out["status"] == "Success" else 1)
    if out["status"] == "Failure":
        assert out.get("message"), out
    return proc.returncode, out


def test_init_reports_attach_capability():
    rc, out = run_driver("init")
    assert rc == 0 and out["capabilities"]["attach"] is True


@pytest.mark.parametrize("cmd", ["mount", "unmount", "expandvolume", "expandfs", "bogus"])
def test_other_commands_not_supported(cmd):
    rc, out = run_driver(cmd, "{}")
    assert rc == 1 and out["status"] == "Not supported"


def test_getvolumename():
    _, out = run_driver("getvolumename", json.dumps({"kubernetes.io/pvOrVolumeName": "pvc-1", "volumeID": "d"}))
    assert out == {"status": "Success", "volumeName": "pvc-1"}


@pytest.mark.parametrize("argv", [
    ("attach", "not json", "node1"), ("isattached", "{}", "node1"), ("detach", "pvc-1"),
    ("waitforattach", "/dev/x"), ("mountdevice", "/tmp/m", "/dev/x", json.dumps({"kubernetes.io/fsType": "nfs"})),
    ("unmountdevice",), ("getvolumename", "[]"),
])
def test_failures_are_json_with_a_message(argv, tmp_path):
    rc, out = run_driver(*argv, env={"OVIRT_FLEXDRIVER_CONF": str(tmp_path / "missing.json")})
    assert rc == 1 and out["status"] == "Failure"


def test_missing_conf_is_named(tmp_path):
    conf = tmp_path / "missing.json"
    _, out = run_driver("attach", json.dumps({"volumeID": "8d5b3b2a-1c4e-4f7a-9d2b-0123456789ab"}), "node1",
                        env={"OVIRT_FLEXDRIVER_CONF": str(conf)})
    assert str(conf) in out["message"]


@pytest.mark.parametrize("serial", ["full", "short"])
@pytest.mark.parametrize("link", ["scsi-0QEMU_QEMU_HARDDISK_", "virtio-"])
def test_waitforattach_finds_both_serial_forms(tmp_path, serial, link):
    disk_id = "8d5b3b2a-1c4e-4f7a-9d2b-0123456789ab"
    byid = tmp_path / "by-id"
    byid.mkdir()
    target = tmp_path / "sdb"
    target.write_text("")
    (byid / (link + (disk_id if serial == "full" else disk_id[:20]))).symlink_to(target)
    rc, out = run_driver("waitforattach", "", json.dumps({"volumeID": disk_id}),
                         env={"OVIRT_FLEXDRIVER_BY_ID_DIR": str(byid)})
    assert rc == 0 and out["device"] == str(target)


def test_waitforattach_gives_up_with_the_names_it_looked_for(tmp_path):
    disk_id = "8d5b3b2a-1c4e-4f7a-9d2b-0123456789ab"
    _, out = run_driver("waitforattach", "", json.dumps({"volumeID": disk_id}),
                        env={"OVIRT_FLEXDRIVER_BY_ID_DIR": str(tmp_path), "OVIRT_FLEXDRIVER_WAIT_S": "0.5"})
    assert out["status"] == "Failure" and f"scsi-0QEMU_QEMU_HARDDISK_{disk_id}" in out["message"]


def create_down_vm(conn, name: str) -> types.Vm:
    s = conn.system_service()
    tpl = s.templates_service().list(search='name="rhcos"')[0]
    cluster = s.clusters_service().list(search="name=Default")[0]
    vm = s.vms_service().add(types.Vm(name=name, cluster=types.Cluster(id=cluster.id),
                                      template=types.Template(id=tpl.id), memory=2 * GIB), clone=True)
    svc = s.vms_service().vm_service(vm.id)
    for _ in range(200):
        vm = svc.get()
        if vm.status == types.VmStatus.DOWN:
            return vm
        time.sleep(0.05)
    raise AssertionError(f"VM {name} not down: {vm.status}")


class _Nodes(BaseHTTPRequestHandler):
    nodes: dict = {}

    def do_GET(self):
        name = self.path.rsplit("/", 1)[-1]
        node = self.nodes.get(name)
        body = json.dumps(node or {"kind": "Status", "code": 404}).encode()
        self.send_response(200 if node else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def engine(tmp_path):
    with running_simulator(tmp_path) as sim:
        conn = sim.connection()
        vm = create_down_vm(conn, "node-a")  # a Node's VM bears the Node's name
        conn.close()
        pool = ConnectionPool(size=1)
        pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                              ca_file=sim.ca_file))
        disks = Disks(OvirtClient(pool))
        sd = disks.storage_domain("nfs-data")
        disk = disks.create(DiskRequest(name="pvc-flex", size_bytes=1 * GIB, storage_domain=sd.name))
        disks.wait_ok(disk.id, timeout_s=30, interval_s=0.2)
        _Nodes.nodes = {"node-a": {"spec": {"providerID": f"ovirt://{vm.id}"}}, "node-b": {"spec": {}},
                        # A providerID copied from node-a: names node-a's VM, which is not node-c's.
                        "node-c": {"spec": {"providerID": f"ovirt://{vm.id}"}}}
        server = HTTPServer(("127.0.0.1", 0), _Nodes)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        token = tmp_path / "token"
        token.write_text("t")
        conf = tmp_path / "conf.json"
        conf.write_text(json.dumps({
            "ovirt_url": sim.url, "ovirt_username": sim.username, "ovirt_password": sim.password,
            "ovirt_insecure": "false", "ovirt_cafile": sim.ca_file,
            "kube_server": f"http://127.0.0.1:{server.server_port}", "kube_token_file": str(token)}))
        yield {"env": {"OVIRT_FLEXDRIVER_CONF": str(conf)}, "disk": disk.id, "vm": vm.id, "disks": disks}
        server.shutdown()
        pool.close()


def test_attach_isattached_both_orders_detach_idempotent(engine):
    env, disk_id, vm_id, disks = engine["env"], engine["disk"], engine["vm"], engine["disks"]
    opts = json.dumps({"volumeID": disk_id, "kubernetes.io/pvOrVolumeName": "pvc-flex",
                       "kubernetes.io/readwrite": "rw", "kubernetes.io/fsType": "ext4"})
    _, out = run_driver("isattached", opts, "node-a", env=env)
    assert out == {"status": "Success", "attached": False}
    _, out = run_driver("attach", opts, "node-a", env=env)
    assert out["status"] == "Success" and disk_id in out["device"]
    assert disks.attachment(vm_id, disk_id) is not None
    _, again = run_driver("attach", opts, "node-a", env=env)  # idempotent
    assert again["status"] == "Success"
    assert len([a for a in disks.client.call("l", lambda s: s.vms_service().vm_service(vm_id)
                                             .disk_attachments_service().list()) if a.id == disk_id]) == 1
    for argv in (("isattached", opts, "node-a"), ("isattached", "node-a", opts)):
        _, out = run_driver(*argv, env=env)
        assert out == {"status": "Success", "attached": True}
    _, out = run_driver("detach", "pvc-flex", "node-a", env=env)
    assert out["status"] == "Success" and disks.attachment(vm_id, disk_id) is None
    _, out = run_driver("detach", "pvc-flex", "node-a", env=env)  # already detached: still success
    assert out["status"] == "Success"
    assert disks.get(disk_id) is not None  # detach keeps the disk


def test_node_without_provider_id_or_unknown(engine):
    opts = json.dumps({"volumeID": engine["disk"]})
    _, out = run_driver("attach", opts, "node-b", env=engine["env"])
    assert out["status"] == "Failure" and "providerID" in out["message"]
    _, out = run_driver("attach", opts, "node-z", env=engine["env"])
    assert out["status"] == "Failure" and "node-z not found" in out["message"]


def test_a_node_naming_another_nodes_vm_gets_nothing_attached(engine):
    """node-c's providerID was copied from node-a; the VM it names is named node-a, so attach,
    isattached and detach for node-c are refused and node-a's VM keeps exactly what it had."""
    env, disk_id, vm_id, disks = engine["env"], engine["disk"], engine["vm"], engine["disks"]
    opts = json.dumps({"volumeID": disk_id, "kubernetes.io/pvOrVolumeName": "pvc-flex"})
    for argv in (("attach", opts, "node-c"), ("isattached", opts, "node-c")):
        _, out = run_driver(*argv, env=env)
        assert out["status"] == "Failure" and "not the node's VM" in out["message"], out
    assert disks.attachment(vm_id, disk_id) is None
    _, out = run_driver("attach", opts, "node-a", env=env)
    assert out["status"] == "Success"
    _, out = run_driver("detach", "pvc-flex", "node-c", env=env)
    assert out["status"] == "Failure" and "not the node's VM" in out["message"], out
    assert disks.attachment(vm_id, disk_id) is not None  # node-a's attachment untouched


DISK = "8d5b3b2a-1c4e-4f7a-9d2b-0123456789ab"


@pytest.mark.parametrize("argv", [
    ("attach", json.dumps({"volumeID": None}), "node1"),
    ("isattached", "node1", json.dumps({"volumeID": None})),
    ("getvolumename", json.dumps({"volumeID": DISK, "kubernetes.io/pvOrVolumeName": None})),
    ("mountdevice", "/tmp/m", "", json.dumps({"volumeID": DISK, "kubernetes.io/fsType": None})),
])
def test_a_null_option_is_refused_by_name_never_read_as_the_text_none(argv, tmp_path):
    """kubelet passes the PV's flexVolume.options, strings only; a null is refused naming its key, where it was
    read as the text "None" (a disk id "None", a volume named "None")."""
    key = next(k for k, v in json.loads(next(a for a in argv if a.startswith("{"))).items() if v is None)
    _, out = run_driver(*argv, env={"OVIRT_FLEXDRIVER_CONF": str(tmp_path / "absent.json")})
    assert out["status"] == "Failure", out
    assert f"option {key}" in out["message"] and "null" in out["message"], out
    assert "None" not in out["message"], out


@pytest.mark.parametrize("key", ["ovirt_url", "ovirt_cafile", "ovirt_username", "kube_server"])
def test_a_null_configuration_value_is_refused_naming_the_file_and_key(key, tmp_path):
    """The engine URL (and every other key) comes from the configuration file the DaemonSet writes: a null there
    reached the engine as the URL "None" ("No host present") or the CA file "None"."""
    conf = tmp_path / "conf.json"
    values = {"ovirt_url": "https://engine.example/ovirt-engine/api", "ovirt_username": "admin@internal",
              "ovirt_password": "p", "ovirt_insecure": "false", "ovirt_cafile": str(tmp_path / "ca.pem"),
              "kube_server": "https://127.0.0.1:1", "kube_token_file": str(tmp_path / "token")}
    conf.write_text(json.dumps({**values, key: None}))
    _, out = run_driver("attach", json.dumps({"volumeID": DISK}), "node1", env={"OVIRT_FLEXDRIVER_CONF": str(conf)})
    assert out["status"] == "Failure", out
    assert str(conf) in out["message"] and key in out["message"] and "null" in out["message"], out
    assert "None" not in out["message"] and "No host" not in out["message"], out


@pytest.mark.parametrize("url", ["", "   ", "\n"])  # a blank one was stripped to "" after the check
def test_an_empty_engine_url_in_the_configuration_is_refused_naming_the_file_and_key(url, tmp_path):
    conf = tmp_path / "conf.json"
    conf.write_text(json.dumps({"ovirt_url": url, "ovirt_username": "admin@internal", "ovirt_password": "p",
                                "ovirt_insecure": "true", "kube_server": "https://127.0.0.1:1",
                                "kube_token_file": str(tmp_path / "token")}))
    _, out = run_driver("attach", json.dumps({"volumeID": DISK}), "node1", env={"OVIRT_FLEXDRIVER_CONF": str(conf)})
    assert out["status"] == "Failure", out
    assert str(conf) in out["message"] and "ovirt_url" in out["message"] and "empty" in out["message"], out
    assert "No host" not in out["message"], out


@pytest.mark.parametrize("wait", ["soon", "-1", "nan", "inf"])
def test_a_bad_wait_in_the_environment_is_refused_naming_it(wait, tmp_path):
    _, out = run_driver("waitforattach", "/dev/x", json.dumps({"volumeID": DISK}),
                        env={"OVIRT_FLEXDRIVER_BY_ID_DIR": str(tmp_path), "OVIRT_FLEXDRIVER_WAIT_S": wait})
    assert out["status"] == "Failure" and "OVIRT_FLEXDRIVER_WAIT_S" in out["message"] and wait in out["message"], out


def test_a_configuration_without_the_api_server_names_the_file_and_keys(tmp_path):
    conf = tmp_path / "conf.json"
    conf.write_text(json.dumps({"ovirt_url": "https://engine.example/ovirt-engine/api", "ovirt_username": "admin",
                                "ovirt_password": "p", "ovirt_insecure": "true"}))
    _, out = run_driver("attach", json.dumps({"volumeID": DISK}), "node1", env={"OVIRT_FLEXDRIVER_CONF": str(conf)})
    assert out["status"] == "Failure", out
    assert str(conf) in out["message"] and "kube_server" in out["message"] and "node1" in out["message"], out
