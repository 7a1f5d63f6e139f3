"""The node plugin's own kubelet registration and liveness endpoint (docs/storage.md#registration-with-the-kubelet):
the driver process, started as the node DaemonSet starts it, answers the kubelet's plugin watcher on
`<registration dir>/csi.ovirt.org-reg.sock` with the bytes the kubelet decodes, learns the kubelet's verdict, serves
/healthz from its Probe, and removes the socket when it stops so that the kubelet unregisters it.

The kubelet's side is played here with raw gRPC calls, and the messages are written and read as bytes with the
field numbers of the kubelet's pluginregistration v1 API. A wrong field number therefore fails here, not only
against a real kubelet (test/e2e/test_storage_csi_real.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from hack.csi_host import REPO
from machine_controller.runtime.testing import wait_until
from machine_controller.storage.csi import server as csi_server

KUBELET_PATH = "/var/lib/kubelet/plugins/csi.ovirt.org/csi.sock"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _string(field: int, value: str) -> bytes:
    data = value.encode()
    assert len(data) < 128  # one-byte lengths keep the expected bytes readable
    return bytes([field << 3 | 2, len(data)]) + data


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose sockets fit AF_UNIX's 107 bytes: pytest's tmp_path under an xdist worker does not."""
    with tempfile.TemporaryDirectory(prefix="reg-") as d:
        yield Path(d)


@pytest.fixture
def node_plugin(short_dir):
    """ovirt-csi-driver --services node with registration and /healthz, as config/storage/csi/node.yaml runs it."""
    registry = short_dir / "plugins_registry"
    registry.mkdir()
    port = _free_port()
    argv = [sys.executable, "-m", "machine_controller.storage.csi.server", "--services=node",
            f"--endpoint=unix://{short_dir}/csi.sock", f"--node-id={uuid.uuid4()}",
            f"--registration-dir={registry}", f"--kubelet-registration-path={KUBELET_PATH}",
            f"--health-port={port}"]
    log = open(short_dir / "driver.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    log.close()
    sock = registry / "csi.ovirt.org-reg.sock"
    try:
        assert wait_until(lambda: sock.exists() or proc.poll() is not None, 30, 0.05)
        assert proc.poll() is None, (short_dir / "driver.log").read_text()
        yield proc, sock, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _call(sock: Path, method: str, body: bytes) -> bytes:
    with grpc.insecure_channel(f"unix://{sock}") as channel:
        call = channel.unary_unary(f"/pluginregistration.Registration/{method}",
                                   request_serializer=None, response_deserializer=None)
        # As the kubelet dials it (blocking, up to its timeout): gRPC makes the socket file a moment before it
        # accepts on it, and a call that fails fast meets "connection refused" in between (seen in CI).
        return call(body, timeout=10, wait_for_ready=True)


def _healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz?verbose", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_kubelet_learns_the_driver_from_the_registration_socket(node_plugin):
    proc, sock, port = node_plugin
    info = _call(sock, "GetInfo", b"")  # InfoRequest has no fields
    # PluginInfo: 1 type, 2 name, 3 endpoint (as the kubelet sees it), 4 supported_versions.
    assert info == (_string(1, "CSIPlugin") + _string(2, "csi.ovirt.org") + _string(3, KUBELET_PATH)
                    + _string(4, "1.0.0"))
    assert wait_until(lambda: _healthz(port)[0] == 200, 15, 0.1), _healthz(port)
    status, body = _healthz(port)
    assert "[+]csi-probe ok" in body and "[+]kubelet-registration ok" in body

    # RegistrationStatus: 1 plugin_registered (true), answered by an empty RegistrationStatusResponse.
    assert _call(sock, "NotifyRegistrationStatus", b"\x08\x01") == b""
    assert _healthz(port)[0] == 200

    # The kubelet refused (plugin_registered false is the default, so only 2 error is sent): the liveness check
    # fails, and a restart makes the socket again, which the kubelet's watcher takes as a new registration.
    assert _call(sock, "NotifyRegistrationStatus", _string(2, "validation failed")) == b""
    status, body = _healthz(port)
    assert status == 500 and "[-]kubelet-registration failed" in body and "[+]csi-probe ok" in body

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert not sock.exists()  # the kubelet's watcher sees it go and unregisters the driver


def test_a_stale_registration_socket_is_replaced(short_dir):
    registry = short_dir / "plugins_registry"
    registry.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(registry / "csi.ovirt.org-reg.sock"))  # a driver killed with SIGKILL leaves its socket
    stale.close()
    from machine_controller.storage.csi.registration import Registration

    reg = Registration(str(registry), "csi.ovirt.org", KUBELET_PATH)
    reg.start()
    try:
        assert _call(registry / "csi.ovirt.org-reg.sock", "GetInfo", b"").startswith(_string(1, "CSIPlugin"))
    finally:
        reg.stop()
    assert not (registry / "csi.ovirt.org-reg.sock").exists()


@pytest.mark.parametrize("argv, why", [
    (["--services=node", "--registration-dir=/r"], "go together"),
    (["--services=node", f"--kubelet-registration-path={KUBELET_PATH}"], "go together"),
    (["--services=controller", "--registration-dir=/r", f"--kubelet-registration-path={KUBELET_PATH}"],
     "needs --services with node"),
    (["--services=node", "--registration-dir=/r", "--kubelet-registration-path=csi.sock"], "absolute"),
    (["--health-port=70000"], "--health-port"),
    (["--probe-timeout=0"], "--probe-timeout"),
])
def test_registration_and_health_flags_are_checked(argv, why, capsys):
    with pytest.raises(SystemExit) as exit_:
        csi_server.parse(argv)
    assert exit_.value.code == 2
    assert why in capsys.readouterr().err


def test_a_missing_registration_directory_stops_the_driver_with_a_clear_error(tmp_path):
    run = subprocess.run([sys.executable, "-m", "machine_controller.storage.csi.server", "--services=node",
                          f"--endpoint=unix://{tmp_path}/csi.sock", f"--node-id={uuid.uuid4()}",
                          f"--registration-dir={tmp_path}/nowhere", f"--kubelet-registration-path={KUBELET_PATH}"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 2
    assert f"registration directory {tmp_path}/nowhere does not exist" in run.stderr
    assert "Traceback" not in run.stderr
