"""Nodelink (docs/compatibility.md#nodelink): each Node is matched to its Machine, by providerID first and then by
InternalIP; the Machine gets `status.nodeRef`, the Node gets the `machine.openshift.io/machine` annotation and
the Machine's `spec.metadata` labels/annotations and `spec.taints` (added, never removed). A Provisioned Machine
gets its nodeRef and the phase Running in one status write."""

from __future__ import annotations

from typing import Iterable

import structlog

from api import keys
from api.machine import MachinePhase
from api.meta import format_time, now, parse_time
from machine_controller.runtime.controller import Controller, Result, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.informer import Informer, Store
from machine_controller.runtime.kube import Rest, is_conflict, object_key, split_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue

from machine_controller.controllers.machine.metrics import MachineMetrics
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.resources import MACHINES, NODES

log = structlog.get_logger(__name__)

INDEX_PROVIDER_ID = "providerID"
INDEX_INTERNAL_IP = "internalIP"
INDEX_NAME = "name"  # Machines by name, in any namespace: a Node is named after its Machine's VM, so after it
# How long after its creation a Node without providerID waits for its Machine's providerID, so that one write gives
# it both the providerID and nodelink's part (nodes.py `link_with`). The Machine gets it when its controller sees the
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


def provider_id_index(obj: dict) -> Iterable[str]:
    pid = (obj.get("spec") or {}).get("providerID")
    return [pid] if pid else []


def internal_ip_index(obj: dict) -> Iterable[str]:
    return [a["address"] for a in (obj.get("status") or {}).get("addresses") or []
            if a.get("type") == "InternalIP" and a.get("address")]


def name_index(obj: dict) -> Iterable[str]:
    return [obj["metadata"]["name"]]


def _provisioned(machine: dict) -> bool:
    """A Provisioned Machine is Running once it has its Node (docs/compatibility.md#machine-phases). A Machine being
    deleted is never matched to a Node (`machine_for`); one deleted since the cache saw it is the guard's."""
    return (machine.get("status") or {}).get("phase") == MachinePhase.PROVISIONED


class AmbiguousMatch(Exception):
    transient = True


