"""Nodelink (docs/compatibility.md#nodelink): each Node is matched to its Machine, by providerID first and then by
InternalIP; the Machine gets `status.nodeRef`, the Node gets the `machine.openshift.io/machine` annotation and
the Machine's `spec.metadata` labels/annotations and `spec.taints` (added, never removed). A Provisioned Machine
gets its nodeRef and the phase Running in one status write."""

from __future__ import annotations

import structlog

from api.machine import MachinePhase, owned_by_machine_api
from api.meta import format_time, now, parse_time
from machine_controller.controllers.machine.metrics import MachineMetrics
from machine_controller.controllers.nodes.matching import NodeMachineMatching
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.resources import MACHINES, NODES
from machine_controller.runtime import writes
from machine_controller.runtime.controller import Controller, Result, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, is_conflict, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger(__name__)

# How long after its creation a Node without providerID waits for its Machine's providerID, so that one write gives
# it both the providerID and nodelink's part (lifecycle.py). The Machine gets it when its controller sees the
# VM up, seconds after the guest registered (its next list of the cluster's VMs and its pass in the work queue, a few
# seconds each at a thousand Machines: hack/bench/machines.py); a Machine stuck in its provisioning holds no Node back
# for longer.
LINK_WAIT_S = 60.0


def link_wait_left(node: dict) -> float:
    """Seconds left of the Node's LINK_WAIT_S (0 for a Node without creationTimestamp)."""
    created = node["metadata"].get("creationTimestamp")
    if not created:
        return 0.0
    return max(LINK_WAIT_S - (now() - parse_time(created)).total_seconds(), 0.0)


def _provisioned(machine: dict) -> bool:
    """A Provisioned Machine is Running once it has its Node (docs/compatibility.md#machine-phases). A Machine being
    deleted is never matched to a Node (`NodeMachineMatching.machine_for`); one deleted since the cache saw it is
    the guard's."""
    return (machine.get("status") or {}).get("phase") == MachinePhase.PROVISIONED


