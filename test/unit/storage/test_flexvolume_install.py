"""The FlexVolume driver as its DaemonSet installs it runs from its own copy of the project: the host's python3
brings the third-party packages only (docs/compatibility.md#storage). Here that python3 is this interpreter
without the virtualenv's `.pth` files, which are what put this project's editable install on the path, so a
package the install forgets to copy fails the test as it fails on a host."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from machine_controller.storage.install import EXECUTABLE, VENDOR_DIR, install


def _host_python(bin_dir: Path) -> None:
    """`python3` as a host with the driver's dependencies installed runs it: site-packages on the path, and
    nothing of this repository (the `-S` interpreter skips site, the script appends site-packages by hand)."""
    bin_dir.mkdir()
    shim = bin_dir / "python3"
    shim.write_text(
        f"#!{sys.executable} -S\n"
        "import runpy, sys\n"
        f"sys.path.append({sysconfig.get_paths()['purelib']!r})\n"
        "assert sys.argv[1] == '-m', sys.argv\n"
        "sys.argv = [sys.argv[2], *sys.argv[3:]]\n"
        "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")
    shim.chmod(0o755)


def _installed(tmp_path: Path) -> Path:
    creds = tmp_path / "creds"
    creds.mkdir()
    # An engine nothing listens on, and no service-account token: isattached fails at its Node lookup, after
    # importing all it needs.
    (creds / "ovirt_url").write_text("https://127.0.0.1:9/ovirt-engine/api")
    (creds / "ovirt_username").write_text("admin@internal")
    (creds / "ovirt_password").write_text("secret")
    (creds / "ovirt_insecure").write_text("true")
    plugin = tmp_path / "plugin"
    install(plugin, plugin, creds, sa_dir=tmp_path / "no-service-account", kube_server="https://127.0.0.1:9")
    _host_python(tmp_path / "bin")
    return plugin / VENDOR_DIR / EXECUTABLE


def _run(tmp_path: Path, executable: Path, *argv: str) -> dict:
    proc = subprocess.run([str(executable), *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)


def test_the_installed_driver_answers_init_from_its_own_copy(tmp_path):
    reply = _run(tmp_path, _installed(tmp_path), "init")
    assert reply["status"] == "Success" and reply["capabilities"]["attach"] is True, reply


def test_the_installed_driver_reaches_the_engine_side_from_its_own_copy(tmp_path):
    """isattached imports the oVirt client and the disk layer (api's ids among them) before it asks anything:
    an import error would end the process without a reply."""
    executable = _installed(tmp_path)
    disk_id = "6fea7d37-1695-46d5-b842-92d865aaa3d1"
    reply = _run(tmp_path, executable, "isattached", json.dumps({"volumeID": disk_id}), "worker-0")
    assert reply["status"] == "Failure" and "token" in reply["message"], reply
