"""The runtime's own API calls (Lease election, Events, list+watch) fit the shipped RBAC (config/rbac), run as the
controller's restricted identity in openshift-machine-api."""

from __future__ import annotations

import uuid
from pathlib import Path

from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer
from machine_controller.runtime.kube import EVENTS, Resource, Rest
from machine_controller.runtime.leader_election import LeaderElectionConfig, LeaderElector

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "openshift-machine-api"
MACHINES = Resource("machine.openshift.io", "v1beta1", "machines", "Machine")


def test_runtime_calls_are_allowed_by_the_shipped_rbac(cluster):
    cluster.apply_crds()
    cluster.ensure_namespace(NAMESPACE)
    cluster.kubectl("apply", "-k", str(REPO / "config" / "rbac"))
    admin = Rest(cluster.api_client())
    suffix = uuid.uuid4().hex[:6]
    machine = admin.create(MACHINES, {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                                      "metadata": {"name": f"rbac-{suffix}", "namespace": NAMESPACE}, "spec": {}},
                           NAMESPACE)
    restricted = cluster.api_client("restricted")
    informer = Informer(restricted, MACHINES, namespace=NAMESPACE)
    elector = LeaderElector(restricted, LeaderElectionConfig(NAMESPACE, f"rbac-{suffix}", "me", 4, 3, 0.5))
    recorder = EventRecorder(restricted, component="rbac-e2e")
    try:
        informer.start()
        assert informer.wait_for_sync(30), "list+watch of Machines"
        assert f"{NAMESPACE}/rbac-{suffix}" in informer.store.keys()

        elector.start()
        assert elector.wait_for_leadership(10), "create/get/update of the Lease"
        elector.stop(release=True)
        assert not admin.get(Resource("coordination.k8s.io", "v1", "leases", "Lease"), f"rbac-{suffix}",
                             NAMESPACE)["spec"].get("holderIdentity")

        recorder.warning(machine, "RBACCheck", "twice")
        recorder.warning(machine, "RBACCheck", "twice")
        assert recorder.flush(30)
        listed = admin.request("GET", EVENTS.path(NAMESPACE),
                               {"fieldSelector": f"involvedObject.name=rbac-{suffix}"})["items"]
        assert [e["count"] for e in listed] == [2], "create then patch of an Event"
    finally:
        recorder.close()
        informer.stop()
        elector.stop(release=False)
        admin.delete(MACHINES, f"rbac-{suffix}", NAMESPACE)