class NodeLinkReconciler:
    def __init__(self, rest: Rest, nodes: Store, machines: Store, metrics: MachineMetrics):
        self._rest = rest
        self._nodes = nodes
        self._machines = machines
        self._metrics = metrics
        self._ready_seen: dict[str, str | None] = {}  # node name -> Ready status last written to its Machine
        self._left_to_provider_id_write = False

    def leave_node_part_to_provider_id_write(self) -> None:
        """The node instance controller of this process writes a new Node's providerID with this nodelink's part of
        it (`node_patch_for_provider_id`), woken by the providerID of the Machine of the Node's name
        (nodes.py `wake_on_provider_id`): a Node without providerID whose Machine has one is left to that write."""
        self._left_to_provider_id_write = True

    def machine_for(self, node: dict) -> dict | None:
        """The Machine of `node`: by providerID, only the Machine of the Node's name; else by the Node's first
        InternalIP, unless that Machine is linked to another Node that is still there. A providerID and an address
        are hints that a copied manifest carries; the name is the proof: the VM of a Machine's providerID bears the
        Machine's name, and a Node's VM is the VM of its name (docs/architecture.md#acting-only-on-what-is-ours)."""
        name = node["metadata"]["name"]
        pid = (node.get("spec") or {}).get("providerID")
        by_pid = self._live_matches(node, self._machines.by_index(INDEX_PROVIDER_ID, pid) if pid else [])
        if by_pid is not None:
            if by_pid["metadata"]["name"] != name:
                # Another Node carries the VM id of this Machine (a copied Node manifest); the node controller warns
                # on it (InstanceNotOwned). It is neither linked nor written to, whether or not the Machine's own
                # Node has its providerID yet.
                log.warning("node carries the providerID of a machine of another name; not linking it", node=name,
                            machine=object_key(by_pid), provider_id=pid)
                return None
            return by_pid
        ips = list(internal_ip_index(node))
        by_ip = self._live_matches(node, self._machines.by_index(INDEX_INTERNAL_IP, ips[0]) if ips else [])
        if by_ip is not None and self._linked_elsewhere(by_ip, name):
            # An address moves no link: the Node linked first may be the one of the Machine's name still waiting for
            # its providerID (docs/compatibility.md#node-controllers).
            log.warning("node shares the address of a machine linked to another node; not linking it", node=name,
                        machine=object_key(by_ip), address=ips[0])
            return None
        return by_ip

    @staticmethod
    def _live_matches(node: dict, machines: Iterable[dict]) -> dict | None:
        candidates = [m for m in machines if not m["metadata"].get("deletionTimestamp")]
        if len(candidates) > 1:
            names = ", ".join(object_key(m) for m in candidates)
            raise AmbiguousMatch(f"node {node['metadata']['name']} matches several machines: {names}")
        return candidates[0] if candidates else None

    def _linked_elsewhere(self, machine: dict, node_name: str) -> bool:
        """Whether `machine`'s nodeRef names a Node other than `node_name` that is there and not being deleted."""
        ref = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        if not ref or ref == node_name:
            return False
        other = self._nodes.get(ref)
        return other is not None and not other["metadata"].get("deletionTimestamp")

    def nodes_for_machine(self, machine: dict) -> list[str]:
        """Machine events map to the Node(s) they may link to."""
        names = set()
        ref = (machine.get("status") or {}).get("nodeRef") or {}
        if ref.get("name"):
            names.add(ref["name"])
        for pid in provider_id_index(machine):
            names.update(n["metadata"]["name"] for n in self._nodes.by_index(INDEX_PROVIDER_ID, pid))
        for ip in internal_ip_index(machine):
            names.update(n["metadata"]["name"] for n in self._nodes.by_index(INDEX_INTERNAL_IP, ip))
        return sorted(names)

    def node_for_new_machine(self, machine_key: str, provider_id: str | None, addresses: list[dict]) -> dict | None:
        """The Node this nodelink would link the Machine `machine_key` to once its providerID and addresses are
        written, for the Machine controller to write the nodeRef with them when the Node registered first
        (machine.py, docs/compatibility.md#nodelink): the one Node not being deleted that carries `provider_id` and
        bears the Machine's name, else the one whose first InternalIP is one of the Machine's and that carries no
        providerID yet. None when there is none or several, or when another Machine (not being deleted) matches that
        Node by its providerID or its InternalIP: nodelink then decides, as it does today."""
        def live(nodes: Iterable[dict]) -> list[dict]:
            return [n for n in nodes if not n["metadata"].get("deletionTimestamp")]
        _, machine_name = split_key(machine_key)
        nodes = [n for n in live(self._nodes.by_index(INDEX_PROVIDER_ID, provider_id) if provider_id else [])
                 if n["metadata"]["name"] == machine_name]  # of another name, not the Machine's (`machine_for`)
        if not nodes:
            ips = {a["address"] for a in addresses if a.get("type") == "InternalIP" and a.get("address")}
            by_name = {n["metadata"]["name"]: n for ip in sorted(ips)
                       for n in live(self._nodes.by_index(INDEX_INTERNAL_IP, ip))
                       if list(internal_ip_index(n))[0] in ips
                       and not (n.get("spec") or {}).get("providerID")}
            nodes = list(by_name.values())
        if len(nodes) != 1:
            return None
        node = nodes[0]
        pid = (node.get("spec") or {}).get("providerID")
        node_ips = list(internal_ip_index(node))
        claimants = [*(self._machines.by_index(INDEX_PROVIDER_ID, pid) if pid else []),
                     *(self._machines.by_index(INDEX_INTERNAL_IP, node_ips[0]) if node_ips else [])]
        if any(object_key(m) != machine_key and not m["metadata"].get("deletionTimestamp") for m in claimants):
            return None
        return node

    def machine_provisioning_for(self, node_name: str) -> bool:
        """Whether the one Machine of the Node's name (not being deleted) is still being provisioned and has no
        providerID yet: the providerID write of that Node can then wait for it and carry nodelink's part too
        (nodes.py, docs/compatibility.md#node-controllers)."""
        machines = [m for m in self._machines.by_index(INDEX_NAME, node_name)
                    if not m["metadata"].get("deletionTimestamp")]
        return (len(machines) == 1 and not (machines[0].get("spec") or {}).get("providerID")
                and (machines[0].get("status") or {}).get("phase") in (None, "", MachinePhase.PROVISIONING))

    def reconcile(self, key: str) -> Result | None:
        node = self._nodes.get(key)
        if node is None:
            return None
        machine = self.machine_for(node)
        if machine is None:
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
            # The providerID write of the Node, woken by this Machine's providerID, carries this part (nodes.py);
            # written here too, it would be a second Node write. Left to it for LINK_WAIT_S at most.
            wait = link_wait_left(node)
            if wait > 0:
                return Result(requeue_after=wait)
        patch = self.node_patch(node, machine)
        if patch:
            self._rest.merge_patch(NODES, node["metadata"]["name"], patch)
        return None

    def node_patch(self, node: dict, machine: dict) -> dict:
        """What the Node lacks of its Machine: the Machine annotation, the Machine's `spec.metadata` labels and
        annotations, its taints (added, never removed); guarded by the Node's resourceVersion. {} when nothing."""
        meta = node["metadata"]
        mspec = machine.get("spec") or {}
        wanted_annotations = {keys.ANNOTATION_NODE_MACHINE: object_key(machine),
                              **((mspec.get("metadata") or {}).get("annotations") or {})}
        wanted_labels = (mspec.get("metadata") or {}).get("labels") or {}
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        patch_meta = {}
        ann_diff = {k: v for k, v in wanted_annotations.items() if annotations.get(k) != v}
        lab_diff = {k: v for k, v in wanted_labels.items() if labels.get(k) != v}
        if ann_diff:
            patch_meta["annotations"] = ann_diff
        if lab_diff:
            patch_meta["labels"] = lab_diff
        taints = list((node.get("spec") or {}).get("taints") or [])
        have = {(t.get("key"), t.get("effect")) for t in taints}
        added = [t for t in mspec.get("taints") or [] if (t.get("key"), t.get("effect")) not in have]
        patch: dict = {}
        if patch_meta:
            patch["metadata"] = {**patch_meta, "resourceVersion": meta["resourceVersion"]}
        if added:
            patch.setdefault("metadata", {"resourceVersion": meta["resourceVersion"]})
            patch["spec"] = {"taints": taints + added}  # merge patch replaces the list: send the whole of it
        return patch

    def node_patch_for_provider_id(self, node: dict, pid: str) -> dict:
        """Nodelink's part of the write that gives `node` its providerID `pid` (nodes.py), so that a Node
        registered after its Machine was provisioned gets both in one write (docs/compatibility.md#node-controllers):
        the `node_patch` of the one Machine (not being deleted) whose providerID is `pid`, when it bears the Node's
        name. {} when no Machine or several have it, when it bears another name, or when another Node carries `pid`
        already; nodelink then looks at the Node itself once it has its providerID."""
        name = node["metadata"]["name"]
        if any(n["metadata"]["name"] != name for n in self._nodes.by_index(INDEX_PROVIDER_ID, pid)):
            return {}
        machines = [m for m in self._machines.by_index(INDEX_PROVIDER_ID, pid)
                    if not m["metadata"].get("deletionTimestamp")]
        if len(machines) != 1 or machines[0]["metadata"]["name"] != name:
            return {}  # of another name, the Machine is not this Node's (`machine_for`)
        return self.node_patch(node, machines[0])

    def reconcile_quietly(self, key: str) -> Result | None:
        # A Node changes every heartbeat; a patch guarded by an older resourceVersion then gets 409. That is
        # routine, not an error: look again with the newer Node.
        try:
            return self.reconcile(key)
        except Exception as e:
            if is_conflict(e):
                return Result(requeue=True)
            raise


def add_nodelink_controller(manager: Manager, rest: Rest, machines: Informer, nodes: Informer, queue: WorkQueue,
                            workers: int = 2) -> NodeLinkReconciler:
    """Both informers carry the providerID and InternalIP indexes the matching reads."""
    reconciler = NodeLinkReconciler(rest, nodes.store, machines.store, MachineMetrics.of(manager.registry))
    # What nodelink reads of a Node; heartbeats (status.conditions) do not matter to it.
    nodes.add_handler(when_changed(enqueue_object(queue), ("spec", "providerID"), ("spec", "taints"),
                                   ("status", "addresses"), ("metadata", "labels"), ("metadata", "annotations"),
                                   ("metadata", "deletionTimestamp"), node_ready))
    machines.add_handler(enqueue_mapped(queue, lambda m: [] if m["metadata"].get("deletionTimestamp")
                                        else reconciler.nodes_for_machine(m)))
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile_quietly, workers=workers,
                                      registry=manager.registry))
    return reconciler
