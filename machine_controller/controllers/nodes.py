"""The oVirt providerID and node controllers (reference machine-api.md 5): they replace a cloud-controller-
manager for oVirt. A new Node gets `spec.providerID = ovirt://<vm-id>` from the VM of its name (the autoscaler
and nodelink match Nodes to Machines by it); a Node whose VM is really gone is deleted.

Unlike the Go controller, a Node is deleted only when the VM is absent both by id and by name, and never on a
failed lookup (an engine outage must not empty the cluster, reference 6.2 item 11).
"""

from __future__ import annotations

import structlog
from kubernetes.client.exceptions import ApiException

import ovirtsdk4.types as types

from machine_controller.ovirt.actuator import PROVIDER_ID_PREFIX, provider_id
from machine_controller.ovirt.client import OvirtClient
from machine_controller.runtime.controller import Result
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import Rest

from .resources import NODES

log = structlog.get_logger(__name__)
DOWN_RECHECK_S = 60.0  # the Go node controller's recheck of a Node whose VM is down


class OvirtNodeReconciler:
    def __init__(self, rest: Rest, nodes: Store, client: OvirtClient, events: EventRecorder):
        self._rest = rest
        self._nodes = nodes
        self._client = client
        self._events = events

    def reconcile(self, key: str) -> Result | None:
        node = self._nodes.get(key)
        if node is None or node["metadata"].get("deletionTimestamp"):
            return None
        name = node["metadata"]["name"]
        pid = (node.get("spec") or {}).get("providerID") or ""
        if not pid:
            vm = self._client.vm_by_name(name)
            if vm is None:
                return None  # not an oVirt VM of ours (yet); a later Node event brings us back
            self._rest.merge_patch(NODES, name, {"spec": {"providerID": provider_id(vm.id)}})
            log.info("set node providerID", node=name, vm_id=vm.id)
            return None
        if not pid.startswith(PROVIDER_ID_PREFIX):
            return None
        vm = self._client.vm(pid[len(PROVIDER_ID_PREFIX):]) or self._client.vm_by_name(name)
        if vm is None:
            self._events.normal(node, "DeletingNode", f"oVirt VM of node {name} no longer exists; deleting the Node")
            try:
                self._rest.delete(NODES, name)
            except ApiException as e:
                if e.status != 404:
                    raise
            log.info("deleted node whose VM is gone", node=name)
            return None
        if vm.status == types.VmStatus.DOWN:
            return Result(requeue_after=DOWN_RECHECK_S)
        return None
