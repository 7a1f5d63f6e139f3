"""A Machine API MachineSet as a Cluster API MachineDeployment, its OvirtMachineTemplate and the Cluster API
MachineSet that carries its Machines, and back (docs/cluster-api.md#migrating-from-the-machine-api); the labels by
which the converted sets select the converted Machines."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from api import capi, keys
from api.infrastructure import API_VERSION as INFRA_API_VERSION
from api.infrastructure import GROUP as INFRA_GROUP
from api.infrastructure import OVIRT_MACHINE_TEMPLATE_KIND, TEMPLATE_SPEC_PATH
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
from api.migration.metadata import MACHINE_DEPLOYMENT_KIND, capi_meta, mapi_meta, open_object
from api.migration.targets import MACHINE_API_DEFAULTS, ToClusterAPI, ToMachineAPI

DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"
MACHINE_SET_NAME_LABEL = "cluster.x-k8s.io/set-name"
TEMPLATE_HASH_LABEL = "machine-template-hash"
# The machine-template-hash of a MachineSet converted from the Machine API: not a hash of its template (its Machines
# may have been made from older ones), a value no MachineDeployment computes (they write `<hash>-<random>`).
CONVERTED_TEMPLATE_HASH = "machine-api"
_MAX_LABEL_VALUE = 63
# Cluster API's bookkeeping on a Machine of a MachineDeployment: no setting of the Machine, left out on the way back.
CAPI_SET_LABELS = (TEMPLATE_HASH_LABEL, MACHINE_SET_NAME_LABEL, DEPLOYMENT_NAME_LABEL)
_ON_DELETE = "OnDelete"


def _template_name(set_name: str, vm: Mapping[str, Any]) -> str:
    """`<set>-<hash of the VM settings>`: a template is never edited, a changed spec is a new template, and a change
    undone finds the old one again (OpenShift names its converted templates the same way)."""
    digest = hashlib.sha256(json.dumps(vm, sort_keys=True).encode()).hexdigest()[:8]
    return f"{set_name[:244]}-{digest}"


def _selector(f: Fields) -> dict[str, Any]:
    s = f.sub("selector")
    out: dict[str, Any] = {}
    match = s.strings("matchLabels")
    if match:
        out["matchLabels"] = match
    expressions = s.take("matchExpressions", [])
    if expressions:
        out["matchExpressions"] = expressions
    s.refuse_rest("Forbidden: not a label selector's field")
    return out


def set_labels(set_name: str) -> dict[str, str]:
    """The labels by which the MachineSet converted from the Machine API MachineSet `set_name` selects its Machines,
    beside the source's own: Cluster API's MachineDeployment tells its MachineSets apart by `machine-template-hash`,
    which its selector does not hold and each of its MachineSets' does."""
    labels = {TEMPLATE_HASH_LABEL: CONVERTED_TEMPLATE_HASH}
    if len(set_name) <= _MAX_LABEL_VALUE:  # Cluster API writes a hash of a longer name; the selector needs neither
        labels.update({MACHINE_SET_NAME_LABEL: set_name, DEPLOYMENT_NAME_LABEL: set_name})
    return labels


