"""The kernel's mount table, compared as the kernel writes it (docs/storage.md#mount-points).

/proc/self/mountinfo (proc(5)) names each mount point by its canonical path: symlinks resolved, no `.`, `..` or
trailing slash, and space, tab, newline and backslash written as octal escapes (`\\040`, `\\011`, `\\012`, `\\134`).
A path from a request (the kubelet's root directory is often reached through a symlink; a path may hold a space)
is therefore resolved the same way, and the table's fields are decoded, before the two are compared. What is
mounted is told by the device number the kernel reports, not by the source's name (`/dev/mapper/x` and
`/dev/dm-0` are one device).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

MOUNTINFO = "/proc/self/mountinfo"
_ESCAPE = re.compile(rb"\\([0-7]{3})")


class StillMounted(RuntimeError):
    """Unmounting left a mount behind: the caller must not report the path unmounted."""


@dataclass(frozen=True)
class Mount:
    mount_id: int
    parent_id: int
    device: tuple[int, int]  # the mounted filesystem's st_dev, as (major, minor)
    root: str  # the directory of that filesystem mounted here (a bind mount's subdirectory, or the device file)
    point: str  # canonical, decoded
    fstype: str
    source: str  # decoded, as mount(8) was given it


def _decode(field: bytes) -> str:
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse(text: bytes) -> list[Mount]:
    """The mounts of a mountinfo table, in its order (a mount listed after the one it covers)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(b" ")
        sep = fields.index(b"-", 6)  # the optional fields end with a lone "-"
        major, minor = fields[2].split(b":")
        mounts.append(Mount(mount_id=int(fields[0]), parent_id=int(fields[1]), device=(int(major), int(minor)),
                            root=_decode(fields[3]), point=_decode(fields[4]), fstype=_decode(fields[sep + 1]),
                            source=_decode(fields[sep + 2])))
    return mounts


def table() -> list[Mount]:
    with open(MOUNTINFO, "rb") as f:
        return parse(f.read())


def canonical(path: str) -> str:
    """`path` as the mount table names it: absolute, every symlink resolved, no `.`, `..` or trailing slash."""
    return os.path.realpath(path)


def stacked_at(path: str, mounts: list[Mount] | None = None) -> list[Mount]:
    """The mounts at `path`, bottom first: the last is the one a lookup of the path reaches."""
    point = canonical(path)
    here = {m.mount_id: m for m in (table() if mounts is None else mounts) if m.point == point}
    # A mount stacked on another has that one as its parent: start from the one whose parent is elsewhere.
    above = {m.parent_id: m for m in here.values()}
    current = next((m for m in here.values() if m.parent_id not in here), None)
    ordered: list[Mount] = []
    while current is not None and len(ordered) < len(here):
        ordered.append(current)
        current = above.get(current.mount_id)
    return ordered + [m for m in here.values() if m not in ordered]  # anything outside the chain, last


def top_mount(path: str) -> Mount | None:
    stack = stacked_at(path)
    return stack[-1] if stack else None


def is_mountpoint(path: str) -> bool:
    return top_mount(path) is not None


def holds_device(mount: Mount, device: str) -> bool:
    """Whether `mount` is a filesystem on the block device `device` (any path or link to it)."""
    rdev = os.stat(device).st_rdev
    return mount.device == (os.major(rdev), os.minor(rdev))


def unmount_all(path: str, umount: Callable[[str], None]) -> None:
    """Unmount every mount stacked at `path` (`umount` runs umount(8) on the canonical path once per mount) and
    prove none is left; raises StillMounted otherwise, so no caller answers "unmounted" over a live mount."""
    point = canonical(path)
    for _ in stacked_at(point):
        umount(point)
    left = stacked_at(point)
    if left:
        raise StillMounted(f"{path} is still mounted ({len(left)} mount(s) of {left[-1].source} at {point}) "
                           f"after unmounting")
