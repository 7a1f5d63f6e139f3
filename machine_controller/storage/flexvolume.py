"""`ovirt-flexvolume-driver`: kubelet's FlexVolume protocol for oVirt disks (docs/compatibility.md#storage).

kubelet and kube-controller-manager run the executable once per operation (`<driver> <command> <args...>`) and
read its stdout and stderr merged, so this process prints exactly one JSON object on stdout and nothing on
stderr: stderr is pointed at /dev/null before anything else is imported or logged, and every failure, even an
unexpected exception, becomes `{"status": "Failure", "message": ...}`. Unknown commands answer
`{"status": "Not supported"}` with exit code 1, which makes kubelet use its built-in default for them.

Configuration: a JSON file written by the DaemonSet that installs the driver (`$OVIRT_FLEXDRIVER_CONF`, else
`ovirt-flexvolume-driver.json` next to the executable): the oVirt credentials (the same keys as the
controller's credentials Secret) and, for the commands that name a node (attach, isattached, detach, which run
on the masters), the Kubernetes API server, a service-account token file and its CA. The node's VM is the VM its
Node's `spec.providerID` (`ovirt://<vm id>`) names, and only if that VM bears the Node's name (a providerID can be
copied from another Node); never a host kubeconfig.

Devices: a disk attached over virtio-scsi shows under `/dev/disk/by-id` as `scsi-0QEMU_QEMU_HARDDISK_<serial>`
(over virtio-blk as `virtio-<serial>`); the serial is the disk id, in full or cut to 20 characters depending on
the engine and the guest, so both forms are looked for.
"""

from __future__ import annotations

import json
import math
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

from api.ids import is_ovirt_id, vm_id_from_provider_id

from . import mounts

DRIVER = "ovirt/ovirt-flexvolume-driver"
CONF_ENV = "OVIRT_FLEXDRIVER_CONF"
CONF_NAME = "ovirt-flexvolume-driver.json"
DEV_DIR_ENV = "OVIRT_FLEXDRIVER_BY_ID_DIR"   # tests point this at a directory of their own
WAIT_ENV = "OVIRT_FLEXDRIVER_WAIT_S"  # and shorten waitforattach's wait with this
FS_TYPES = ("ext4", "xfs")
VOLUME_ID = "volumeID"  # the key of the PV's flexVolume.options carrying the oVirt disk id


class Failure(Exception):
    """A failure with a message meant for the user (it ends up in the pod's events)."""


class NotSupported(Exception):
    pass


# --- replies -------------------------------------------------------------------------------------------------
def success(**fields: Any) -> dict:
    return {"status": "Success", **fields}


def reply(out: dict) -> int:
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0 if out.get("status") == "Success" else 1


# --- configuration and lookups -------------------------------------------------------------------------------
def conf_path() -> str:
    return os.environ.get(CONF_ENV) or str(Path(sys.argv[0]).resolve().parent / CONF_NAME)


def load_conf() -> dict:
    path = conf_path()
    try:
        with open(path) as f:
            conf = json.load(f)
    except FileNotFoundError:
        raise Failure(f"configuration file {path} not found (it is written by the driver's DaemonSet)") from None
    except (OSError, ValueError) as e:
        raise Failure(f"configuration file {path} unreadable: {e}") from None
    if not isinstance(conf, dict):
        raise Failure(f"configuration file {path} is not a JSON object")
    # The DaemonSet writes strings only; anything else would be read as its text ("None" for a null engine URL).
    return strings_only(conf, f"configuration file {path}: key")


def parse_options(raw: str) -> dict:
    try:
        opts = json.loads(raw)
    except ValueError as e:
        raise Failure(f"options are not JSON: {e}") from None
    if not isinstance(opts, dict):
        raise Failure("options are not a JSON object")
    # A PV's flexVolume.options is a map of strings, and so is what kubelet adds to it: anything else is refused by
    # its key rather than read as its text (a volumeID "None").
    return strings_only(opts, "the volume's flexVolume option")


