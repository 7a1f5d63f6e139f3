"""An OvirtMachine, with its Cluster API Machine and its OvirtCluster, as the seam's `api.machine.Machine`: what the
one oVirt actuator takes, so Cluster API's front end drives the same resumable verbs as the Machine API's
(docs/architecture.md#the-seam).

The description's name is the OvirtMachine's, which the VM bears (the engine keeps VM names unique: the proof that a
VM is this OvirtMachine's, docs/architecture.md#acting-only-on-what-is-ours); its provider spec holds the
OvirtMachine's VM settings, placed in the oVirt cluster of the failure domain Cluster API chose for the Machine (else
of the OvirtMachine's spec, else of the OvirtCluster's), with the Machine's bootstrap data Secret as its user data;
the VM id the OvirtMachine recorded (`status.instanceId`) and its providerID are the hints that save a search.
"""

from __future__ import annotations

from typing import Any

from api.capi import CapiMachine
from api.field_errors import InvalidProviderSpec
from api.infrastructure import MACHINE_SPEC_PATH, OvirtCluster, load_ovirt_machine_spec, to_provider_spec
from api.machine import Machine
from api.meta import ObjectMeta
from api.migration import ADOPT_VM_ANNOTATION
from api.provider_spec import PROVIDER_SPEC_PATH
from machine_controller.controllers.provider import InvalidMachineConfiguration, MissingDependency


def in_ovirt_machine_terms(e: InvalidMachineConfiguration) -> InvalidMachineConfiguration:
    """A refusal of the actuator, whose field paths name the Machine API's provider spec, with those paths as the
    OvirtMachine has them: the same keys under `spec` (api/infrastructure.py)."""
    return InvalidMachineConfiguration(str(e).replace(f"{PROVIDER_SPEC_PATH}.", f"{MACHINE_SPEC_PATH}."))


def placement_cluster_id(raw_spec: dict[str, Any], machine: CapiMachine, ovirt_cluster: OvirtCluster) -> str:
    """The oVirt cluster the VM goes to. Cluster API chooses a Machine's failure domain among those the OvirtCluster
    reports, so one it does not offer is waited for (its spec may be edited), never guessed."""
    domain = machine.spec.failure_domain
    if domain:
        for fd in ovirt_cluster.spec.failure_domains:
            if fd.name == domain:
                return fd.cluster_id
        raise MissingDependency(
            f"Machine {machine.metadata.name} is placed in failure domain {domain!r}, which OvirtCluster "
            f"{ovirt_cluster.metadata.name} does not offer (spec.failureDomains)")
    return str(raw_spec.get("cluster_id") or "") or ovirt_cluster.spec.cluster_id


def seam_machine(meta: ObjectMeta, raw_spec: dict[str, Any] | None, status: dict[str, Any] | None,
                 machine: CapiMachine, ovirt_cluster: OvirtCluster, *, deleting: bool = False) -> Machine:
    """The Machine the actuator is asked about. Raises InvalidMachineConfiguration naming the `spec.<key>` at fault
    (nothing is created), or MissingDependency for a failure domain not offered. `deleting`: a spec that cannot be
    read is no obstacle (the VM is then found by its recorded id or its name alone)."""
    raw = dict(raw_spec or {})
    value: dict[str, Any] | None = None
    try:
        raw["cluster_id"] = placement_cluster_id(raw, machine, ovirt_cluster)
        spec = load_ovirt_machine_spec(raw, MACHINE_SPEC_PATH)
        value = to_provider_spec(spec, machine.bootstrap_data_secret or "")
    except InvalidProviderSpec as e:
        if not deleting:
            raise InvalidMachineConfiguration(str(e)) from None
    except MissingDependency:
        if not deleting:
            raise
    recorded = (status or {}).get("instanceId")
    # The Machine API VM a converted OvirtMachine takes over (docs/cluster-api.md#migrating-from-the-machine-api).
    adopt = {k: v for k, v in meta.annotations.items() if k == ADOPT_VM_ANNOTATION}
    description: dict[str, Any] = {
        "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid, "annotations": adopt},
        "spec": {"providerSpec": {"value": value}, "providerID": (raw_spec or {}).get("providerID") or None},
        "status": {"providerStatus": {"instanceId": recorded} if recorded else None},
    }
    node = machine.status.node_ref.name if machine.status.node_ref else ""
    if node:
        description["status"]["nodeRef"] = {"kind": "Node", "name": node}
    return Machine.from_dict(description)