class NodeLinkReconciler:
    def __init__(self, rest: Rest, nodes: Store, matching: NodeMachineMatching, metrics: MachineMetrics,
                 node_part_left_to_provider_id_write: bool = False):
        """`node_part_left_to_provider_id_write`: the node instance controller runs in this process and writes a
        new Node's providerID with nodelink's part of it (`NodeMachineMatching.node_part_for_provider_id`), woken by
        the providerID of the Machine of the Node's name (lifecycle.py `wake_on_provider_id`): a Node without
        providerID whose Machine has one is left to that write (docs/architecture.md#matching-nodes-and-machines)."""
        self._rest = rest
        self._nodes = nodes
        self._matching = matching
        self._metrics = metrics
        self._ready_seen: dict[str, str | None] = {}  # node name -> Ready status last written to its Machine
        self._left_to_provider_id_write = node_part_left_to_provider_id_write

    def reconcile(self, key: str) -> Result | None:
        node = self._nodes.get(key)
        if node is None:
            return None
        machine = self._matching.machine_for(node)
        if machine is None:
            return None
        if not owned_by_machine_api(machine):
            # Another API's controllers own the Machine (docs/compatibility.md#authoritativeapi): neither it nor
            # its Node is written; given back, its change brings this Node back here.
            return None
        meta = node["metadata"]
        if meta.get("deletionTimestamp"):
            self._ready_seen.pop(meta["name"], None)
            return None
        ref = {"kind": "Node", "name": meta["name"], "uid": meta["uid"]}
        current = (machine.get("status") or {}).get("nodeRef") or {}
        ready = node_ready(node)
        linked = (current.get("name"), current.get("uid")) == (ref["name"], ref["uid"])
        if linked and meta["name"] not in self._ready_seen:
            # Linked before this process saw the Node (by the Machine controller with the phase Running, or before a
            # restart, when the Machine controller looks at every Machine anyway): nothing to rewrite until a flip.
            self._ready_seen[meta["name"]] = ready
        elif not linked or self._ready_seen[meta["name"]] != ready:
            # As MAO's nodelink, nodeRef and lastUpdated are rewritten at every Ready flip of the Node: the Machine
            # changes, so the Machine controller looks at its instance again (a VM gone, a node unreachable).
            self._link(machine, ref, running=not linked and _provisioned(machine))
            self._ready_seen[meta["name"]] = ready
            if not linked:
                log.info("linked machine to node", machine=object_key(machine), node=meta["name"])
        return self._sync_node(node, machine)

    def _link(self, machine: dict, ref: dict, running: bool) -> None:
        """Write nodeRef and lastUpdated; with `running`, the phase Running too, in the same write, which the
        Machine controller would otherwise make next (docs/compatibility.md#nodelink). That write is guarded by the
        resourceVersion nodelink saw Provisioned: a Machine changed meanwhile (failed, deleted) gets 409 and is
        looked at again, never Running from a stale view. The phase change is observed here, as the Machine
        controller observes its own, so each Machine reaching Running counts once."""
        # Sent whole, not as `writes.write`'s changed fields: at a Ready flip nothing of the status may differ
        # within the second of lastUpdated, and the write is still made, as MAO's nodelink makes it.
        mm = machine["metadata"]
        status = {"nodeRef": ref, "lastUpdated": format_time(now())}
        patch: dict = {"status": status}
        if running:
            status["phase"] = MachinePhase.RUNNING
            patch["metadata"] = {"resourceVersion": mm["resourceVersion"]}
        self._rest.merge_patch(MACHINES, mm["name"], patch, mm["namespace"], subresource="status")
        if running:
            self._metrics.observe_phase(MachinePhase.RUNNING, mm.get("creationTimestamp"))
            log.info("phase changed", machine=object_key(machine), old=MachinePhase.PROVISIONED,
                     new=MachinePhase.RUNNING)

    def _sync_node(self, node: dict, machine: dict) -> Result | None:
        if self._left_to_provider_id_write and not (node.get("spec") or {}).get("providerID") \
                and machine["metadata"]["name"] == node["metadata"]["name"] \
                and (machine.get("spec") or {}).get("providerID"):
            # The providerID write of the Node, woken by this Machine's providerID, carries this part (lifecycle.py);
            # written here too, it would be a second Node write. Left to it for LINK_WAIT_S at most.
            wait = link_wait_left(node)
            if wait > 0:
                return Result(requeue_after=wait)
        part = NodeMachineMatching.node_part(node, machine)
        if part:
            # Guarded by the Node's resourceVersion: the taints are sent whole, from the Node this pass read.
            writes.write(self._rest, NODES, node, metadata=part.metadata, spec=part.spec, guarded=True)
        return None

    def reconcile_quietly(self, key: str) -> Result | None:
        # A Node changes every heartbeat; a patch guarded by an older resourceVersion then gets 409. That is
        # routine, not an error: look again with the newer Node.
        try:
            return self.reconcile(key)
        except writes.Conflict:
            return Result(requeue=True)
        except Exception as e:
            if is_conflict(e):
                return Result(requeue=True)
            raise


def add_nodelink_controller(manager: Manager, rest: Rest, machines: Informer, nodes: Informer,
                            matching: NodeMachineMatching, queue: WorkQueue, workers: int = 2,
                            node_part_left_to_provider_id_write: bool = False) -> NodeLinkReconciler:
    """`matching` reads the informers' stores (app.py)."""
    reconciler = NodeLinkReconciler(rest, nodes.store, matching, MachineMetrics.of(manager.registry),
                                    node_part_left_to_provider_id_write)
    # What nodelink reads of a Node; heartbeats (status.conditions) do not matter to it.
    nodes.add_handler(when_changed(enqueue_object(queue), ("spec", "providerID"), ("spec", "taints"),
                                   ("status", "addresses"), ("metadata", "labels"), ("metadata", "annotations"),
                                   ("metadata", "deletionTimestamp"), node_ready))
    machines.add_handler(enqueue_mapped(queue, lambda m: [] if m["metadata"].get("deletionTimestamp")
                                        else matching.nodes_for_machine(m)))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile_quietly, workers=workers,
                                      registry=manager.registry))
    return reconciler
