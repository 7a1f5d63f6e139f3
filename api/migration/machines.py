"""A Machine API Machine as a Cluster API Machine and an OvirtMachine that adopts its VM, and back
(docs/cluster-api.md#migrating-from-the-machine-api): the VM is never made again, so the conversion proves which VM
is the Machine's (every place that records it must agree) and names it on the OvirtMachine (ADOPT_VM_ANNOTATION)."""

from __future__ import annotations

from typing import Any, Mapping

from api import capi, keys
from api.ids import NOT_AN_OVIRT_ID, is_ovirt_id, provider_id, vm_id_from_provider_id
from api.infrastructure import API_VERSION as INFRA_API_VERSION
from api.infrastructure import GROUP as INFRA_GROUP
from api.infrastructure import MACHINE_SPEC_PATH, OVIRT_MACHINE_KIND
from api.migration.fields import NO_CAPI, NO_MAPI, Fields, SpecFields, check_kind, describe, raise_errors
from api.migration.machine_fields import (
    delete_annotation,
    failure_domain_cluster,
    hooks_from_annotations,
    machine_spec_to_capi,
    machine_spec_to_mapi,
    mapi_machine_spec,
    vm_spec_to_mapi,
)
from api.migration.machinesets import CAPI_SET_LABELS, set_labels
from api.migration.metadata import ADOPT_VM_ANNOTATION, Meta, capi_meta, mapi_meta, open_object
from api.migration.targets import MACHINE_API_DEFAULTS, ToClusterAPI, ToMachineAPI


def _vm_id(top: Fields, meta: Meta, spec_provider_id: str, status: Any) -> str:
    """The VM a Machine API Machine has: every place that records it must agree, and one must."""
    found: list[tuple[str, str]] = []
    if spec_provider_id:
        vm_id = vm_id_from_provider_id(spec_provider_id)
        if vm_id is None:
            top.error("spec.providerID", f'Invalid value: "{spec_provider_id}": must be ovirt://<VM id>; the VM id '
                                         f"{NOT_AN_OVIRT_ID}")
        else:
            found.append(("spec.providerID", vm_id))
    annotated = meta.annotations.get(keys.ANNOTATION_VM_ID)
    if annotated:
        if not is_ovirt_id(annotated):
            top.error(f"metadata.annotations[{keys.ANNOTATION_VM_ID}]",
                      f'Invalid value: "{annotated}": {NOT_AN_OVIRT_ID}')
        else:
            found.append((f"metadata.annotations[{keys.ANNOTATION_VM_ID}]", annotated))
    recorded = ((status or {}).get("providerStatus") or {}).get("instanceId") if isinstance(status, Mapping) else None
    if isinstance(recorded, str) and is_ovirt_id(recorded):
        found.append(("status.providerStatus.instanceId", recorded))
    ids = {v for _, v in found}
    if len(ids) > 1:
        top.error(found[1][0], f'Invalid value: "{found[1][1]}": {found[0][0]} names VM {found[0][1]}: which VM is '
                               "the Machine's is unclear")
    if not found:
        top.error("spec.providerID", "Required value: the Machine has no VM yet (it is adopted, never made again): "
                                     "convert it once it is Provisioned")
    return found[0][1] if found else ""


