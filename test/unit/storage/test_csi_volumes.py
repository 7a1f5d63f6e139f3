"""What a CSI volume of this driver can be asked for, checked without an engine: the StorageClass parameters are
the one list docs/storage.md gives, and no size beyond int64 leaves the rounding.
"""

from __future__ import annotations

import re
from pathlib import Path

import grpc
import pytest

from machine_controller.storage.csi import spec
from machine_controller.storage.csi.errors import CsiError, status_of
from machine_controller.storage.csi.volumes import PARAMETERS, check_parameters, size_for
from machine_controller.storage.disks import MAX_DISK_BYTES, MIB, DiskSizeOutOfRange, round_size

DOCS = Path(__file__).resolve().parents[3] / "docs" / "storage.md"


def documented_parameters() -> list[str]:
    """The keys of the table under "## StorageClass parameters" in docs/storage.md."""
    section = DOCS.read_text().split("\n## StorageClass parameters\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)


def test_the_docs_and_the_code_list_the_same_parameters():
    assert documented_parameters() == list(PARAMETERS)


@pytest.fixture(scope="module")
def pb():
    return spec.load()[0]


def mount(pb, fs: str = ""):
    return pb.VolumeCapability(mount=pb.VolumeCapability.MountVolume(fs_type=fs),
                               access_mode=pb.VolumeCapability.AccessMode(mode="SINGLE_NODE_WRITER"))


def refusal(pb, params: dict, caps: list | None = None) -> str:
    with pytest.raises(CsiError) as e:
        check_parameters(pb, params, caps if caps is not None else [mount(pb, "ext4")])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return str(e.value)


def test_keys_outside_the_list_are_refused_naming_the_documented_key(pb):
    base = {"storageDomainName": "nfs-data"}
    # The FlexVolume classes' keys: accepted before and then ignored (fsType) or taken (ovirtStorageDomain).
    assert "csi.storage.k8s.io/fstype" in refusal(pb, {**base, "fsType": "xfs"})
    assert "storageDomainName" in refusal(pb, {"ovirtStorageDomain": "nfs-data"})
    assert "color" in refusal(pb, {**base, "color": "blue"})
    assert "storageDomainName" in refusal(pb, {})


def test_the_fstype_parameter_is_honoured_through_the_capability(pb):
    base = {"storageDomainName": "nfs-data", "csi.storage.k8s.io/fstype": "xfs"}
    # The filesystem the class asks for is the one the volume capability carries (the node makes that one).
    params = check_parameters(pb, base, [mount(pb, "xfs")])
    assert params.fs_type == "xfs" and params.storage_domain == "nfs-data" and params.thin
    # A capability asking for another one, or for none (the node's default, ext4), contradicts the class.
    assert "xfs" in refusal(pb, base, [mount(pb, "ext4")])
    assert "xfs" in refusal(pb, base, [mount(pb, "")])
    assert "btrfs" in refusal(pb, {**base, "csi.storage.k8s.io/fstype": "btrfs"}, [mount(pb, "btrfs")])
    # Block volumes have no filesystem; other sidecar keys are the sidecars' own.
    block = pb.VolumeCapability(block=pb.VolumeCapability.BlockVolume(),
                                access_mode=pb.VolumeCapability.AccessMode(mode="SINGLE_NODE_WRITER"))
    assert check_parameters(pb, {**base, "csi.storage.k8s.io/pvc/name": "data"}, [block]).fs_type == "xfs"
    assert check_parameters(pb, {"storageDomainName": "nfs-data"}, [mount(pb, "")]).fs_type == "ext4"


def test_rounding_never_gives_a_size_beyond_int64(pb):
    assert round_size(MAX_DISK_BYTES) == MAX_DISK_BYTES
    assert round_size(MAX_DISK_BYTES - MIB + 1) == MAX_DISK_BYTES
    for too_big in (MAX_DISK_BYTES + 1, 2**63 - 1, 2**63, 2**64):
        with pytest.raises(DiskSizeOutOfRange) as e:
            round_size(too_big)
        assert str(too_big) in str(e.value) and status_of(e.value)[0] == grpc.StatusCode.OUT_OF_RANGE
    with pytest.raises(Exception) as e:
        size_for(pb.CapacityRange(required_bytes=2**63 - 1))
    assert status_of(e.value)[0] == grpc.StatusCode.OUT_OF_RANGE
