"""mountdevice/unmountdevice on a real block device: a loop device standing in for the attached oVirt disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DISK_ID = "5f0c2a4e-7b1d-4c3e-8a9f-fedcba987654"


def run_driver(*argv: str, env: dict) -> dict:
    p = subprocess.run([sys.executable, "-m", "machine_controller.storage.flexvolume", *argv], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, **env}, timeout=120)
    assert p.stderr == ""
    return json.loads(p.stdout)


@pytest.fixture
def loop(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("machine limitation: not root, cannot attach a loop device or mount")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(400 * 2**20)
    r = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"machine limitation: losetup failed: {r.stderr.strip()}")
    dev = r.stdout.strip()
    yield dev
    subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_waitforattach_format_mount_unmount(loop, tmp_path, fs):
    if not shutil.which(f"mkfs.{fs}"):
        pytest.skip(f"machine limitation: mkfs.{fs} is not installed")
    byid = tmp_path / "by-id"
    byid.mkdir()
    (byid / f"scsi-0QEMU_QEMU_HARDDISK_{DISK_ID[:20]}").symlink_to(loop)
    env = {"OVIRT_FLEXDRIVER_BY_ID_DIR": str(byid)}
    opts = json.dumps({"volumeID": DISK_ID, "kubernetes.io/fsType": fs, "kubernetes.io/readwrite": "rw"})
    out = run_driver("waitforattach", "", opts, env=env)
    assert out == {"status": "Success", "device": loop}
    mnt = tmp_path / "mnt"
    out = run_driver("mountdevice", str(mnt), loop, opts, env=env)
    if out["status"] != "Success" and "mount" in out.get("message", "") and "permission" in out["message"].lower():
        pytest.skip(f"machine limitation: {out['message']}")
    assert out["status"] == "Success", out
    try:
        mounts = Path("/proc/self/mounts").read_text()
        assert str(mnt) in mounts and f" {fs} " in mounts
        (mnt / "hello").write_text("data")
        assert run_driver("mountdevice", str(mnt), loop, opts, env=env)["status"] == "Success"  # already mounted
    finally:
        out = run_driver("unmountdevice", str(mnt), env=env)
    assert out["status"] == "Success" and str(mnt) not in Path("/proc/self/mounts").read_text()
    # Mounting again keeps the data: an existing filesystem is never reformatted.
    assert run_driver("mountdevice", str(mnt), loop, opts, env=env)["status"] == "Success"
    assert (mnt / "hello").read_text() == "data"
    run_driver("unmountdevice", str(mnt), env=env)
    other = json.dumps({"volumeID": DISK_ID, "kubernetes.io/fsType": "xfs" if fs == "ext4" else "ext4"})
    out = run_driver("mountdevice", str(mnt), loop, other, env=env)
    assert out["status"] == "Failure" and "not formatting" in out["message"]


def test_unmountdevice_under_symlink_with_space_leaves_no_mount(loop, tmp_path):
    """The kubelet's root is often reached through a symlink, and a path may hold a space: the kernel's mount table
    names the resolved path with the space escaped. mountdevice twice mounts once, and unmountdevice leaves nothing
    mounted (docs/storage.md#mount-points)."""
    if not shutil.which("mkfs.ext4"):
        pytest.skip("machine limitation: mkfs.ext4 is not installed")
    (tmp_path / "kubelet root").mkdir()
    (tmp_path / "kubelet link").symlink_to(tmp_path / "kubelet root")
    mnt = tmp_path / "kubelet link" / "global mount"
    opts = json.dumps({"volumeID": DISK_ID, "kubernetes.io/fsType": "ext4"})
    real = str(tmp_path / "kubelet root" / "global mount")
    try:
        assert run_driver("mountdevice", f"{mnt}/", loop, opts, env={})["status"] == "Success"
        assert run_driver("mountdevice", str(mnt), loop, opts, env={})["status"] == "Success"
        table = Path("/proc/self/mountinfo").read_text()
        assert table.count(real.replace(" ", "\\040") + " ") == 1  # mounted once, not stacked
        out = run_driver("unmountdevice", f"{mnt}/", env={})
        assert out["status"] == "Success", out
        assert subprocess.run(["mountpoint", "-q", real]).returncode != 0, "unmountdevice left the filesystem mounted"
    finally:
        while subprocess.run(["mountpoint", "-q", real]).returncode == 0:
            subprocess.run(["umount", real], capture_output=True)
