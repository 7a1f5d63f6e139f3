"""The metadata of a converted object (docs/cluster-api.md#migrating-from-the-machine-api): its name, namespace,
labels and annotations carried over, what the API server and each API's own controllers set left behind (uid,
resourceVersion, ..., their finalizers and owner sets: the target side sets its own), anything else refused; and the
marks the converter puts on what it emits (the object it came from, the VM a converted OvirtMachine adopts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from api import capi, keys
from api.field_errors import FieldError
from api.migration.fields import NO_CAPI, NO_MAPI, Fields, check_kind, describe
from api.migration.machine_fields import delete_annotation
from api.migration.targets import ToClusterAPI, ToMachineAPI

MACHINE_DEPLOYMENT_KIND = "MachineDeployment"
# On every object the converter emits: the object it was converted from (`<kind>.<group> <namespace>/<name>`).
CONVERTED_FROM_ANNOTATION = "migration.ovirt.org/converted-from"
# On a converted OvirtMachine: the id of the Machine API VM it takes over. A VM that bears no owner mark, bears the
# OvirtMachine's name and has this id is marked as the OvirtMachine's before anything else is done with it
# (machine_controller/ovirt/owner_mark.py, docs/architecture.md#acting-only-on-what-is-ours).
ADOPT_VM_ANNOTATION = "migration.ovirt.org/adopt-vm"
MIGRATION_ANNOTATIONS = (CONVERTED_FROM_ANNOTATION, ADOPT_VM_ANNOTATION)
# Metadata the API server sets: it describes the source object, not a setting of the one to create.
_SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
# The finalizers of each API's own controllers on the objects converted (clusterv1 machine_types.go,
# machinedeployment_types.go): the target side's controllers put their own.
_OWN_FINALIZERS = {keys.GROUP: {keys.MACHINE_FINALIZER},
                   capi.GROUP: {"machine.cluster.x-k8s.io", "cluster.x-k8s.io/machinedeployment"}}
# Owners an API's controllers set, replaced on the other side by adoption (labels) or by its own Cluster.
_OWN_OWNER_KINDS = {keys.GROUP: ("MachineSet",), capi.GROUP: ("MachineSet", MACHINE_DEPLOYMENT_KIND, "Cluster")}
# Cluster API's bookkeeping of a MachineDeployment's rollouts (clusterv1 machinedeployment_types.go).
_CAPI_ROLLOUT_ANNOTATIONS = "machinedeployment.clusters.x-k8s.io/"


@dataclass
class Meta:
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]


def _metadata(f: Fields, source_group: str) -> Meta:
    m = f.sub("metadata")
    name = m.text("name")
    if not name:
        m.error("name", "Required value")
    namespace = m.text("namespace")
    labels = m.strings("labels")
    annotations = m.strings("annotations")
    for key in _SERVER_SET:
        m.take(key)
    if m.take("deletionTimestamp") is not None:
        m.error("deletionTimestamp", "Forbidden: the object is being deleted")
    m.take("deletionGracePeriodSeconds")
    finalizers = m.take("finalizers", [])
    own = _OWN_FINALIZERS[source_group]
    others = [x for x in finalizers if x not in own] if isinstance(finalizers, list) else []
    if others:
        m.error("finalizers", f"Forbidden: {others}: another controller's finalizers move with no conversion")
    owners = m.take("ownerReferences", [])
    for i, ref in enumerate(owners if isinstance(owners, list) else []):
        # Owned by a set of the source API: the target side's set takes its Machines by their labels instead.
        if not (isinstance(ref, Mapping) and str(ref.get("apiVersion", "")).startswith(f"{source_group}/")
                and ref.get("kind") in _OWN_OWNER_KINDS[source_group]):
            m.error(f"ownerReferences[{i}]", "Forbidden: only an owner set of the same API is replaced on conversion")
    if m.take("generateName") and not name:
        m.error("generateName", "Forbidden: a converted object needs its name")
    m.refuse_rest(NO_CAPI if source_group == keys.GROUP else NO_MAPI)
    return Meta(name, namespace, labels, annotations)


def open_object(obj: Any, api_version: str, kind: str,
                source_group: str) -> tuple[str, list[FieldError], Fields, Meta]:
    """The object checked to be of `kind`, its fields to take, and its metadata taken (refusals gathered in the
    list), its status left behind."""
    what = describe(obj)
    check_kind(obj, api_version, kind, what)
    errors: list[FieldError] = []
    top = Fields(obj, "", errors)
    for key in ("apiVersion", "kind", "status"):
        top.take(key)
    return what, errors, top, _metadata(top, source_group)


def _converted_from(kind: str, group: str, namespace: str, name: str) -> str:
    return f"{kind}.{group} {namespace}/{name}"


def capi_meta(meta: Meta, to: ToClusterAPI, kind: str, source_group: str, labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    notes = {**(annotations if annotations is not None else meta.annotations),
             CONVERTED_FROM_ANNOTATION: _converted_from(kind, source_group, meta.namespace, meta.name)}
    if to.paused:
        notes[capi.PAUSED_ANNOTATION] = ""
    return {"name": meta.name, "namespace": to.namespace or meta.namespace,
            "labels": {**(labels if labels is not None else meta.labels), capi.CLUSTER_NAME_LABEL: to.cluster_name},
            "annotations": notes}


def mapi_meta(meta: Meta, to: ToMachineAPI, strip: Mapping[str, str]) -> dict[str, Any]:
    labels = {k: v for k, v in meta.labels.items() if strip.get(k) != v}
    annotations = {k: v for k, v in meta.annotations.items() if k not in MIGRATION_ANNOTATIONS
                   and k != capi.PAUSED_ANNOTATION and not k.startswith(_CAPI_ROLLOUT_ANNOTATIONS)}
    out: dict[str, Any] = {"name": meta.name, "namespace": to.namespace or meta.namespace}
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = delete_annotation(annotations, to_capi=False)
    return out
