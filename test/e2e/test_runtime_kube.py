"""The JSON REST path, the one write path (runtime/writes.py) and error classification against a real API server."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from machine_controller.runtime.kube import (
    CONFIG_MAPS,
    NODES,
    ErrorKind,
    Resource,
    Rest,
    classify,
    load_api_client,
)
from machine_controller.runtime.writes import Conflict, Gone, write

MACHINES = Resource("machine.openshift.io", "v1beta1", "machines", "Machine")


def test_guarded_status_write_is_optimistic(cluster, namespace):
    cluster.apply_crds()
    rest = Rest(load_api_client(str(cluster.kubeconfig)))
    machine = rest.create(MACHINES, {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                                     "metadata": {"name": "m", "namespace": namespace}, "spec": {}}, namespace)

    patched = write(rest, MACHINES, machine, status={"phase": "Provisioning"}, guarded=True)
    assert patched is not None and patched["status"]["phase"] == "Provisioning"
    assert rest.get(MACHINES, "m", namespace)["status"]["phase"] == "Provisioning"

    with pytest.raises(Conflict):  # `machine` is the version read before: the object moved on since
        write(rest, MACHINES, machine, status={"phase": "Failed"}, guarded=True)
    assert rest.get(MACHINES, "m", namespace)["status"]["phase"] == "Provisioning"
    assert write(rest, MACHINES, patched, status={"phase": "Provisioning"}, guarded=True) is None  # nothing changed

    # Only the changed keys of a map are sent: an annotation another writer set meanwhile stays.
    rest.merge_patch(MACHINES, "m", {"metadata": {"annotations": {"theirs": "1"}}}, namespace)
    write(rest, MACHINES, patched, metadata={"annotations": {"ours": "2"}})
    assert rest.get(MACHINES, "m", namespace)["metadata"]["annotations"] == {"theirs": "1", "ours": "2"}

    # /status ignores spec changes and the main resource ignores status changes (the subresource split).
    rest.merge_patch(MACHINES, "m", {"status": {"phase": "Deleting"}}, namespace)
    assert rest.get(MACHINES, "m", namespace)["status"]["phase"] == "Provisioning"

    rest.delete(MACHINES, "m", namespace)
    with pytest.raises(Gone):
        write(rest, MACHINES, patched, status={"phase": "Running"})


def test_errors_are_classified(cluster, namespace):
    rest = Rest(cluster.api_client())
    with pytest.raises(ApiException) as missing:
        rest.get(CONFIG_MAPS, "nope", namespace)
    assert classify(missing.value) == ErrorKind.NOT_FOUND

    body = {"metadata": {"name": "dup", "namespace": namespace}}
    rest.create(CONFIG_MAPS, body, namespace)
    with pytest.raises(ApiException) as exists:
        rest.create(CONFIG_MAPS, body, namespace)
    assert classify(exists.value) == ErrorKind.ALREADY_EXISTS

    with pytest.raises(ApiException) as invalid:
        rest.create(CONFIG_MAPS, {"metadata": {"name": "Not_A_Valid_Name", "namespace": namespace}}, namespace)
    assert classify(invalid.value) == ErrorKind.INVALID
    assert classify(ConnectionError("reset")) == ErrorKind.TRANSIENT


def test_cluster_scoped_paths(cluster):
    rest = Rest(cluster.api_client())
    listed = rest.request("GET", NODES.path())
    assert "items" in listed and listed["metadata"]["resourceVersion"]