def _owner_set(machine: Mapping[str, Any]) -> str:
    """The Machine API MachineSet that controls the Machine ("" for none)."""
    for ref in (machine.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "MachineSet" and ref.get("controller") and \
                str(ref.get("apiVersion", "")).startswith(f"{keys.GROUP}/"):
            return str(ref.get("name") or "")
    return ""


def machine_to_capi(machine: Mapping[str, Any], to: ToClusterAPI) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Machine API Machine as a Cluster API Machine and an OvirtMachine of the same name that adopts its VM (the
    VM bears the Machine's name; ADOPT_VM_ANNOTATION names its id). Raises ConversionError."""
    what, errors, top, meta = open_object(machine, keys.API_VERSION, "Machine", keys.GROUP)
    status = machine.get("status")
    spec = top.sub("spec")
    pid = spec.text("providerID")
    hooks, taints, provider = machine_spec_to_capi(spec)
    spec.refuse_rest(NO_CAPI)
    top.refuse_rest(NO_CAPI)
    vm_id = _vm_id(top, meta, pid, status)
    raise_errors(what, errors)
    assert provider is not None
    annotations = delete_annotation({**meta.annotations, **hooks}, to_capi=True)
    m_spec: dict[str, Any] = {
        "clusterName": to.cluster_name,
        "bootstrap": {"dataSecretName": provider.user_data_secret},
        "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": OVIRT_MACHINE_KIND, "name": meta.name},
        "providerID": provider_id(vm_id),
    }
    if taints:
        m_spec["taints"] = taints
    owner = _owner_set(machine)
    labels = {**meta.labels, **(set_labels(owner) if owner else {})}
    cm = {"apiVersion": capi.API_VERSION, "kind": capi.MACHINE_KIND,
          "metadata": capi_meta(meta, to, "Machine", keys.GROUP, labels=labels, annotations=annotations),
          "spec": m_spec}
    om_meta = capi_meta(meta, to, "Machine", keys.GROUP, labels={}, annotations={ADOPT_VM_ANNOTATION: vm_id})
    om = {"apiVersion": INFRA_API_VERSION, "kind": OVIRT_MACHINE_KIND, "metadata": om_meta,
          "spec": {**provider.vm, "providerID": provider_id(vm_id)}}
    return cm, om


def machine_to_mapi(machine: Mapping[str, Any], ovirt_machine: Mapping[str, Any],
                    to: ToMachineAPI = MACHINE_API_DEFAULTS) -> dict[str, Any]:
    """A Cluster API Machine and its OvirtMachine as a Machine API Machine of the same VM (its name is the VM's, the
    proof the Machine API asks). Raises ConversionError."""
    check_kind(ovirt_machine, INFRA_API_VERSION, OVIRT_MACHINE_KIND, describe(ovirt_machine))
    what, errors, top, meta = open_object(machine, capi.API_VERSION, capi.MACHINE_KIND, capi.GROUP)
    spec = top.sub("spec")
    pid = spec.text("providerID")
    ovirt_cluster_id = failure_domain_cluster(spec, to)
    cluster_name, ref_name, secret, taints = machine_spec_to_mapi(spec, None, OVIRT_MACHINE_KIND)
    om_name = (ovirt_machine.get("metadata") or {}).get("name")
    if ref_name != om_name or om_name != meta.name:
        spec.error("infrastructureRef.name", f'Invalid value: "{ref_name}": the OvirtMachine must be the one given '
                                             f'("{om_name}") and bear the Machine\'s name, which is its VM\'s')
    spec.refuse_rest(NO_MAPI)
    top.refuse_rest(NO_MAPI)
    om = Fields(ovirt_machine, OVIRT_MACHINE_KIND, errors)
    for key in ("apiVersion", "kind", "metadata", "status"):
        om.take(key)
    vm = SpecFields(om.take("spec"), f"OvirtMachine.{MACHINE_SPEC_PATH}", errors)
    om_pid = vm.text("providerID")
    value = vm_spec_to_mapi(vm, f"OvirtMachine.{MACHINE_SPEC_PATH}", ovirt_cluster_id, secret, to)
    om.refuse_rest(NO_MAPI)
    if pid and om_pid and pid != om_pid:
        top.error("spec.providerID", f'Invalid value: "{pid}": the OvirtMachine names "{om_pid}"')
    raise_errors(what, errors)
    hooks, annotations = hooks_from_annotations(meta.annotations)
    m_spec = mapi_machine_spec(value, hooks, taints, to, provider_id=pid or om_pid)
    labels = {k: v for k, v in meta.labels.items() if k not in CAPI_SET_LABELS}
    out_meta = mapi_meta(Meta(meta.name, meta.namespace, labels, annotations), to,
                         {capi.CLUSTER_NAME_LABEL: cluster_name})
    return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": out_meta, "spec": m_spec}
