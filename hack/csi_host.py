"""A host of ovirt-csi-driver for tests and benchmarks: the driver process on a unix socket, with the simulator as
its engine, and a node whose "hot-plugged" disks are real block devices.

The simulator attaches disks to a VM in its store only. `LoopDisks` plays the guest kernel and udev for one VM:
it follows the VM's block devices as the simulator reports them (control API) and gives each attached disk a loop
device over a sparse file of the disk's size, with the `/dev/disk/by-id` link the guest's udev would make
(`scsi-0QEMU_QEMU_HARDDISK_<20-character serial>`) in a directory of its own (the driver reads it from
OVIRT_FLEXDRIVER_BY_ID_DIR). A detached disk loses its link and loop device; its file is kept, so the data
survives a re-attach as on a real disk. Everything the driver's node side then does (mkfs, mount, bind mounts,
resize2fs, statvfs) is the real kernel operation on that loop device: nothing in the driver is faked.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import ovirtsdk4.types as types

from machine_controller.storage import mounts

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30


def loop_devices_usable() -> str:
    """"" when this machine lets us attach loop devices and mount, else why not."""
    if os.geteuid() != 0:
        return "not root: cannot attach loop devices or mount"
    r = subprocess.run(["losetup", "--find"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"losetup --find failed: {r.stderr.strip()}"
    return ""


class LoopDisks:
    def __init__(self, control: Any, vm_id: str, root: Path, interval_s: float = 0.1) -> None:
        self.control, self.vm_id, self.interval_s = control, vm_id, interval_s
        self.by_id_dir = root / "by-id"
        self.images = root / "images"
        self.by_id_dir.mkdir(parents=True, exist_ok=True)
        self.images.mkdir(parents=True, exist_ok=True)
        self.loops: dict[str, tuple[str, Path]] = {}  # disk id -> (loop device, by-id link)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loop-disks", daemon=True)

    def __enter__(self) -> "LoopDisks":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        for disk_id in list(self.loops):
            self._unplug(disk_id)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as e:  # noqa: BLE001 - a simulator restart or a busy loop device: next round
                print(f"loop-disks: {e}", file=sys.stderr)
            self._stop.wait(self.interval_s)

    def sync(self) -> None:
        devices = {d["disk_id"]: d for d in self.control.vm(self.vm_id).get("block_devices", [])}
        for disk_id, dev in devices.items():
            if disk_id not in self.loops:
                self._plug(disk_id, dev)
            else:
                self._grow(disk_id, dev)
        for disk_id in set(self.loops) - set(devices):
            self._unplug(disk_id)

    def _plug(self, disk_id: str, dev: dict) -> None:
        image = self.images / disk_id
        with open(image, "ab") as f:
            if f.tell() < dev["size"]:
                f.truncate(dev["size"])
        args = ["losetup", "--find", "--show"] + (["--read-only"] if dev.get("read_only") else []) + [str(image)]
        loop = subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
        link = self.by_id_dir / Path(dev["by_id"][0]).name
        tmp = link.with_name(link.name + ".new")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(loop)
        tmp.rename(link)
        self.loops[disk_id] = (loop, link)

    def _grow(self, disk_id: str, dev: dict) -> None:
        loop, _ = self.loops[disk_id]
        image = self.images / disk_id
        if image.stat().st_size < dev["size"]:  # the engine extended the disk: the guest sees a bigger device
            with open(image, "ab") as f:
                f.truncate(dev["size"])
            subprocess.run(["losetup", "--set-capacity", loop], capture_output=True, check=True)

    def _unplug(self, disk_id: str) -> None:
        loop, link = self.loops.pop(disk_id)
        link.unlink(missing_ok=True)
        # A hot-unplug takes the device away even if something still has it mounted: detach lazily.
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def make_vm(sim: Any, name: str = "") -> str:
    """A VM in the simulator (from the installation's template, left down) to stand for a node."""
    from hack import ovirt_install

    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "csi")
        vms = conn.system_service().vms_service()
        vm = vms.add(types.Vm(name=name or f"csi-node-{uuid.uuid4().hex[:6]}",
                              cluster=types.Cluster(id=inst.cluster_id),
                              template=types.Template(name=inst.template_name), memory=2 * GIB))
        deadline = time.monotonic() + 30
        while vms.vm_service(vm.id).get().status != types.VmStatus.DOWN:
            assert time.monotonic() < deadline, "the simulator's VM did not come down"
            time.sleep(0.1)
        return vm.id
    finally:
        conn.close()


