"""The providerID and node controllers, in the place of a cloud-controller-manager
(docs/compatibility.md#node-controllers): a new Node gets `spec.providerID` from the instance of its name (the
autoscaler and nodelink match Nodes to Machines by it), and a Node whose instance is really gone is deleted, once
Kubernetes has released its volumes (storage.py).

Unlike the Go controller it replaces, a Node is deleted only when the provider is sure its instance is absent
(by providerID and by name), never on a failed lookup: an engine outage must not empty the cluster.
"""

from __future__ import annotations

import structlog

from api.machine import MachineConditionReason
from machine_controller.controllers.nodes.matching import NodeMachineMatching, NodePart
from machine_controller.controllers.nodes.nodelink import link_wait_left
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.nodes.storage import hold_for_volumes
from machine_controller.controllers.provider import InstanceNotOwned, Instances
from machine_controller.controllers.resources import NODES
from machine_controller.runtime import writes
from machine_controller.runtime.controller import (
    Controller,
    OwnWrites,
    Result,
    enqueue_mapped,
    enqueue_object,
    unless_own_write,
    when_changed,
)
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, is_not_found
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger(__name__)
DOWN_RECHECK_S = 60.0  # the Go node controller's recheck of a Node whose instance is stopped


class NodeInstanceReconciler:
    def __init__(self, rest: Rest, nodes: Store, instances: Instances, events: EventRecorder,
                 matching: NodeMachineMatching | None = None):
        """`matching`: given when nodelink runs in this process (app.py). Its part of a Node (the Machine
        annotation, labels, taints) then goes in the write of the providerID when the Machine already has that
        providerID: one Node write instead of two. A Node registered while its Machine is still being provisioned
        waits for the Machine's providerID, up to LINK_WAIT_S after its creation, and is woken by it
        (docs/compatibility.md#node-controllers, docs/architecture.md#matching-nodes-and-machines)."""
        self._rest = rest
        self._nodes = nodes
        self._instances = instances
        self._events = events
        self._matching = matching
        # The echo of our providerID write: its instance was found a moment ago.
        self.own_writes = OwnWrites()

    def _link_wait(self, node: dict) -> float:
        """Seconds this Node without providerID still waits for its Machine's providerID; 0: it does not."""
        if self._matching is None or not self._matching.machine_provisioning_for(node["metadata"]["name"]):
            return 0.0
        return link_wait_left(node)

    def reconcile(self, key: str) -> Result | None:
        node = self._nodes.get(key)
        if node is None or node["metadata"].get("deletionTimestamp"):
            return None
        name = node["metadata"]["name"]
        pid = (node.get("spec") or {}).get("providerID") or ""
        if pid and not self._instances.owns(pid):
            return None  # another provider's Node
        if not pid and (wait := self._link_wait(node)) > 0:
            return Result(requeue_after=wait)  # its Machine's providerID wakes it before (`wake_on_provider_id`)
        try:
            instance = self._instances.find(name, pid or None)
        except InstanceNotOwned as e:
            # A Node's providerID cannot be changed once set: it is reported, and the Node is neither deleted nor
            # watched for that instance (docs/architecture.md#acting-only-on-what-is-ours).
            self._events.warning(node, MachineConditionReason.INSTANCE_NOT_OWNED, str(e))
            log.warning("node names an instance that is not its own", node=name, provider_id=pid)
            return None
        if not pid:
            if instance is None:
                return None  # not an instance of ours (yet); a later Node event brings us back
            part = (self._matching.node_part_for_provider_id(node, instance.provider_id)
                    if self._matching is not None else NodePart())
            try:
                written = writes.write(self._rest, NODES, node, metadata=part.metadata or None,
                                       spec={**part.spec, "providerID": instance.provider_id}, guarded=bool(part))
            except writes.Conflict:
                # Only nodelink's part is guarded (it is read from this Node, and its taints are sent whole): the
                # Node changed meanwhile; look again, with the queue's backoff, as nodelink does.
                return Result(requeue=True)
            if written is not None:
                self.own_writes.record(written)
            log.info("set node providerID", node=name, provider_id=instance.provider_id, linked=bool(part))
            return None
        if instance is None:
            # Its volumes first: deleted at once, the Node would leave them attached for Kubernetes' six minutes.
            held = hold_for_volumes(self._rest, node, self._events, node, "its instance no longer exists")
            if held is not None:
                return held
            self._events.normal(node, "DeletingNode",
                                f"the instance of node {name} no longer exists; deleting the Node")
            try:
                self._rest.delete(NODES, name)
            except Exception as e:
                if not is_not_found(e):
                    raise
            log.info("deleted node whose instance is gone", node=name)
            return None
        if not instance.running:
            return Result(requeue_after=DOWN_RECHECK_S)
        return None


def wake_on_provider_id(machines: Informer, nodes: Store, queue: WorkQueue) -> None:
    """A Machine that gets its providerID wakes the Node of its name that has none yet, which may be waiting for
    it (`NodeInstanceReconciler._link_wait`)."""
    def node_of(machine: dict) -> list[str]:
        node = nodes.get(machine["metadata"]["name"])
        return [] if node is None or (node.get("spec") or {}).get("providerID") else [node["metadata"]["name"]]
    machines.add_handler(when_changed(enqueue_mapped(queue, node_of), ("spec", "providerID")))


def add_node_instance_controller(manager: Manager, rest: Rest, nodes: Informer, instances: Instances,
                                 events: EventRecorder, queue: WorkQueue, workers: int = 2,
                                 matching: NodeMachineMatching | None = None) -> NodeInstanceReconciler:
    """A Node is looked up when it appears, when its providerID or readiness changes (an instance that stopped
    or vanished makes its Node NotReady/Unknown), and at every resync; heartbeats alone do not cost a lookup."""
    reconciler = NodeInstanceReconciler(rest, nodes.store, instances, events, matching)
    nodes.add_handler(unless_own_write(when_changed(enqueue_object(queue), ("spec", "providerID"), node_ready),
                                       reconciler.own_writes))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
