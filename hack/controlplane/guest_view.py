"""What a real guest's node sees where a VM differs from this machine (docs/architecture.md#real-nodes).

Several real nodes share one machine, but node software is written for a machine of its own. The kubelet keeps its
state in `/var/lib/kubelet`, and DaemonSets name that path in hostPath volumes (the CSI node plugin and its
registration socket). A guest's udev links its disks under `/dev/disk/by-id`. oVirt sets a VM's SMBIOS UUID to the
VM id, and both the kubelet (`systemUUID`) and the CSI node plugin (its node id) read it from
`/sys/class/dmi/id/product_uuid`. So a node that stands for a VM runs its containerd and kubelet in a mount
namespace of its own, where:

- `/var/lib/kubelet` is the node's kubelet directory, a shared mount, so that a pod's `Bidirectional` mounts
  (a CSI node plugin's staging and publishing) reach the kubelet and the other pods;
- `/dev/disk/by-id` is the VM's by-id directory (hack/csi_host.py's LoopDisks links its disks' loop devices there);
- `/sys/class/dmi/id/product_uuid` holds the VM id. sysfs cannot take a new directory, so `/sys/class` becomes a
  tmpfs that holds the machine's classes again, bound one by one, plus `dmi/id`;
- `/run/udev` exists, as on any host with udev, so a hostPath of it mounts.

The namespace is a slave of the machine's: mounts made on the machine still reach the node, but nothing mounted in
the node leaks out. It lives as long as a holder process, which `RealNode.stop()` ends after the node's other
processes. The mount points `/var/lib/kubelet`, `/dev/disk/by-id` and `/run/udev` are made on the machine when
missing (empty directories; the node's mounts stay in its namespace).
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

KUBELET_ROOT = "/var/lib/kubelet"
READY = "guest-view-ready"


@dataclass(frozen=True)
class GuestView:
    system_uuid: str  # the VM id: the SMBIOS UUID oVirt gives the guest
    by_id_dir: Path  # the guest's /dev/disk/by-id


def _script(view: GuestView, kubelet_dir: Path, scratch: Path) -> str:
    q = shlex.quote
    classes = scratch / "sys-class"
    return "\n".join([
        "set -eu",
        f"mkdir -p {KUBELET_ROOT} /dev/disk/by-id /run/udev {q(str(kubelet_dir))} {q(str(classes))}",
        f"mount --bind {q(str(kubelet_dir))} {KUBELET_ROOT}",
        f"mount --make-rshared {KUBELET_ROOT}",
        f"mount --bind {q(str(view.by_id_dir))} /dev/disk/by-id",
        # Keep the machine's classes reachable, lay a tmpfs over /sys/class, and bind them back beside dmi/id.
        f"mount --rbind /sys/class {q(str(classes))}",
        "mount -t tmpfs -o mode=0755,size=1m guest-sys-class /sys/class",
        f"for c in $(ls {q(str(classes))}); do",
        f"  mkdir /sys/class/$c; mount --rbind {q(str(classes))}/$c /sys/class/$c",
        "done",
        f"umount -l {q(str(classes))}",
        "mkdir -p /sys/class/dmi/id",
        f"echo {q(view.system_uuid)} > /sys/class/dmi/id/product_uuid",
        "mount -o remount,ro,bind /sys/class",
        f"echo {READY}",
        "exec sleep 2147483647",
    ])


def enter_guest_view(view: GuestView, kubelet_dir: Path, scratch: Path, log: Path) -> subprocess.Popen[bytes]:
    """Make the namespace and return its holder, once every mount is in place; the node's processes join it with
    `nsenter_argv(holder.pid)`."""
    view.by_id_dir.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as err:
        holder = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", "sh", "-c",
                                   _script(view, kubelet_dir, scratch)],
                                  stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    assert holder.stdout is not None
    line = holder.stdout.readline().decode().strip()
    holder.stdout.close()
    if line != READY:
        holder.kill()
        holder.wait()
        raise RuntimeError(f"the guest's mount namespace could not be made: {log.read_text(errors='replace')[-800:]}")
    return holder


def nsenter_argv(holder_pid: int) -> list[str]:
    """The prefix that runs a command in the holder's mount namespace (nsenter execs it: its pid is the command's)."""
    return ["nsenter", f"--mount=/proc/{holder_pid}/ns/mnt", "--"]
