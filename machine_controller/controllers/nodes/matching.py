"""Which Machine a Node belongs to and back, and what a Node's part of that link is
(docs/architecture.md#matching-nodes-and-machines): one stateless service over the Machine and Node informers'
stores, built once by app.py and handed to every reconciler that needs it (nodelink, the node instance controller,
the Machine controller). It holds nothing but the two stores, so two reconcilers asking it the same question of
the same caches get the same answer, and none of them holds another's method.

A providerID and an address are hints that a copied manifest carries; the name is the proof: the VM of a
Machine's providerID bears the Machine's name, and a Node's VM is the VM of its name
(docs/architecture.md#acting-only-on-what-is-ours)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import structlog

from api import keys
from api.machine import MachinePhase, owned_by_machine_api
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import object_key, split_key

log = structlog.get_logger(__name__)

INDEX_PROVIDER_ID = "providerID"
INDEX_INTERNAL_IP = "internalIP"
INDEX_NAME = "name"  # Machines by name, in any namespace: a Node is named after its Machine's VM, so after it


def provider_id_index(obj: dict) -> Iterable[str]:
    pid = (obj.get("spec") or {}).get("providerID")
    return [pid] if pid else []


def internal_ip_index(obj: dict) -> Iterable[str]:
    return [a["address"] for a in (obj.get("status") or {}).get("addresses") or []
            if a.get("type") == "InternalIP" and a.get("address")]


def name_index(obj: dict) -> Iterable[str]:
    return [obj["metadata"]["name"]]


class AmbiguousMatch(Exception):
    transient = True


@dataclass(frozen=True)
class NodePart:
    """The fields of a Node its Machine asks for (docs/compatibility.md#nodelink), for `runtime.writes.write` to
    send only what the Node lacks: the Machine annotation and the Machine's `spec.metadata` annotations and labels
    (merged key by key), and in `spec` the Node's taints with the Machine's added (a merge patch replaces a list,
    so the whole of it; absent when nothing is added: taints are never removed). Empty maps are left out, so a
    Node that has it all gets no write."""

    metadata: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.metadata or self.spec)


def _live(objs: Iterable[dict]) -> list[dict]:
    return [o for o in objs if not o["metadata"].get("deletionTimestamp")]


class NodeMachineMatching:
    """The Node <-> Machine fold over the informers' stores; both carry the providerID and InternalIP indexes,
    the Machines' the name index too (app.py)."""

    def __init__(self, machines: Store, nodes: Store):
        self._machines = machines
        self._nodes = nodes

    def machine_for(self, node: dict) -> dict | None:
        """The Machine of `node`: by providerID, only the Machine of the Node's name; else by the Node's first
        InternalIP, unless that Machine is linked to another Node that is still there. A Machine being deleted is
        never matched. Raises AmbiguousMatch when several Machines match."""
        name = node["metadata"]["name"]
        pid = (node.get("spec") or {}).get("providerID")
        by_pid = self._one(node, self._machines.by_index(INDEX_PROVIDER_ID, pid) if pid else [])
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
        by_ip = self._one(node, self._machines.by_index(INDEX_INTERNAL_IP, ips[0]) if ips else [])
        if by_ip is not None and self._linked_elsewhere(by_ip, name):
            # An address moves no link: the Node linked first may be the one of the Machine's name still waiting for
            # its providerID (docs/compatibility.md#node-controllers).
            log.warning("node shares the address of a machine linked to another node; not linking it", node=name,
                        machine=object_key(by_ip), address=ips[0])
            return None
        return by_ip

    @staticmethod
    def _one(node: dict, machines: Iterable[dict]) -> dict | None:
        candidates = _live(machines)
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
        """The names of the Node(s) a Machine may link to: its nodeRef's, and those sharing its providerID or one
        of its InternalIPs (a Machine event maps to them)."""
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
        """The Node nodelink would link the Machine `machine_key` to once its providerID and addresses are written,
        for the Machine controller to write the nodeRef with them when the Node registered first
        (docs/compatibility.md#nodelink): the one Node not being deleted that carries `provider_id` and bears the
        Machine's name, else the one whose first InternalIP is one of the Machine's and that carries no providerID
        yet. None when there is none or several, or when another Machine (not being deleted) matches that Node by
        its providerID or its InternalIP: nodelink then decides."""
        _, machine_name = split_key(machine_key)
        nodes = [n for n in _live(self._nodes.by_index(INDEX_PROVIDER_ID, provider_id) if provider_id else [])
                 if n["metadata"]["name"] == machine_name]  # of another name, not the Machine's (`machine_for`)
        if not nodes:
            ips = {a["address"] for a in addresses if a.get("type") == "InternalIP" and a.get("address")}
            by_name = {n["metadata"]["name"]: n for ip in sorted(ips)
                       for n in _live(self._nodes.by_index(INDEX_INTERNAL_IP, ip))
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
        if any(object_key(m) != machine_key for m in _live(claimants)):
            return None
        return node

    def machine_provisioning_for(self, node_name: str) -> bool:
        """Whether the one Machine of the Node's name (not being deleted) is still being provisioned and has no
        providerID yet: the providerID write of that Node can then wait for it and carry nodelink's part too
        (docs/compatibility.md#node-controllers)."""
        machines = _live(self._machines.by_index(INDEX_NAME, node_name))
        return (len(machines) == 1 and owned_by_machine_api(machines[0])
                and not (machines[0].get("spec") or {}).get("providerID")
                and (machines[0].get("status") or {}).get("phase") in (None, "", MachinePhase.PROVISIONING))

    @staticmethod
    def node_part(node: dict, machine: dict) -> NodePart:
        """What `node` should hold of its `machine` (`NodePart`)."""
        meta = node["metadata"]
        mspec = machine.get("spec") or {}
        wanted_annotations = {keys.ANNOTATION_NODE_MACHINE: object_key(machine),
                              **((mspec.get("metadata") or {}).get("annotations") or {})}
        wanted_labels = (mspec.get("metadata") or {}).get("labels") or {}
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        metadata: dict[str, Any] = {}
        if any(annotations.get(k) != v for k, v in wanted_annotations.items()):
            metadata["annotations"] = wanted_annotations
        if any(labels.get(k) != v for k, v in wanted_labels.items()):
            metadata["labels"] = wanted_labels
        taints = list((node.get("spec") or {}).get("taints") or [])
        have = {(t.get("key"), t.get("effect")) for t in taints}
        added = [t for t in mspec.get("taints") or [] if (t.get("key"), t.get("effect")) not in have]
        return NodePart(metadata, {"taints": taints + added} if added else {})

    def node_part_for_provider_id(self, node: dict, pid: str) -> NodePart:
        """The part of the Machine whose providerID is `pid` for the write that gives `node` that providerID, so
        that a Node registered after its Machine was provisioned gets both in one write
        (docs/compatibility.md#node-controllers): the `node_part` of the one Machine (not being deleted) whose
        providerID is `pid`, when it bears the Node's name. Empty when no Machine or several have it, when it bears
        another name, or when another Node carries `pid` already; nodelink then looks at the Node itself once it
        has its providerID."""
        name = node["metadata"]["name"]
        if any(n["metadata"]["name"] != name for n in self._nodes.by_index(INDEX_PROVIDER_ID, pid)):
            return NodePart()
        machines = _live(self._machines.by_index(INDEX_PROVIDER_ID, pid))
        if len(machines) != 1 or machines[0]["metadata"]["name"] != name:
            return NodePart()  # of another name, the Machine is not this Node's (`machine_for`)
        if not owned_by_machine_api(machines[0]):
            return NodePart()  # nodelink's part, which nodelink does not write while another API owns the Machine
        return self.node_part(node, machines[0])
