"""The Node <-> Machine matching (controllers/nodes/matching.py, docs/architecture.md#matching-nodes-and-machines):
which Machine a Node belongs to and back, by providerID, by address and by name, and what the Node's part of the
link is, read from two informer stores and nothing else."""

from __future__ import annotations

import pytest

from api import keys
from machine_controller.controllers.nodes.matching import (
    INDEX_INTERNAL_IP,
    INDEX_NAME,
    INDEX_PROVIDER_ID,
    AmbiguousMatch,
    NodeMachineMatching,
    NodePart,
    internal_ip_index,
    name_index,
    provider_id_index,
)
from machine_controller.runtime.informer import Store

NS = "openshift-machine-api"
NODE = "worker-0"
PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000001"
OTHER_PID = "ovirt://9f1c2b7e-0000-4000-8000-000000000002"
IP = "10.0.0.5"
INDEXERS = {INDEX_PROVIDER_ID: provider_id_index, INDEX_INTERNAL_IP: internal_ip_index}
DELETED = "2026-01-01T00:00:00Z"


def node(name: str = NODE, provider_id: str | None = None, ip: str | None = IP, deleting: bool = False,
         labels: dict | None = None, annotations: dict | None = None, taints: list | None = None) -> dict:
    meta: dict = {"name": name, "uid": f"{name}-uid", "resourceVersion": "7"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = DELETED
    spec: dict = {}
    if provider_id:
        spec["providerID"] = provider_id
    if taints is not None:
        spec["taints"] = taints
    status: dict = {"addresses": [{"type": "InternalIP", "address": ip}]} if ip else {}
    return {"metadata": meta, "spec": spec, "status": status}


def machine(name: str = NODE, provider_id: str | None = None, ip: str | None = None, deleting: bool = False,
            phase: str | None = "Provisioned", node_ref: str | None = None, labels: dict | None = None,
            annotations: dict | None = None, taints: list | None = None) -> dict:
    meta: dict = {"name": name, "namespace": NS}
    if deleting:
        meta["deletionTimestamp"] = DELETED
    spec: dict = {"metadata": {"labels": labels or {}, "annotations": annotations or {}}, "taints": taints or []}
    if provider_id:
        spec["providerID"] = provider_id
    status: dict = {"phase": phase} if phase else {}
    if ip:
        status["addresses"] = [{"type": "InternalIP", "address": ip}]
    if node_ref:
        status["nodeRef"] = {"kind": "Node", "name": node_ref, "uid": f"{node_ref}-uid"}
    return {"metadata": meta, "spec": spec, "status": status}


def matching(nodes: list[dict], machines: list[dict]) -> NodeMachineMatching:
    node_store, machine_store = Store(INDEXERS), Store({**INDEXERS, INDEX_NAME: name_index})
    for n in nodes:
        node_store.put(n)
    for m in machines:
        machine_store.put(m)
    return NodeMachineMatching(machine_store, node_store)


def name_of(obj: dict | None) -> str | None:
    return None if obj is None else obj["metadata"]["name"]


# --- which Machine a Node belongs to ---------------------------------------------------------------------------

@pytest.mark.parametrize("nodes, machines, expected", [
    ([node(provider_id=PID)], [machine(provider_id=PID), machine("by-ip", ip=IP)], NODE),
    ([node(provider_id=PID)], [machine("copy", provider_id=PID)], None),
    ([node()], [machine("by-ip", ip=IP)], "by-ip"),
    ([node(), node("first")], [machine("by-ip", ip=IP, node_ref="first")], None),
    ([node(), node("first", deleting=True)], [machine("by-ip", ip=IP, node_ref="first")], "by-ip"),
    ([node()], [machine("by-ip", ip=IP, node_ref="gone")], "by-ip"),
    ([node(provider_id=PID)], [machine(provider_id=PID, deleting=True)], None),
    ([node(ip=None)], [machine("by-ip", ip=IP)], None),
], ids=["providerID before address", "providerID of another name", "by address", "address linked elsewhere",
        "linked elsewhere to a deleting node", "linked to a node gone", "deleting machine", "no address"])
def test_the_machine_of_a_node(nodes, machines, expected):
    assert name_of(matching(nodes, machines).machine_for(nodes[0])) == expected


def test_a_node_matching_several_machines_is_ambiguous_not_guessed():
    m = matching([node()], [machine("a", ip=IP), machine("b", ip=IP)])
    with pytest.raises(AmbiguousMatch, match=f"node {NODE} matches several machines: {NS}/a, {NS}/b"):
        m.machine_for(node())


# --- which Nodes a Machine may link to -------------------------------------------------------------------------

def test_the_nodes_a_machine_may_link_to_are_its_node_ref_and_those_sharing_its_provider_id_or_address():
    m = matching([node(provider_id=PID, ip="10.0.0.9"), node("by-ip"), node("elsewhere", ip="10.0.0.8")], [])
    assert m.nodes_for_machine(machine(provider_id=PID, ip=IP, node_ref="old")) == ["by-ip", "old", NODE]
    assert m.nodes_for_machine(machine("lonely")) == []


# --- the Node of a Machine that ends its provisioning --------------------------------------------------------------

ADDRESSES = [{"type": "InternalIP", "address": IP}]


@pytest.mark.parametrize("nodes, others, expected", [
    ([node(provider_id=PID)], [], NODE),
    ([node()], [], NODE),
    ([node(provider_id=PID, ip=None), node("other")], [], NODE),
    ([node("copy", provider_id=PID, ip=None)], [], None),
    ([node(provider_id=OTHER_PID)], [], None),
    ([node("a"), node("b")], [], None),
    ([node(provider_id=PID, deleting=True)], [], None),
    ([node(provider_id=PID)], [machine("claimant", provider_id=PID)], None),
    ([node()], [machine("claimant", ip=IP)], None),
    ([node()], [machine("claimant", ip=IP, deleting=True)], NODE),
], ids=["by providerID", "by address, no providerID yet", "providerID before address", "providerID of another name",
        "address of a node with another providerID", "several by address", "deleting node",
        "claimed by providerID", "claimed by address", "claimed by a deleting machine"])
def test_the_node_of_a_machine_ending_its_provisioning(nodes, others, expected):
    m = matching(nodes, [machine(phase="Provisioning"), *others])
    assert name_of(m.node_for_new_machine(f"{NS}/{NODE}", PID, ADDRESSES)) == expected


# --- whether a Node waits for its Machine's providerID ---------------------------------------------------------

@pytest.mark.parametrize("machines, expected", [
    ([machine(phase="Provisioning")], True),
    ([machine(phase=None)], True),
    ([machine(phase="Provisioning", provider_id=PID)], False),
    ([machine(phase="Provisioned")], False),
    ([machine(phase="Provisioning", deleting=True)], False),
    ([machine("other", phase="Provisioning")], False),
    ([machine(phase="Provisioning"), {**machine(phase="Provisioning"),
                                      "metadata": {"name": NODE, "namespace": "elsewhere"}}], False),
], ids=["provisioning", "new", "has its providerID", "provisioned", "deleting", "of another name",
        "one in each of two namespaces"])
def test_a_node_waits_only_for_the_one_machine_of_its_name_still_provisioning(machines, expected):
    assert matching([], machines).machine_provisioning_for(NODE) is expected


# --- the Node's part of the link -----------------------------------------------------------------------------------

TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
OWN = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}


