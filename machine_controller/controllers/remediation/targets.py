"""Which Machine a remediation request means, in which front end, and what fencing needs of it: its Node, the
providerID of its VM, the name (and for Cluster API the owner mark) that proves the VM is its own, the power control
of its engine, and whether it may be deleted when the retries are spent (docs/fencing.md#both-front-ends).

Both front ends name their Machines `Machine`, so a request's Machine is found by its owner reference's API group:
OpenShift's MHC and this project's own set `machine.openshift.io`, Cluster API's MachineHealthCheck sets
`cluster.x-k8s.io` (with the Machine's uid, and the request named after the Machine). A request without a Machine
owner (NodeHealthCheck names it after the Node; a user may write one by hand) is the Machine API's, as it always was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from api import capi, infrastructure, keys
from api.capi import CapiMachine
from api.infrastructure import OvirtCluster
from api.meta import ObjectMeta, OwnerReference
from machine_controller.controllers.infrastructure.resources import (
    CAPI_MACHINES,
    capi_cluster,
    ovirt_cluster_of,
)
from machine_controller.controllers.provider import EngineIdentity, EnginePower, PowerControl
from machine_controller.controllers.resources import MACHINES
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import Resource

_NODE_NAME_ANNOTATION = "remediation.medik8s.io/node-name"  # NodeHealthCheck names the Node it means
_MACHINE_API_MASTER_ROLES = ("master", "control-plane")


class FrontEnd(Protocol):
    """One front end's Machines as fencing sees them."""

    group: str
    resource: Resource  # the collection a Machine is deleted from on escalation

    def machine(self, namespace: str, name: str) -> dict | None:
        """The Machine of this name, from the front end's informer's cache."""

    def target(self, machine: dict | None, rem_meta: ObjectMeta, recorded_node: str,
               nodes: Store) -> Target | Unresolved:
        """What fencing needs of `machine` (None: a request that names no Machine)."""

    def deletion_refused(self, machine: dict) -> str | None:
        """Why the Machine may not be deleted when the retries are spent, or None when its owner replaces it."""


@dataclass
class Target:
    machine: dict | None
    node_name: str
    provider_id: str
    vm_name: str  # the name the VM must bear to be the target's (docs/architecture.md#acting-only-on-what-is-ours)
    power: PowerControl  # of the engine the VM is on
    front: FrontEnd


@dataclass(frozen=True)
class Unresolved:
    """No target yet (`refuse` False: looked for again later, as a Machine or its Cluster may yet be cached), or none
    that is this controller's to fence (`refuse` True, with `reason`: the request is refused for good)."""

    message: str
    refuse: bool = False
    reason: str = "NoTarget"


def _node_name_of(machine: dict | None, rem_meta: ObjectMeta, recorded_node: str) -> str:
    return (((machine or {}).get("status") or {}).get("nodeRef") or {}).get("name") \
        or rem_meta.annotations.get(_NODE_NAME_ANNOTATION) or recorded_node \
        or (rem_meta.name if machine is None else "")


def _provider_id(machine: dict | None, node: dict | None) -> str:
    return str(((machine or {}).get("spec") or {}).get("providerID")
               or ((node or {}).get("spec") or {}).get("providerID") or "")


class MachineApiMachines:
    """OpenShift's Machine API: one engine, the process's credentials Secret, so one power control; the VM bears the
    Machine's name (or, with no Machine, its Node's)."""

    group = keys.GROUP
    resource = MACHINES

    def __init__(self, machines: Store, power: PowerControl):
        self._machines = machines
        self._power = power

    def machine(self, namespace: str, name: str) -> dict | None:
        return self._machines.get(f"{namespace}/{name}")

    def target(self, machine: dict | None, rem_meta: ObjectMeta, recorded_node: str,
               nodes: Store) -> Target | Unresolved:
        node_name = _node_name_of(machine, rem_meta, recorded_node)
        pid = _provider_id(machine, nodes.get(node_name) if node_name else None)
        if not pid:
            return Unresolved(f"no Machine or Node with a providerID found for {rem_meta.name}")
        vm_name = (machine or {}).get("metadata", {}).get("name") or node_name
        return Target(machine, node_name, pid, vm_name, self._power, self)

    def deletion_refused(self, machine: dict) -> str | None:
        meta = machine["metadata"]
        if not any(r.get("controller") for r in meta.get("ownerReferences") or []):
            return "the machine has no controller owner to replace it: it is left as it is"
        if (meta.get("labels") or {}).get(keys.LABEL_MACHINE_ROLE, "") in _MACHINE_API_MASTER_ROLES:
            return "a control-plane machine is never deleted by remediation"
        return None