def strings_only(values: dict, named: str) -> dict:
    """`values`, once every value is a string; else a Failure `<named> <key> is <JSON value>, not a string`."""
    for key, value in values.items():
        if not isinstance(value, str):
            raise Failure(f"{named} {key} is {json.dumps(value)}, not a string")
    return values


def disk_id_of(opts: dict) -> str:
    disk_id = opts.get(VOLUME_ID, "").strip()
    if not disk_id:
        raise Failure(f"the volume's flexVolume.options has no {VOLUME_ID} (the oVirt disk id)")
    if not is_ovirt_id(disk_id):
        raise Failure(f"the volume's {VOLUME_ID} {disk_id!r} is no oVirt disk id (a UUID)")
    return disk_id


def node_vm_id(conf: dict, node_name: str) -> str:
    """The VM id of a Node, from its providerID, read with the driver's own service-account token."""
    if not node_name:
        raise Failure("no node name given")
    server = conf.get("kube_server", "").rstrip("/")
    token_file = conf.get("kube_token_file", "")
    if not server or not token_file:
        raise Failure(f"configuration file {conf_path()} lacks kube_server or kube_token_file, needed to find "
                      f"node {node_name}'s VM")
    try:
        token = Path(token_file).read_text().strip()
    except OSError as e:
        raise Failure(f"service-account token {token_file} unreadable: {e}") from None
    ctx = ssl.create_default_context(cafile=conf.get("kube_ca_file") or None)
    req = urllib.request.Request(f"{server}/api/v1/nodes/{urllib.parse.quote(node_name)}",
                                 headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            node = json.load(resp)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise Failure(f"node {node_name} not found") from None
        raise Failure(f"reading node {node_name}: HTTP {e.code} {e.reason}") from None
    except (OSError, ValueError) as e:
        raise Failure(f"reading node {node_name}: {e}") from None
    provider_id = (node.get("spec") or {}).get("providerID", "")
    vm_id = vm_id_from_provider_id(provider_id)
    if vm_id is None:
        raise Failure(f"node {node_name} has no oVirt providerID (got {provider_id!r}); cannot tell its VM")
    return vm_id


def disks_from(conf: dict):
    # Imported here: `init` and the node-only commands never load the SDK.
    from machine_controller.ovirt.client import OvirtClient
    from machine_controller.ovirt.connection import ConnectionPool
    from machine_controller.ovirt.credentials import InvalidCredentials, from_secret_data
    from machine_controller.storage.disks import Disks
    try:
        creds = from_secret_data({k: v for k, v in conf.items() if k.startswith("ovirt_")}, encoded=False,
                                 source=f"configuration file {conf_path()}")
    except InvalidCredentials as e:
        raise Failure(str(e)) from None
    pool = ConnectionPool(size=1, timeout_s=60, user_agent="ovirt-flexvolume-driver")
    pool.set_credentials(creds)
    return Disks(OvirtClient(pool))


def by_id_dir() -> Path:
    return Path(os.environ.get(DEV_DIR_ENV, "/dev/disk/by-id"))


def device_links(disk_id: str) -> list[Path]:
    d = by_id_dir()
    names = []
    for serial in (disk_id, disk_id[:20]):
        names += [f"scsi-0QEMU_QEMU_HARDDISK_{serial}", f"virtio-{serial}"]
    return [d / n for n in dict.fromkeys(names)]


def find_device(disk_id: str) -> str | None:
    if not is_ovirt_id(disk_id):  # a path made of anything else could name another device
        return None
    for link in device_links(disk_id):
        if link.exists():
            return str(link.resolve())
    return None


# --- commands ------------------------------------------------------------------------------------------------
def cmd_init(args: list[str]) -> dict:
    # kubelet probes with init and drops the plugin if it fails: no engine call here, an unreachable engine
    # must not unregister the driver.
    return success(message="ovirt-flexvolume-driver ready",
                   capabilities={"attach": True, "selinuxRelabel": True, "fsGroup": True,
                                 "supportsMetrics": False, "requiresFSResize": False})


def _json_and_node(args: list[str]) -> tuple[dict, str]:
    """isattached/attach: `<json> <node>`, or `<node> <json>` from older kubelets."""
    if len(args) < 2:
        raise Failure("expected <options json> <node name>")
    first, second = args[0], args[1]
    if first.lstrip().startswith("{"):
        return parse_options(first), second
    if second.lstrip().startswith("{"):
        return parse_options(second), first
    raise Failure("neither argument is the options JSON")


def the_nodes_vm(conf: dict, node_name: str, disks) -> str:
    """The id of the Node's VM, proven: the VM its providerID names must bear the Node's name, which the engine
    keeps unique (docs/architecture.md#acting-only-on-what-is-ours). A providerID copied from another Node names
    another VM, whose disks this driver must not touch."""
    vm_id = node_vm_id(conf, node_name)
    vm = disks.client.vm(vm_id)
    if vm is None:
        raise Failure(f"node {node_name}'s providerID names VM {vm_id}, which does not exist")
    if vm.name != node_name:
        raise Failure(f"node {node_name}'s providerID names VM {vm_id}, which is named {vm.name!r}, not "
                      f"{node_name!r}: not the node's VM, so no disk is attached to or detached from it")
    return vm_id


def cmd_attach(args: list[str]) -> dict:
    opts, node = _json_and_node(args)
    disk_id = disk_id_of(opts)
    conf = load_conf()
    disks = disks_from(conf)
    vm_id = the_nodes_vm(conf, node, disks)
    read_only = opts.get("kubernetes.io/readwrite") == "ro"
    disks.attach(vm_id, disk_id, read_only=read_only)
    # The device path is the by-id link; waitforattach resolves it on the node.
    return success(device=str(device_links(disk_id)[0]))


def cmd_isattached(args: list[str]) -> dict:
    opts, node = _json_and_node(args)
    disk_id = disk_id_of(opts)
    conf = load_conf()
    disks = disks_from(conf)
    att = disks.attachment(the_nodes_vm(conf, node, disks), disk_id)
    return success(attached=att is not None and att.active is not False)


def cmd_detach(args: list[str]) -> dict:
    if len(args) < 2:
        raise Failure("expected <volume name> <node name>")
    volume_name, node = args[0], args[1]
    conf = load_conf()
    disks = disks_from(conf)
    vm_id = the_nodes_vm(conf, node, disks)
    # kubelet passes the PV name, which the provisioner gives the disk too (one name per claim).
    disk = disks.find_by_name(volume_name.replace("~", "_"))
    if disk is None:
        return success(message=f"no disk named {volume_name}: nothing to detach")
    disks.detach(vm_id, disk.id)
    return success()


def wait_s(default: float) -> float:
    """$OVIRT_FLEXDRIVER_WAIT_S (tests shorten the wait with it), range-checked: a NaN or a negative deadline would
    make waitforattach wait for ever or not look at all."""
    raw = os.environ.get(WAIT_ENV)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 3600:  # False for NaN
        raise Failure(f"${WAIT_ENV} must be a number of seconds from 0 to 3600, got {raw!r}")
    return value


def cmd_waitforattach(args: list[str], timeout_s: float = 600.0, interval_s: float = 0.5) -> dict:
    if len(args) < 2:
        raise Failure("expected <device path> <options json>")
    opts = parse_options(args[1])
    disk_id = disk_id_of(opts)
    deadline = time.monotonic() + wait_s(timeout_s)
    while True:
        dev = find_device(disk_id)
        if dev:
            return success(device=dev)
        if time.monotonic() >= deadline:
            raise Failure(f"no device for disk {disk_id} under {by_id_dir()} "
                          f"(looked for {', '.join(p.name for p in device_links(disk_id))})")
        time.sleep(interval_s)  # udev may lag behind the hot-plug


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    argv = [a for a in argv if a != ""]  # never hand an empty argument to mkfs or mount
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise Failure(f"{argv[0]} not found on this node") from None


def must_run(argv: list[str]) -> None:
    proc = _run(argv)
    if proc.returncode != 0:
        raise Failure(f"{' '.join(argv)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")


def current_fs(device: str) -> str:
    # No cache (-c /dev/null): device names are reused after a detach, and blkid's cache would report the
    # filesystem of the disk that had the name before, so an empty disk would go unformatted.
    proc = _run(["blkid", "-c", "/dev/null", "-o", "value", "-s", "TYPE", device])
    return proc.stdout.strip() if proc.returncode == 0 else ""


def cmd_mountdevice(args: list[str]) -> dict:
    if len(args) < 3:
        raise Failure("expected <mount dir> <device path> <options json>")
    mount_dir, device, opts = args[0], args[1], parse_options(args[2])
    fs = (opts.get("kubernetes.io/fsType") or "ext4").lower()
    if fs not in FS_TYPES:
        raise Failure(f"the volume's flexVolume option kubernetes.io/fsType {fs!r} is not supported (use one of "
                      f"{', '.join(FS_TYPES)})")
    if not device:
        found = find_device(disk_id_of(opts))
        if not found:
            raise Failure("no device path given and none found for the disk")
        device = found
    if not os.path.exists(device):
        raise Failure(f"device {device} does not exist")
    if mounts.is_mountpoint(mount_dir):  # compared as the kernel names it (docs/storage.md#mount-points)
        return success(message=f"{mount_dir} already mounted")
    ro = opts.get("kubernetes.io/readwrite") == "ro"
    format_and_mount(device, mount_dir, fs, ["ro"] if ro else [])
    return success()


def format_and_mount(device: str, mount_dir: str, fs: str, mount_options: list[str]) -> None:
    """Make `fs` on the device if it holds no filesystem (never over another one: that is data), then mount it.
    Shared by this driver's mountdevice and the CSI driver's NodeStageVolume."""
    have = current_fs(device)
    if not have:
        must_run(["mkfs.xfs", "-f", device] if fs == "xfs" else ["mkfs.ext4", "-F", "-q", device])
    elif have != fs:
        raise Failure(f"device {device} holds {have}, not {fs}: not formatting a disk that has data")
    os.makedirs(mount_dir, exist_ok=True)
    must_run(["mount", "-t", fs] + (["-o", ",".join(mount_options)] if mount_options else []) + [device, mount_dir])


def cmd_unmountdevice(args: list[str]) -> dict:
    if len(args) < 1:
        raise Failure("expected <mount dir>")
    try:
        mounts.unmount_all(args[0], lambda point: must_run(["umount", point]))
    except mounts.StillMounted as e:
        raise Failure(str(e)) from None  # never "unmounted" over a live mount: the disk would be detached under it
    return success()


def cmd_getvolumename(args: list[str]) -> dict:
    if len(args) < 1:
        raise Failure("expected <options json>")
    opts = parse_options(args[0])
    name = opts.get("kubernetes.io/pvOrVolumeName") or disk_id_of(opts)
    return success(volumeName=str(name).replace("/", "~"))


COMMANDS: dict[str, Callable[[list[str]], dict]] = {
    "init": cmd_init, "attach": cmd_attach, "isattached": cmd_isattached, "detach": cmd_detach,
    "waitforattach": cmd_waitforattach, "mountdevice": cmd_mountdevice, "unmountdevice": cmd_unmountdevice,
    "getvolumename": cmd_getvolumename,
}


def dispatch(argv: list[str]) -> dict:
    if not argv:
        return {"status": "Failure", "message": "no command given"}
    fn = COMMANDS.get(argv[0])
    if fn is None:
        return {"status": "Not supported", "message": f"{argv[0]} is not supported by {DRIVER}"}
    try:
        return fn(argv[1:])
    except Failure as e:
        return {"status": "Failure", "message": str(e)}
    except Exception as e:  # noqa: BLE001 - kubelet must get JSON whatever happens
        return {"status": "Failure", "message": f"{argv[0]}: {type(e).__name__}: {e}"}


def main(argv: list[str] | None = None) -> int:
    # Silence stderr first: kubelet merges it into the reply it parses.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    sys.stderr = open(os.devnull, "w")
    import logging
    logging.disable(logging.CRITICAL)
    import structlog  # the oVirt client logs through structlog, which prints to stdout by default
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    return reply(dispatch(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
