"""The CSI Controller service's requests (machine_controller/storage/csi/controller.py, volumes.py): whatever
name, capacity range, parameters, capabilities and ids a CreateVolume, ControllerExpandVolume, DeleteVolume or
ControllerPublishVolume carries, the call answers or refuses with the status the CSI spec names for bad input, never
INTERNAL (an unexpected exception); and what it would send the engine is well formed: ids in paths are UUIDs,
searches quoted literals, sizes whole MiB within the capacity range and int64 (docs/storage.md#csi-error-codes)."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from machine_controller.storage.csi import spec
from machine_controller.storage.csi.controller import controller_servicer
from machine_controller.storage.disks import MIB, Disks

from .engine import RecordingClient
from .strategies import INT64_MAX, texts, uuids

PB, PB_GRPC = spec.load()
# What the spec lets a driver answer to input it refuses (bad arguments, a size it cannot give, a name taken).
REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION}

_bytes = st.one_of(st.integers(-(2**63), INT64_MAX), st.integers(0, 10 * 2**30),
                   st.sampled_from([0, 1, MIB - 1, MIB, MIB + 1, INT64_MAX - MIB, INT64_MAX // MIB * MIB,
                                    INT64_MAX // MIB * MIB + 1, INT64_MAX]))
_capacity = st.builds(lambda r, lim: PB.CapacityRange(required_bytes=r, limit_bytes=lim), _bytes, _bytes)
_PARAMETER_KEYS = ["storageDomainName", "ovirtStorageDomain", "thinProvisioning", "fsType",
                   "csi.storage.k8s.io/fstype", "csi.storage.k8s.io/pvc/name", "csi.storage.k8s.io/pvc/namespace"]
_parameters = st.dictionaries(st.sampled_from(_PARAMETER_KEYS) | texts,
                              st.sampled_from(["nfs-data", "true", "false", "ext4", "xfs", "*"]) | texts, max_size=4)
_MODES = list(PB.VolumeCapability.AccessMode.Mode.values())
_capability = st.builds(
    lambda mode, block, fs: PB.VolumeCapability(
        access_mode=PB.VolumeCapability.AccessMode(mode=mode),
        **({"block": PB.VolumeCapability.BlockVolume()} if block else
           {"mount": PB.VolumeCapability.MountVolume(fs_type=fs)})),
    st.sampled_from(_MODES), st.booleans(), st.sampled_from(["", "ext4", "xfs", "XFS", "btrfs"]) | texts)
_ids = st.one_of(uuids, texts)


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code


class _Context:
    def time_remaining(self):
        return None

    def abort(self, code, message):
        raise _Aborted(code, message)


def _call(method: str, request):
    """(response or None, status code, what the engine would have been sent)."""
    client = RecordingClient()
    servicer = controller_servicer(PB, PB_GRPC, Disks(client))
    try:
        response, code = getattr(servicer, method)(request, _Context()), grpc.StatusCode.OK
    except _Aborted as e:
        response, code = None, e.code
        assert code in REFUSALS, e
    client.requests.well_formed()
    return response, code, client.requests


@given(st.one_of(uuids.map(lambda u: "pvc-" + u), texts), st.one_of(st.none(), _capacity), _parameters,
       st.lists(_capability, max_size=2))
def test_create_volume_answers_or_refuses_and_sends_a_well_formed_disk(name, capacity, parameters, capabilities):
    request = PB.CreateVolumeRequest(name=name, parameters=parameters, volume_capabilities=capabilities,
                                     **({"capacity_range": capacity} if capacity is not None else {}))
    response, code, sent = _call("CreateVolume", request)
    if response is None:
        assert not sent.sizes  # a refused volume is never made
        return
    size = response.volume.capacity_bytes
    assert sent.sizes == [size] and size % MIB == 0 and 0 < size <= INT64_MAX
    if capacity is not None:
        assert size >= capacity.required_bytes and (not capacity.limit_bytes or size <= capacity.limit_bytes)


@given(_ids, _capacity)
def test_expand_volume_answers_or_refuses_with_a_well_formed_size(volume_id, capacity):
    response, code, sent = _call("ControllerExpandVolume",
                                 PB.ControllerExpandVolumeRequest(volume_id=volume_id, capacity_range=capacity))
    if response is not None:
        assert response.capacity_bytes % MIB == 0 and response.capacity_bytes >= capacity.required_bytes


@given(_ids, _ids, _capability, st.booleans())
def test_publish_and_delete_touch_only_uuids(volume_id, node_id, capability, readonly):
    _call("ControllerPublishVolume", PB.ControllerPublishVolumeRequest(
        volume_id=volume_id, node_id=node_id, volume_capability=capability, readonly=readonly))
    _call("DeleteVolume", PB.DeleteVolumeRequest(volume_id=volume_id))


@pytest.mark.parametrize("required, limit", [(INT64_MAX, 0), (INT64_MAX // MIB * MIB + 1, 0)])
def test_a_size_that_rounds_past_int64_is_out_of_range(required, limit):
    request = PB.CreateVolumeRequest(name="pvc-1", parameters={"storageDomainName": "nfs-data"},
                                     volume_capabilities=[PB.VolumeCapability(
                                         access_mode=PB.VolumeCapability.AccessMode(mode="SINGLE_NODE_WRITER"),
                                         mount=PB.VolumeCapability.MountVolume())],
                                     capacity_range=PB.CapacityRange(required_bytes=required, limit_bytes=limit))
    assert _call("CreateVolume", request)[1] == grpc.StatusCode.OUT_OF_RANGE