class ClusterApiMachines:
    """Upstream Cluster API: the VM is the OvirtMachine's the Machine's infrastructureRef names (its name and owner
    mark), on the engine of the OvirtCluster of the Machine's Cluster (one engine per OvirtCluster identity)."""

    group = capi.GROUP
    resource = CAPI_MACHINES

    def __init__(self, machines: Store, clusters: Store, ovirt_clusters: Store, engines: EnginePower):
        self._machines = machines
        self._clusters = clusters
        self._ovirt_clusters = ovirt_clusters
        self._engines = engines

    def machine(self, namespace: str, name: str) -> dict | None:
        return self._machines.get(f"{namespace}/{name}")

    def target(self, machine: dict | None, rem_meta: ObjectMeta, recorded_node: str,
               nodes: Store) -> Target | Unresolved:
        if machine is None:
            return Unresolved(f"Cluster API Machine {rem_meta.namespace}/{rem_meta.name} not found")
        m = CapiMachine.from_dict(machine)
        ref = m.spec.infrastructure_ref
        if ref.api_group != infrastructure.GROUP or ref.kind != infrastructure.OVIRT_MACHINE_KIND or not ref.name:
            return Unresolved(f"Machine {m.metadata.name}'s spec.infrastructureRef is {ref.kind or '(none)'} of "
                              f"{ref.api_group or '(no group)'}, not an OvirtMachine: no oVirt VM to power-cycle",
                              refuse=True, reason="NotAnOvirtMachine")
        ovirt_cluster = self._ovirt_cluster(m)
        if isinstance(ovirt_cluster, Unresolved):
            return ovirt_cluster
        node_name = _node_name_of(machine, rem_meta, recorded_node)
        pid = _provider_id(machine, nodes.get(node_name) if node_name else None)
        if not pid:
            return Unresolved(f"Machine {m.metadata.name} has no providerID yet, nor a Node with one")
        identity = EngineIdentity(m.metadata.namespace, ovirt_cluster.spec.identity_ref.name)
        return Target(machine, node_name, pid, ref.name, self._engines.power(identity, m.metadata.namespace), self)

    def _ovirt_cluster(self, m: CapiMachine) -> OvirtCluster | Unresolved:
        cluster = capi_cluster(self._clusters, m.metadata.namespace, m.spec.cluster_name)
        if cluster is None:
            return Unresolved(f"Machine {m.metadata.name}'s Cluster {m.spec.cluster_name or '(none)'} not found")
        ovirt_cluster = ovirt_cluster_of(self._ovirt_clusters, cluster)
        if ovirt_cluster is None:
            return Unresolved(f"the OvirtCluster of Cluster {cluster.metadata.name} not found: its engine is unknown")
        return ovirt_cluster

    def deletion_refused(self, machine: dict) -> str | None:
        meta = machine["metadata"]
        # Cluster API's MachineSet replaces a Machine it controls; a control plane's Machines belong to its provider,
        # which alone knows whether the etcd member may go (docs/cluster-api.md#health-checks-and-remediation).
        if capi.CONTROL_PLANE_LABEL in (meta.get("labels") or {}):
            return "a control-plane machine is never deleted by remediation"
        if not any(r.get("controller") and r.get("kind") == capi.MACHINE_SET_KIND
                   and str(r.get("apiVersion", "")).partition("/")[0] == capi.GROUP
                   for r in meta.get("ownerReferences") or []):
            return "the machine is not controlled by a MachineSet to replace it: it is left as it is"
        return None


def machine_owner(meta: ObjectMeta) -> OwnerReference | None:
    """The request's owner reference of kind Machine, whatever its group (the first, as a health check sets one)."""
    return next((r for r in meta.owner_references if r.kind == "Machine"), None)


def _group(rem_meta: ObjectMeta) -> str:
    owner = machine_owner(rem_meta)
    return owner.api_version.partition("/")[0] if owner is not None else keys.GROUP


class Targets:
    """The front ends this process serves (docs/fencing.md#both-front-ends): the request's Machine is looked for only
    in the one its owner reference's group names."""

    def __init__(self, machine_api: MachineApiMachines | None, cluster_api: ClusterApiMachines | None):
        self._fronts: dict[str, FrontEnd] = {f.group: f for f in (machine_api, cluster_api) if f is not None}

    def elsewhere(self, rem_meta: ObjectMeta) -> str | None:
        """The front end (its group) of the request's Machine when this process does not serve it but another may:
        the request is then left alone, its finalizer and status too, for the process that does
        (docs/fencing.md#both-front-ends)."""
        group = _group(rem_meta)
        return group if group in (keys.GROUP, capi.GROUP) and group not in self._fronts else None

    def find(self, rem_meta: ObjectMeta, recorded_node: str, nodes: Store) -> Target | Unresolved:
        owner = machine_owner(rem_meta)
        group = _group(rem_meta)
        front = self._fronts.get(group)
        served = ", ".join(sorted(self._fronts))
        if self.elsewhere(rem_meta) is not None:
            return Unresolved(f"the Machine of {rem_meta.name} is one of {group}, whose Machines this controller does "
                              f"not watch (it serves: {served})")
        if front is None:
            return Unresolved(f"the owner of {rem_meta.name} is a Machine of {group}, which this controller does not "
                              f"serve (it serves: {served}): not an oVirt Machine to power-cycle", refuse=True,
                              reason="NotAnOvirtMachine")
        machine = front.machine(rem_meta.namespace, owner.name if owner is not None else rem_meta.name)
        if owner is not None and group != keys.GROUP:
            # Cluster API's health check names the Machine with its uid: a Machine made again under the same name
            # after that one went is not the one the check judged.
            if machine is not None and owner.uid and machine["metadata"].get("uid") != owner.uid:
                machine = None
            if machine is None:
                return Unresolved(f"Machine {rem_meta.namespace}/{owner.name} ({group}) not found")
        return front.target(machine, rem_meta, recorded_node, nodes)