def test_the_node_part_is_the_machine_annotation_its_labels_annotations_and_added_taints():
    part = NodeMachineMatching.node_part(
        node(labels={"kubernetes.io/hostname": NODE}, taints=[OWN]),
        machine(labels={"role": "infra"}, annotations={"a": "b"}, taints=[TAINT]))
    assert part == NodePart({"annotations": {keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}", "a": "b"},
                             "labels": {"role": "infra"}}, {"taints": [OWN, TAINT]})


def test_a_node_that_has_its_part_gets_nothing_and_its_own_taints_are_never_removed():
    has_it = node(annotations={keys.ANNOTATION_NODE_MACHINE: f"{NS}/{NODE}"}, labels={"role": "infra", "x": "y"},
                  taints=[OWN, {**TAINT, "value": "changed"}])
    part = NodeMachineMatching.node_part(has_it, machine(labels={"role": "infra"}, taints=[TAINT]))
    assert part == NodePart() and not part


def test_the_part_for_a_provider_id_write_is_of_the_one_machine_of_the_nodes_name():
    m = matching([node()], [machine(provider_id=PID, labels={"role": "infra"})])
    assert m.node_part_for_provider_id(node(), PID).metadata["labels"] == {"role": "infra"}


@pytest.mark.parametrize("nodes, machines", [
    ([node(), node("copy", provider_id=PID)], [machine(provider_id=PID)]),
    ([node()], [machine("other", provider_id=PID)]),
    ([node()], [machine(provider_id=PID), {**machine(provider_id=PID),
                                           "metadata": {"name": NODE, "namespace": "elsewhere"}}]),
    ([node()], [machine(provider_id=PID, deleting=True)]),
    ([node()], []),
], ids=["another node carries it", "machine of another name", "several machines", "deleting machine", "none"])
def test_no_part_for_a_provider_id_write_unless_the_machine_is_the_nodes_own(nodes, machines):
    assert not matching(nodes, machines).node_part_for_provider_id(node(), PID)