def machineset_to_capi(ms: Mapping[str, Any],
                       to: ToClusterAPI) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A Machine API MachineSet as a MachineDeployment, the OvirtMachineTemplate it names, and the Cluster API
    MachineSet that carries its Machines: of the set's name, as OpenShift names its converted MachineSets, ownerless
    and labelled for the MachineDeployment to adopt it, selecting the converted Machines by set_labels() for it to
    adopt them. Without it, the MachineDeployment would make a MachineSet of its own and new Machines for it, and
    the converted ones would stay beside them. Raises ConversionError naming every field that cannot be converted."""
    what, errors, top, meta = open_object(ms, keys.API_VERSION, "MachineSet", keys.GROUP)
    spec = top.sub("spec")
    replicas = spec.integer("replicas")
    min_ready = spec.integer("minReadySeconds")
    delete_policy = spec.text("deletePolicy")
    spec.take("authoritativeAPI")
    selector = _selector(spec)
    template = spec.sub("template")
    tmeta = template.sub("metadata")
    tlabels = tmeta.strings("labels")
    tannotations = tmeta.strings("annotations")
    tmeta.refuse_rest(NO_CAPI)
    mspec = template.sub("spec")
    if mspec.take("providerID"):
        mspec.error("providerID", "Forbidden: a template's Machines each have their own VM")
    hooks, taints, provider = machine_spec_to_capi(mspec)
    mspec.refuse_rest(NO_CAPI)
    template.refuse_rest(NO_CAPI)
    spec.refuse_rest(NO_CAPI)
    top.refuse_rest(NO_CAPI)
    raise_errors(what, errors)
    assert provider is not None
    template_name = _template_name(meta.name, provider.vm)
    namespace = to.namespace or meta.namespace
    machine_spec: dict[str, Any] = {
        "clusterName": to.cluster_name,
        "bootstrap": {"dataSecretName": provider.user_data_secret},
        "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": OVIRT_MACHINE_TEMPLATE_KIND, "name": template_name},
    }
    if min_ready:
        machine_spec["minReadySeconds"] = min_ready
    if taints:
        machine_spec["taints"] = taints
    template_meta = {k: v for k, v in (("labels", tlabels),
                                       ("annotations", delete_annotation({**tannotations, **hooks}, to_capi=True)))
                     if v}
    md_spec: dict[str, Any] = {
        "clusterName": to.cluster_name,
        "replicas": 1 if replicas is None else replicas,
        "selector": selector,
        "template": {"metadata": template_meta, "spec": machine_spec},
        # A Machine API MachineSet never replaces its Machines when its template changes: a new template reaches
        # only the Machines made after it.
        "rollout": {"strategy": {"type": _ON_DELETE}},
    }
    if delete_policy:
        md_spec["deletion"] = {"order": delete_policy}
    md = {"apiVersion": capi.API_VERSION, "kind": MACHINE_DEPLOYMENT_KIND,
          "metadata": capi_meta(meta, to, "MachineSet", keys.GROUP), "spec": md_spec}
    tmpl_meta = capi_meta(meta, to, "MachineSet", keys.GROUP, labels={}, annotations={})
    tmpl_meta.update(name=template_name, namespace=namespace)
    tmpl_meta["annotations"].pop(capi.PAUSED_ANNOTATION, None)  # a template is only read
    tmpl = {"apiVersion": INFRA_API_VERSION, "kind": OVIRT_MACHINE_TEMPLATE_KIND, "metadata": tmpl_meta,
            "spec": {"template": {"spec": provider.vm}}}
    bridge = set_labels(meta.name)
    ms_spec: dict[str, Any] = {
        "clusterName": to.cluster_name, "replicas": md_spec["replicas"],
        "selector": {**selector, "matchLabels": {**selector.get("matchLabels", {}), TEMPLATE_HASH_LABEL:
                                                 CONVERTED_TEMPLATE_HASH}},
        "template": {"metadata": {**template_meta, "labels": {**tlabels, **bridge}}, "spec": machine_spec}}
    if delete_policy:
        ms_spec["deletion"] = {"order": delete_policy}
    machine_set = {"apiVersion": capi.API_VERSION, "kind": "MachineSet",
                   "metadata": capi_meta(meta, to, "MachineSet", keys.GROUP, labels={**tlabels, **bridge}),
                   "spec": ms_spec}
    return md, tmpl, machine_set


def machinedeployment_to_mapi(md: Mapping[str, Any], template: Mapping[str, Any],
                              to: ToMachineAPI = MACHINE_API_DEFAULTS) -> dict[str, Any]:
    """A MachineDeployment and its OvirtMachineTemplate as a Machine API MachineSet. Raises ConversionError."""
    check_kind(template, INFRA_API_VERSION, OVIRT_MACHINE_TEMPLATE_KIND, describe(template))
    what, errors, top, meta = open_object(md, capi.API_VERSION, MACHINE_DEPLOYMENT_KIND, capi.GROUP)
    spec = top.sub("spec")
    cluster_name = spec.text("clusterName")
    replicas = spec.integer("replicas")
    selector = _selector(spec)
    order = spec.sub("deletion").text("order")
    rollout = spec.sub("rollout")
    strategy = rollout.sub("strategy")
    kind = strategy.text("type")
    if kind != _ON_DELETE:
        strategy.error("type", f'Unsupported value: "{kind}": {NO_MAPI} (a Machine API MachineSet never replaces '
                               "its Machines on a template change: OnDelete)")
    strategy.refuse_rest(NO_MAPI)
    rollout.refuse_rest(NO_MAPI)
    t = spec.sub("template")
    tmeta = t.sub("metadata")
    tlabels = tmeta.strings("labels")
    hooks, tannotations = hooks_from_annotations(tmeta.strings("annotations"))
    tmeta.refuse_rest(NO_MAPI)
    mspec = t.sub("spec")
    min_ready = mspec.integer("minReadySeconds")
    ovirt_cluster_id = failure_domain_cluster(mspec, to)
    _, ref_name, secret, taints = machine_spec_to_mapi(mspec, cluster_name, OVIRT_MACHINE_TEMPLATE_KIND)
    template_name = (template.get("metadata") or {}).get("name")
    if ref_name != template_name:
        mspec.error("infrastructureRef.name", f'Invalid value: "{ref_name}": the OvirtMachineTemplate given is '
                                              f'"{template_name}"')
    mspec.refuse_rest(NO_MAPI)
    t.refuse_rest(NO_MAPI)
    spec.refuse_rest(NO_MAPI)
    top.refuse_rest(NO_MAPI)
    # The OvirtMachineTemplate: its Machines' VM settings, and nothing else to lose.
    tt = Fields(template, OVIRT_MACHINE_TEMPLATE_KIND, errors)
    for key in ("apiVersion", "kind", "metadata", "status"):
        tt.take(key)
    inner = tt.sub("spec").sub("template")
    imeta = inner.sub("metadata")
    imeta.refuse_rest(f"{NO_MAPI} (labels and annotations of the OvirtMachines)")
    vm = SpecFields(inner.take("spec"), f"OvirtMachineTemplate.{TEMPLATE_SPEC_PATH}", errors)
    value = vm_spec_to_mapi(vm, f"OvirtMachineTemplate.{TEMPLATE_SPEC_PATH}", ovirt_cluster_id, secret, to)
    inner.refuse_rest(NO_MAPI)
    tt.refuse_rest(NO_MAPI)
    raise_errors(what, errors)
    strip = {capi.CLUSTER_NAME_LABEL: cluster_name, DEPLOYMENT_NAME_LABEL: meta.name}
    selector_labels = {k: v for k, v in selector.get("matchLabels", {}).items() if strip.get(k) != v}
    out_selector = {**selector, "matchLabels": selector_labels} if selector_labels else \
        {k: v for k, v in selector.items() if k != "matchLabels"}
    machine_spec = mapi_machine_spec(value, hooks, taints, to)
    template_meta: dict[str, Any] = {}
    if labels := {k: v for k, v in tlabels.items() if strip.get(k) != v}:
        template_meta["labels"] = labels
    if tannotations := delete_annotation(tannotations, to_capi=False):
        template_meta["annotations"] = tannotations
    ms_spec: dict[str, Any] = {"replicas": 1 if replicas is None else replicas, "selector": out_selector,
                               "template": {"metadata": template_meta, "spec": machine_spec}}
    if min_ready:
        ms_spec["minReadySeconds"] = min_ready
    if order:
        ms_spec["deletePolicy"] = order
    if to.authoritative_api:
        ms_spec["authoritativeAPI"] = to.authoritative_api
    return {"apiVersion": keys.API_VERSION, "kind": "MachineSet",
            "metadata": mapi_meta(meta, to, {capi.CLUSTER_NAME_LABEL: cluster_name}), "spec": ms_spec}
