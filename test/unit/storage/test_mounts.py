"""The mount table as the kernel writes it (machine_controller/storage/mounts.py): escapes decoded, stacked mounts
ordered, and request paths resolved before they are compared (docs/storage.md#mount-points)."""

from __future__ import annotations

import os

from machine_controller.storage import mounts

# Two mounts stacked at one point whose name holds a space and a backslash, listed top first on purpose, and a
# bind mount of a device file.
TABLE = (b"27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
         b"91 90 7:3 / /var/lib/kubelet/x\\040y\\134z rw shared:5 - xfs /dev/loop3 rw\n"
         b"90 27 7:2 / /var/lib/kubelet/x\\040y\\134z rw shared:4 - ext4 /dev/loop\\0402 rw\n"
         b"95 27 0:6 /loop3 /var/lib/kubelet/pods/a\\011b rw - devtmpfs udev rw\n")


def test_fields_are_decoded():
    table = mounts.parse(TABLE)
    assert [m.point for m in table] == ["/", "/var/lib/kubelet/x y\\z", "/var/lib/kubelet/x y\\z",
                                        "/var/lib/kubelet/pods/a\tb"]
    assert table[2].source == "/dev/loop 2" and table[2].device == (7, 2) and table[2].fstype == "ext4"
    assert table[3].root == "/loop3"


def test_stacked_mounts_bottom_first():
    stack = mounts.stacked_at("/var/lib/kubelet/x y\\z", mounts.parse(TABLE))
    assert [m.mount_id for m in stack] == [90, 91]


def test_request_path_is_resolved_before_comparing(tmp_path):
    real = tmp_path / "real"
    (real / "staging").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    table = mounts.parse(b"27 1 254:0 / / rw - ext4 /dev/vda rw\n" +
                         f"40 27 7:1 / {real}/staging rw - ext4 /dev/loop1 rw\n".encode())
    for asked in (f"{tmp_path}/link/staging", f"{tmp_path}/link/staging/", f"{real}/./staging//"):
        assert [m.mount_id for m in mounts.stacked_at(asked, table)] == [40], asked
    assert mounts.stacked_at(f"{tmp_path}/link", table) == []
    assert os.path.islink(tmp_path / "link")