def write_credentials(sim: Any, directory: Path) -> Path:
    """The ovirt-credentials Secret's keys as files, as the controller Deployment mounts them."""
    directory.mkdir(parents=True, exist_ok=True)
    values = {"ovirt_url": sim.url, "ovirt_username": sim.username, "ovirt_password": sim.password,
              "ovirt_insecure": "false", "ovirt_cafile": "", "ovirt_ca_bundle": Path(sim.ca_file).read_text()}
    for key, value in values.items():
        (directory / key).write_text(value)
    return directory


@contextmanager
def running_driver(root: Path, sim: Any, services: str = "controller,node", node_id: str = "",
                   by_id_dir: Path | None = None, device_wait_s: float = 5.0) -> Iterator[str]:
    """ovirt-csi-driver as a subprocess on a unix socket under `root`; yields the endpoint (unix:///...)."""
    root.mkdir(parents=True, exist_ok=True)
    sock = root / "csi.sock"
    argv = [sys.executable, "-m", "machine_controller.storage.csi.server", "--endpoint", f"unix://{sock}",
            "--services", services, "--credentials-dir", str(write_credentials(sim, root / "credentials")),
            "--device-wait", str(device_wait_s)]
    if node_id:
        argv += ["--node-id", node_id]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if by_id_dir is not None:
        env["OVIRT_FLEXDRIVER_BY_ID_DIR"] = str(by_id_dir)
    log = open(root / "driver.log", "ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    log.close()
    try:
        deadline = time.monotonic() + 30
        while not _accepts(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ovirt-csi-driver did not start:\n{(root / 'driver.log').read_text()[-3000:]}")
            time.sleep(0.05)
        yield f"unix://{sock}"
    finally:
        _stop([proc])


def _accepts(sock: Path) -> bool:
    if not sock.exists():
        return False
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(str(sock))
        return True
    except OSError:
        return False
    finally:
        s.close()


class CsiClient:
    """The three CSI services of an endpoint, as the sidecars and kubelet call them (the driver's own stubs)."""

    def __init__(self, endpoint: str) -> None:
        import grpc

        from machine_controller.storage.csi import spec

        self.pb, pb_grpc = spec.load()
        self.channel = grpc.insecure_channel(endpoint)
        self.identity = pb_grpc.IdentityStub(self.channel)
        self.controller = pb_grpc.ControllerStub(self.channel)
        self.node = pb_grpc.NodeStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def mount_cap(self, mode: str = "SINGLE_NODE_WRITER", fs_type: str = "ext4") -> Any:
        pb = self.pb
        return pb.VolumeCapability(mount=pb.VolumeCapability.MountVolume(fs_type=fs_type),
                                   access_mode=pb.VolumeCapability.AccessMode(mode=mode))

    def block_cap(self, mode: str = "SINGLE_NODE_WRITER") -> Any:
        pb = self.pb
        return pb.VolumeCapability(block=pb.VolumeCapability.BlockVolume(),
                                   access_mode=pb.VolumeCapability.AccessMode(mode=mode))

    def create(self, name: str, required: int = GIB, limit: int = 0, caps: list | None = None,
               parameters: dict | None = None, timeout: float = 30) -> Any:
        pb = self.pb
        return self.controller.CreateVolume(pb.CreateVolumeRequest(
            name=name, capacity_range=pb.CapacityRange(required_bytes=required, limit_bytes=limit),
            volume_capabilities=caps if caps is not None else [self.mount_cap()],
            parameters={"storageDomainName": "nfs-data"} if parameters is None else parameters),
            timeout=timeout).volume


@contextmanager
def running_sidecars(root: Path, endpoint: str, kubeconfig: Path, sidecars: dict[str, list[str]]) -> Iterator[None]:
    """The CSI sidecars (name -> argv of the binary and its own flags) against one driver endpoint and API server,
    each with its log in `root`, stopped afterwards."""
    procs = []
    try:
        for name, argv in sidecars.items():
            log = open(root / f"{name}.log", "ab")
            procs.append(subprocess.Popen([*argv, f"--csi-address={endpoint.removeprefix('unix://')}",
                                           f"--kubeconfig={kubeconfig}", "--v=4"],
                                          stdout=log, stderr=subprocess.STDOUT, cwd=root))
            log.close()
        yield
    finally:
        _stop(procs)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


@dataclass(frozen=True)
class Host:
    sim: Any
    vm: str  # the VM standing for the node, its node id
    endpoint: str  # the node service's (and, in one process, the controller's)
    controller_endpoint: str


@contextmanager
def node_host(root: Path, split: bool = False) -> Iterator[Host]:
    """A simulator, one VM standing for the node, its disks as loop devices, and the driver: one process with both
    services, or (`split`) a controller process and a node process on endpoints of their own, as config/storage/csi
    deploys them. Whatever a failed test left mounted below `root` is unmounted after."""
    from hack.ovirtsim.testing import running_simulator

    with running_simulator(root / "sim") as sim:
        vm = make_vm(sim)
        try:
            with LoopDisks(sim.control, vm, root / "node") as loops, ExitStack() as drivers:
                endpoint = drivers.enter_context(running_driver(
                    root / "driver", sim, services="node" if split else "controller,node", node_id=vm,
                    by_id_dir=loops.by_id_dir))
                controller = drivers.enter_context(running_driver(root / "controller", sim, services="controller")) \
                    if split else endpoint
                yield Host(sim, vm, endpoint, controller)
        finally:
            unmount_under(root)


def online_resize_usable(work: Path, fs: str = "ext4") -> str:
    """"" when this machine lets the filesystem's tool (resize2fs, xfs_growfs) grow it mounted on a loop device,
    else why not (some sandboxes refuse ext4's online resize ioctl even to root, while xfs grows)."""
    why = loop_devices_usable()
    if why:
        return why
    if not shutil.which(f"mkfs.{fs}"):
        return f"mkfs.{fs} is not installed"
    work.mkdir(parents=True, exist_ok=True)
    image, mnt = work / "probe.img", work / "probe-mnt"
    mnt.mkdir(exist_ok=True)
    with open(image, "wb") as f:
        f.truncate(320 * 2**20)  # mkfs.xfs wants 300 MiB at least
    loop = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                          check=True).stdout.strip()
    try:
        subprocess.run(["mkfs.xfs", "-q", "-f", loop] if fs == "xfs" else ["mkfs.ext4", "-q", "-F", loop], check=True,
                       capture_output=True)
        subprocess.run(["mount", loop, str(mnt)], check=True, capture_output=True)
        try:
            before = os.statvfs(mnt).f_blocks
            with open(image, "ab") as f:
                f.truncate(640 * 2**20)
            subprocess.run(["losetup", "--set-capacity", loop], check=True, capture_output=True)
            grow = ["xfs_growfs", str(mnt)] if fs == "xfs" else ["resize2fs", loop]
            r = subprocess.run(grow, capture_output=True, text=True)
            if r.returncode != 0 or os.statvfs(mnt).f_blocks <= before:
                return f"{grow[0]} cannot grow a mounted {fs} here: {(r.stderr or r.stdout).strip()[-200:]}"
            return ""
        finally:
            subprocess.run(["umount", str(mnt)], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def unmount_under(root: Path) -> None:
    """Lazily unmount whatever a failed test left mounted below `root` (deepest first), so no mount outlives it."""
    prefix = mounts.canonical(str(root)) + "/"
    points = {m.point for m in mounts.table() if m.point.startswith(prefix)}
    for point in sorted(points, key=len, reverse=True):
        for _ in mounts.stacked_at(point):
            subprocess.run(["umount", "-l", point], capture_output=True)
