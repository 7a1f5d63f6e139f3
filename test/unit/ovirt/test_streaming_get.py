"""A cluster's VM list is read as curl receives it, never held whole (machine_controller/ovirt/streaming_get.py),
through the unmodified SDK against the simulator: the same records as the whole answer gives, also when the SDK sends
the request again after renewing its token, and a reader's own error is the error of the call."""

from __future__ import annotations

import ovirtsdk4.types as types
import pytest
from ovirtsdk4 import http as sdk_http

from hack import ovirt_install
from machine_controller.ovirt.errors import OvirtError
from machine_controller.ovirt.vm_list_reader import ListedVm, VmListReader
from vm_list_xml import read_vms

FOLLOW = "reported_devices,tags,disk_attachments.disk"


class _Pieces(VmListReader):
    """The controller's reader, telling how its answer came."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[int] = []

    def feed(self, piece: bytes) -> None:
        self.pieces.append(len(piece))
        super().feed(piece)


def _cluster_with_vms(sim, count: int) -> tuple[str, bytes]:
    """The name of a cluster holding `count` VMs, and its list as the engine answers it, whole."""
    conn = sim.connection()
    try:
        inst = ovirt_install.prepare(conn, "infra-1")
        vms = conn.system_service().vms_service()
        for i in range(count):
            vms.add(types.Vm(name=f"w{i}", cluster=types.Cluster(id=inst.cluster_id),
                             template=types.Template(name=inst.template_name)))
        cluster = conn.system_service().clusters_service().cluster_service(inst.cluster_id).get().name
        response = conn.wait(conn.send(sdk_http.Request(method="GET", path="/vms",
                                                        query={"search": f"cluster={cluster}", "follow": FOLLOW})))
        assert response.code == 200
        return cluster, response.body
    finally:
        conn.close()


def _records(vms: list[ListedVm]) -> dict[str, tuple]:
    # The disks of new VMs unlock a moment after the create: the states may differ between two lists.
    return {v.id: (v.name, tuple(a.id for a in v.disk_attachments or ())) for v in vms}


def test_a_list_is_read_in_pieces_as_it_arrives_into_the_records_of_the_whole_answer(sim_and_client):
    sim, ovirt = sim_and_client
    cluster, whole = _cluster_with_vms(sim, 24)
    assert len(whole) > 64 * 1024  # more than curl gives a write at once
    readers: list[_Pieces] = []

    def new_reader() -> _Pieces:
        readers.append(_Pieces())
        return readers[-1]
    listed = ovirt.cluster_vms(cluster, new_reader)

    assert len(listed) == 24 and _records(listed) == _records(read_vms(whole))
    [reader] = readers
    assert len(reader.pieces) > 1 and max(reader.pieces) < len(whole)


def test_an_answer_the_sdk_fetched_again_after_renewing_its_token_is_read_whole(sim_and_client):
    sim, ovirt = sim_and_client
    cluster, whole = _cluster_with_vms(sim, 3)
    ovirt.cluster_vms(cluster, VmListReader)  # the pooled connection has its token
    assert sim.control.expire_tokens() >= 1
    sim.control.reset_counts()
    readers: list[_Pieces] = []

    def new_reader() -> _Pieces:
        readers.append(_Pieces())
        return readers[-1]
    listed = ovirt.cluster_vms(cluster, new_reader)

    assert _records(listed) == _records(read_vms(whole))
    counts = sim.control.counts()
    assert counts.get("GET /vms") == 2 and counts.get("POST /sso/oauth/token") == 1  # 401, a new token, again
    [reader] = readers  # one call: the SDK sent the request again itself, and its 401 was never read as a list
    assert reader.pieces


def test_a_readers_error_is_the_calls_error_and_the_connection_serves_the_next_call(sim_and_client):
    sim, ovirt = sim_and_client
    cluster, _ = _cluster_with_vms(sim, 2)

    class Refusing(VmListReader):
        def feed(self, piece: bytes) -> None:
            raise ValueError("The text 'yes' isn't a valid boolean value")

    with pytest.raises(OvirtError, match="list VMs of cluster .*: The text 'yes' isn't a valid boolean value"):
        ovirt.cluster_vms(cluster, Refusing)
    assert len(ovirt.cluster_vms(cluster, VmListReader)) == 2
