"""Converting OpenShift's Machine API objects to Cluster API's and back
(docs/cluster-api.md#migrating-from-the-machine-api): a MachineSet with an oVirt provider spec is a MachineDeployment
and an OvirtMachineTemplate, a Machine is a Cluster API Machine and an OvirtMachine that adopts the same VM.

Pure functions on the objects as `kubectl get -o yaml` gives them; no I/O. Every key of the input is either mapped
or refused by its path (`spec.providerSpec.value.someField: has no Cluster API equivalent`): nothing is dropped
silently, since a setting lost in a conversion changes the next VM without anyone being told. What is not a setting
is left behind on purpose, and said so here: the status (the controllers' observations, written again by the new
side; a Machine's recorded VM id is read from it), the metadata the API server sets (uid, resourceVersion,
generation, creationTimestamp, managedFields), the Machine API's own finalizer and the owner reference to the source
MachineSet (the target side sets its own), and `spec.authoritativeAPI` (the switch of the migration itself).

Cluster API's objects are emitted paused (the `cluster.x-k8s.io/paused` annotation), as OpenShift's sync controller
creates them: nothing acts on them until the Machine API side has handed over (its `authoritativeAPI`) and the
annotation is removed. The Machine API objects converted back carry `spec.authoritativeAPI: ClusterAPI`, the form in
which OpenShift lets a Machine API copy of a Cluster API object be created, to be switched back by its user.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any, Iterator, Mapping

from api import capi, keys
from api.field_errors import FieldError, InvalidProviderSpec
from api.ids import NOT_AN_OVIRT_ID, is_ovirt_id, provider_id, vm_id_from_provider_id
from api.infrastructure import (
    API_VERSION as INFRA_API_VERSION,
)
from api.infrastructure import (
    GROUP as INFRA_GROUP,
)
from api.infrastructure import (
    MACHINE_SPEC_PATH,
    OVIRT_CLUSTER_KIND,
    OVIRT_MACHINE_KIND,
    OVIRT_MACHINE_TEMPLATE_KIND,
    TEMPLATE_SPEC_PATH,
    OvirtMachineSpec,
    load_ovirt_machine_spec,
    to_provider_spec,
)
from api.provider_spec import PROVIDER_API_VERSION, PROVIDER_SPEC_KIND, VMSpec, vm_fields
from api.validation import load_provider_spec

MACHINE_DEPLOYMENT_KIND = "MachineDeployment"
# On every object the converter emits: the object it was converted from (`<kind>.<group> <namespace>/<name>`).
CONVERTED_FROM_ANNOTATION = "migration.ovirt.org/converted-from"
# On a converted OvirtMachine: the id of the Machine API VM it takes over. A VM that bears no owner mark, bears the
# OvirtMachine's name and has this id is marked as the OvirtMachine's before anything else is done with it
# (machine_controller/ovirt/owner_mark.py, docs/architecture.md#acting-only-on-what-is-ours).
ADOPT_VM_ANNOTATION = "migration.ovirt.org/adopt-vm"
MIGRATION_ANNOTATIONS = (CONVERTED_FROM_ANNOTATION, ADOPT_VM_ANNOTATION)
AUTHORITATIVE_API_CLUSTER_API = "ClusterAPI"

# Machine API lifecycle hooks are Cluster API annotations `<prefix>/<name>: <owner>` (clusterv1 machine_types.go).
_HOOK_PREFIXES = (("preDrain", "pre-drain.delete.hook.machine.cluster.x-k8s.io"),
                  ("preTerminate", "pre-terminate.delete.hook.machine.cluster.x-k8s.io"))
_CAPI_DELETE_MACHINE = "cluster.x-k8s.io/delete-machine"
DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"
MACHINE_SET_NAME_LABEL = "cluster.x-k8s.io/set-name"
TEMPLATE_HASH_LABEL = "machine-template-hash"
# The machine-template-hash of a MachineSet converted from the Machine API: not a hash of its template (its Machines
# may have been made from older ones), a value no MachineDeployment computes (they write `<hash>-<random>`).
CONVERTED_TEMPLATE_HASH = "machine-api"
_MAX_LABEL_VALUE = 63
# Cluster API's bookkeeping on a Machine of a MachineDeployment: no setting of the Machine, left out on the way back.
_CAPI_SET_LABELS = (TEMPLATE_HASH_LABEL, MACHINE_SET_NAME_LABEL, DEPLOYMENT_NAME_LABEL)
# A Machine API Machine's taints are put on its Node when the Node registers and never removed: Cluster API's
# OnInitialization propagation (its MachineTaintPropagation feature gate must be on to take them).
_ON_INITIALIZATION = "OnInitialization"
_ON_DELETE = "OnDelete"
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
_VM_KEYS = tuple(f.metadata["key"] for f in fields(VMSpec))
NO_CAPI = "has no Cluster API equivalent"
NO_MAPI = "has no Machine API equivalent"


class ConversionError(ValueError):
    """The object cannot be converted as it is: every field at fault, by its path in the object given."""

    def __init__(self, what: str, errors: list[FieldError]):
        self.errors = list(errors)
        super().__init__(f"{what}: " + "; ".join(str(e) for e in self.errors))


@dataclass(frozen=True)
class ToClusterAPI:
    """Where the converted objects go: the Cluster API Cluster `cluster_name` (its OvirtCluster names the engine's
    credentials), in `namespace` (the source's when empty)."""

    cluster_name: str
    namespace: str = ""
    paused: bool = True


@dataclass(frozen=True)
class ToMachineAPI:
    """Where converted-back objects go: `namespace` (the source's when empty); `credentials_secret` is the provider
    spec's credentialsSecret (the Machine API's credentials Secret that the OvirtCluster's identity came from);
    `failure_domains` maps the OvirtCluster's failure domain names to their oVirt cluster ids."""

    namespace: str = ""
    credentials_secret: str = ""
    failure_domains: Mapping[str, str] | None = None
    authoritative_api: str | None = AUTHORITATIVE_API_CLUSTER_API


# --- reading every key ------------------------------------------------------------------------------------------


class _Fields:
    """A mapping whose keys are taken one by one; what no one took is refused by path at the end (`leftovers`)."""

    def __init__(self, raw: Any, path: str, errors: list[FieldError]):
        self.path = path
        self.errors = errors
        if raw is not None and not isinstance(raw, Mapping):
            self.error("", f"Invalid value: expected an object, got {type(raw).__name__}")
            raw = None
        self._raw = dict(raw or {})

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> None:
        self.errors.append(FieldError(self.at(key) if key else self.path, message))

    def take(self, key: str, default: Any = None) -> Any:
        value = self._raw.pop(key, None)
        return default if value is None else value

    def sub(self, key: str) -> _Fields:
        return _Fields(self.take(key), self.at(key), self.errors)

    def text(self, key: str) -> str:
        value = self.take(key, "")
        if not isinstance(value, str):
            self.error(key, f"Invalid value: expected a string, got {type(value).__name__}")
            return ""
        return value

    def strings(self, key: str) -> dict[str, str]:
        value = self.take(key, {})
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            self.error(key, "Invalid value: expected a map of strings")
            return {}
        return dict(value)

    def refuse_rest(self, why: str) -> None:
        """Every key left that holds something is refused; an empty value (`{}`, `[]`, `""`) holds nothing to lose."""
        for key, value in self._raw.items():
            if value not in (None, {}, [], ""):
                self.error(key, why)
        self._raw.clear()


class _SpecFields(_Fields):
    """Fields handed over whole once the caller took its own."""

    def take_all(self) -> dict[str, Any]:
        taken = dict(self._raw)
        self._raw.clear()
        return taken


def _check_kind(obj: Any, api_version: str, kind: str, what: str) -> None:
    if not isinstance(obj, Mapping):
        raise ConversionError(what, [FieldError("", f"Invalid value: expected an object, got {type(obj).__name__}")])
    errors = [FieldError(k, f'Unsupported value: "{obj.get(k)}": supported values: "{v}"')
              for k, v in (("apiVersion", api_version), ("kind", kind)) if obj.get(k) != v]
    if errors:
        raise ConversionError(what, errors)


def _describe(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return "object"
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{obj.get('kind', 'object')} {meta.get('namespace') or ''}/{meta.get('name') or ''}"


@dataclass
class _Meta:
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]


def _metadata(f: _Fields, source_group: str) -> _Meta:
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
    return _Meta(name, namespace, labels, annotations)


def _open(obj: Any, api_version: str, kind: str, source_group: str) -> tuple[str, list[FieldError], _Fields, _Meta]:
    """The object checked to be of `kind`, its fields to take, and its metadata taken (refusals gathered in the
    list), its status left behind."""
    what = _describe(obj)
    _check_kind(obj, api_version, kind, what)
    errors: list[FieldError] = []
    top = _Fields(obj, "", errors)
    for key in ("apiVersion", "kind", "status"):
        top.take(key)
    return what, errors, top, _metadata(top, source_group)


def _raise(what: str, errors: list[FieldError]) -> None:
    if errors:
        raise ConversionError(what, errors)


def _hooks_to_annotations(f: _Fields) -> dict[str, str]:
    hooks = f.sub("lifecycleHooks")
    out: dict[str, str] = {}
    for key, prefix in _HOOK_PREFIXES:
        items = hooks.take(key, [])
        for i, hook in enumerate(items if isinstance(items, list) else []):
            h = _Fields(hook, f"{hooks.at(key)}[{i}]", f.errors)
            out[f"{prefix}/{h.text('name')}"] = h.text("owner")
            h.refuse_rest(NO_CAPI)
    hooks.refuse_rest(NO_CAPI)
    return out


def _hooks_from_annotations(annotations: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    hooks: dict[str, Any] = {}
    rest = dict(annotations)
    for key, prefix in _HOOK_PREFIXES:
        found = [{"name": k[len(prefix) + 1:], "owner": v} for k, v in sorted(annotations.items())
                 if k.startswith(prefix + "/")]
        for k in list(rest):
            if k.startswith(prefix + "/"):
                del rest[k]
        if found:
            hooks[key] = found
    return hooks, rest


def _taints_to_capi(f: _Fields) -> list[dict[str, Any]]:
    out = []
    taints = f.take("taints", [])
    for i, taint in enumerate(taints if isinstance(taints, list) else []):
        t = _Fields(taint, f"{f.at('taints')}[{i}]", f.errors)
        converted = {"key": t.text("key"), "value": t.text("value"), "effect": t.text("effect"),
                     "propagation": _ON_INITIALIZATION}
        t.take("timeAdded")
        t.refuse_rest(NO_CAPI)
        out.append({k: v for k, v in converted.items() if v})
    return out


def _taints_to_mapi(f: _Fields) -> list[dict[str, Any]]:
    out = []
    taints = f.take("taints", [])
    for i, taint in enumerate(taints if isinstance(taints, list) else []):
        t = _Fields(taint, f"{f.at('taints')}[{i}]", f.errors)
        converted = {"key": t.text("key"), "value": t.text("value"), "effect": t.text("effect")}
        propagation = t.text("propagation")
        if propagation != _ON_INITIALIZATION:
            t.error("propagation", f'Unsupported value: "{propagation}": {NO_MAPI} (a Machine API Machine puts its '
                                   "taints on its Node once, when the Node registers: OnInitialization)")
        t.refuse_rest(NO_MAPI)
        out.append({k: v for k, v in converted.items() if v})
    return out


def _delete_annotation(annotations: dict[str, str], to_capi: bool) -> dict[str, str]:
    """The delete-machine annotation in the target's spelling (the scale-down victim mark)."""
    out = dict(annotations)
    sources = keys.DELETE_MACHINE_ANNOTATIONS if to_capi else (_CAPI_DELETE_MACHINE,)
    target = _CAPI_DELETE_MACHINE if to_capi else keys.ANNOTATION_DELETE_MACHINE
    for key in sources:
        if key in out:
            out[target] = out.pop(key)
    return out


# --- the provider spec ------------------------------------------------------------------------------------------


@dataclass
class _ProviderSpec:
    vm: dict[str, Any]  # the OvirtMachine spec (VM settings)
    user_data_secret: str
    credentials_secret: str


def _provider_spec(f: _Fields) -> _ProviderSpec | None:
    """The oVirt provider spec under `f` (`...providerSpec`), validated, its VM settings as an OvirtMachine's spec."""
    holder = f.sub("providerSpec")
    raw = holder.take("value")
    holder.refuse_rest(NO_CAPI)
    path = holder.at("value")
    if not isinstance(raw, Mapping):
        f.errors.append(FieldError(path, "Required value: an oVirt provider spec object"))
        return None
    try:
        spec = load_provider_spec(raw)
    except InvalidProviderSpec as e:
        f.errors.extend(FieldError(err.path.replace("spec.providerSpec.value", path, 1), err.message)
                        for err in e.errors)
        return None
    v = _Fields(raw, path, f.errors)
    for key, want in (("apiVersion", PROVIDER_API_VERSION), ("kind", PROVIDER_SPEC_KIND)):
        if v.take(key, want) != want:
            v.error(key, f'Unsupported value: supported values: "{want}"')
    meta = v.take("metadata", {})
    if not isinstance(meta, Mapping) or any(val is not None for val in meta.values()):
        v.error("metadata", NO_CAPI)  # Go writes `metadata: {creationTimestamp: null}`: nothing in it
    for key in ("id", "name"):  # unused by the Go provider (the VM's name is the Machine's) but always written
        if v.take(key, ""):
            v.error(key, f"{NO_CAPI} (the VM bears its Machine's name)")
    v.take("userDataSecret")
    v.take("credentialsSecret")
    for key in _VM_KEYS:
        v.take(key)
    v.refuse_rest(NO_CAPI)
    vm = OvirtMachineSpec(**vm_fields(spec)).to_dict()
    return _ProviderSpec(vm, spec.user_data_secret.name if spec.user_data_secret else "",
                         spec.credentials_secret.name if spec.credentials_secret else "")


def _machine_spec_to_capi(mspec: _Fields) -> tuple[dict[str, str], list[dict[str, Any]], _ProviderSpec | None]:
    """(lifecycle hooks as annotations, taints, provider spec) of a Machine API Machine spec under `mspec`."""
    node_meta = mspec.sub("metadata")
    node_meta.refuse_rest(f"{NO_CAPI} (Cluster API puts on a Node only the labels of its Machine with the "
                          "node-role.kubernetes.io/ or node.cluster.x-k8s.io/ prefixes)")
    hooks = _hooks_to_annotations(mspec)
    taints = _taints_to_capi(mspec)
    mspec.take("authoritativeAPI")
    return hooks, taints, _provider_spec(mspec)


def _vm_spec_to_mapi(f: _SpecFields, base: str, ovirt_cluster_id: str, user_data_secret: str,
                     to: ToMachineAPI) -> dict[str, Any] | None:
    """The provider spec of an OvirtMachine's (or a template's) spec under `f` (what the caller did not take of it),
    placed in `ovirt_cluster_id` when a failure domain chose one."""
    raw = f.take_all()
    unknown = [k for k in raw if k not in _VM_KEYS]
    for k in unknown:
        f.error(k, NO_MAPI)
    if unknown:
        return None
    if ovirt_cluster_id:
        if raw.get("cluster_id") and raw["cluster_id"] != ovirt_cluster_id:
            f.error("cluster_id", f'Invalid value: "{raw["cluster_id"]}": the failure domain places the VM in oVirt '
                                  f"cluster {ovirt_cluster_id}")
            return None
        raw["cluster_id"] = ovirt_cluster_id
    try:
        spec = load_ovirt_machine_spec(raw, base)
    except InvalidProviderSpec as e:
        f.errors.extend(e.errors)
        return None
    value = to_provider_spec(spec, user_data_secret)
    if to.credentials_secret:
        value["credentialsSecret"] = {"name": to.credentials_secret}
    return value



# --- MachineSet <-> MachineDeployment + OvirtMachineTemplate -------------------------------------------------------


def _template_name(set_name: str, vm: Mapping[str, Any]) -> str:
    """`<set>-<hash of the VM settings>`: a template is never edited, a changed spec is a new template, and a change
    undone finds the old one again (OpenShift names its converted templates the same way)."""
    digest = hashlib.sha256(json.dumps(vm, sort_keys=True).encode()).hexdigest()[:8]
    return f"{set_name[:244]}-{digest}"


def _converted_from(kind: str, group: str, namespace: str, name: str) -> str:
    return f"{kind}.{group} {namespace}/{name}"


def _capi_meta(meta: _Meta, to: ToClusterAPI, kind: str, source_group: str, labels: dict[str, str] | None = None,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    notes = {**(annotations if annotations is not None else meta.annotations),
             CONVERTED_FROM_ANNOTATION: _converted_from(kind, source_group, meta.namespace, meta.name)}
    if to.paused:
        notes[capi.PAUSED_ANNOTATION] = ""
    return {"name": meta.name, "namespace": to.namespace or meta.namespace,
            "labels": {**(labels if labels is not None else meta.labels), capi.CLUSTER_NAME_LABEL: to.cluster_name},
            "annotations": notes}


def _selector(f: _Fields) -> dict[str, Any]:
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


def _int(f: _Fields, key: str, minimum: int = 0) -> int | None:
    value = f.take(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= 2**31 - 1:
        f.error(key, f"Invalid value: {value!r}: must be an integer from {minimum} to {2**31 - 1}")
        return None
    return value


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
    what, errors, top, meta = _open(ms, keys.API_VERSION, "MachineSet", keys.GROUP)
    spec = top.sub("spec")
    replicas = _int(spec, "replicas")
    min_ready = _int(spec, "minReadySeconds")
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
    hooks, taints, provider = _machine_spec_to_capi(mspec)
    mspec.refuse_rest(NO_CAPI)
    template.refuse_rest(NO_CAPI)
    spec.refuse_rest(NO_CAPI)
    top.refuse_rest(NO_CAPI)
    _raise(what, errors)
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
                                       ("annotations", _delete_annotation({**tannotations, **hooks}, to_capi=True)))
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
          "metadata": _capi_meta(meta, to, "MachineSet", keys.GROUP), "spec": md_spec}
    tmpl_meta = _capi_meta(meta, to, "MachineSet", keys.GROUP, labels={}, annotations={})
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
                   "metadata": _capi_meta(meta, to, "MachineSet", keys.GROUP, labels={**tlabels, **bridge}),
                   "spec": ms_spec}
    return md, tmpl, machine_set


def _mapi_meta(meta: _Meta, to: ToMachineAPI, strip: Mapping[str, str]) -> dict[str, Any]:
    labels = {k: v for k, v in meta.labels.items() if strip.get(k) != v}
    annotations = {k: v for k, v in meta.annotations.items() if k not in MIGRATION_ANNOTATIONS
                   and k != capi.PAUSED_ANNOTATION and not k.startswith(_CAPI_ROLLOUT_ANNOTATIONS)}
    out: dict[str, Any] = {"name": meta.name, "namespace": to.namespace or meta.namespace}
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = _delete_annotation(annotations, to_capi=False)
    return out


def _failure_domain_cluster(f: _Fields, to: ToMachineAPI) -> str:
    domain = f.text("failureDomain")
    if not domain:
        return ""
    cluster_id = (to.failure_domains or {}).get(domain, "")
    if not cluster_id:
        f.error("failureDomain", f'Invalid value: "{domain}": not a failure domain of the OvirtCluster given, so '
                                 "its oVirt cluster is unknown")
    return cluster_id


def _machine_spec_to_mapi(mspec: _Fields, cluster_name: str | None,
                          ref_kind: str) -> tuple[str, str, str, list[Any]]:
    """(Cluster, infrastructureRef name, bootstrap data Secret, taints) of a Cluster API Machine spec under `mspec`;
    `cluster_name`: the Cluster it must name (its MachineDeployment's)."""
    cluster = mspec.text("clusterName")
    if cluster_name is not None and cluster != cluster_name:
        mspec.error("clusterName", f'Invalid value: must be the Cluster of the object, "{cluster_name}"')
    boot = mspec.sub("bootstrap")
    secret = boot.text("dataSecretName")
    if not secret:
        boot.error("dataSecretName", "Required value: the Machine API takes user data from a Secret")
    boot.refuse_rest(f"{NO_MAPI} (a bootstrap provider's config)")
    ref = mspec.sub("infrastructureRef")
    for key, want in (("apiGroup", INFRA_GROUP), ("kind", ref_kind)):
        if ref.text(key) != want:
            ref.error(key, f'Unsupported value: supported values: "{want}"')
    name = ref.text("name")
    ref.refuse_rest(NO_MAPI)
    return cluster, name, secret, _taints_to_mapi(mspec)


def machinedeployment_to_mapi(md: Mapping[str, Any], template: Mapping[str, Any],
                              to: ToMachineAPI = ToMachineAPI()) -> dict[str, Any]:
    """A MachineDeployment and its OvirtMachineTemplate as a Machine API MachineSet. Raises ConversionError."""
    _check_kind(template, INFRA_API_VERSION, OVIRT_MACHINE_TEMPLATE_KIND, _describe(template))
    what, errors, top, meta = _open(md, capi.API_VERSION, MACHINE_DEPLOYMENT_KIND, capi.GROUP)
    spec = top.sub("spec")
    cluster_name = spec.text("clusterName")
    replicas = _int(spec, "replicas")
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
    hooks, tannotations = _hooks_from_annotations(tmeta.strings("annotations"))
    tmeta.refuse_rest(NO_MAPI)
    mspec = t.sub("spec")
    min_ready = _int(mspec, "minReadySeconds")
    ovirt_cluster_id = _failure_domain_cluster(mspec, to)
    _, ref_name, secret, taints = _machine_spec_to_mapi(mspec, cluster_name, OVIRT_MACHINE_TEMPLATE_KIND)
    template_name = (template.get("metadata") or {}).get("name")
    if ref_name != template_name:
        mspec.error("infrastructureRef.name", f'Invalid value: "{ref_name}": the OvirtMachineTemplate given is '
                                              f'"{template_name}"')
    mspec.refuse_rest(NO_MAPI)
    t.refuse_rest(NO_MAPI)
    spec.refuse_rest(NO_MAPI)
    top.refuse_rest(NO_MAPI)
    # The OvirtMachineTemplate: its Machines' VM settings, and nothing else to lose.
    tt = _Fields(template, OVIRT_MACHINE_TEMPLATE_KIND, errors)
    for key in ("apiVersion", "kind", "metadata", "status"):
        tt.take(key)
    inner = tt.sub("spec").sub("template")
    imeta = inner.sub("metadata")
    imeta.refuse_rest(f"{NO_MAPI} (labels and annotations of the OvirtMachines)")
    vm = _SpecFields(inner.take("spec"), f"OvirtMachineTemplate.{TEMPLATE_SPEC_PATH}", errors)
    value = _vm_spec_to_mapi(vm, f"OvirtMachineTemplate.{TEMPLATE_SPEC_PATH}", ovirt_cluster_id, secret, to)
    inner.refuse_rest(NO_MAPI)
    tt.refuse_rest(NO_MAPI)
    _raise(what, errors)
    strip = {capi.CLUSTER_NAME_LABEL: cluster_name, DEPLOYMENT_NAME_LABEL: meta.name}
    selector_labels = {k: v for k, v in selector.get("matchLabels", {}).items() if strip.get(k) != v}
    out_selector = {**selector, "matchLabels": selector_labels} if selector_labels else \
        {k: v for k, v in selector.items() if k != "matchLabels"}
    machine_spec: dict[str, Any] = {"providerSpec": {"value": value}}
    if hooks:
        machine_spec["lifecycleHooks"] = hooks
    if taints:
        machine_spec["taints"] = taints
    if to.authoritative_api:
        machine_spec["authoritativeAPI"] = to.authoritative_api
    template_meta: dict[str, Any] = {}
    if labels := {k: v for k, v in tlabels.items() if strip.get(k) != v}:
        template_meta["labels"] = labels
    if tannotations := _delete_annotation(tannotations, to_capi=False):
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
            "metadata": _mapi_meta(meta, to, {capi.CLUSTER_NAME_LABEL: cluster_name}), "spec": ms_spec}


# --- Machine <-> Machine + OvirtMachine -------------------------------------------------------------------------


def _vm_id(top: _Fields, meta: _Meta, spec_provider_id: str, status: Any) -> str:
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
    what, errors, top, meta = _open(machine, keys.API_VERSION, "Machine", keys.GROUP)
    status = machine.get("status")
    spec = top.sub("spec")
    pid = spec.text("providerID")
    hooks, taints, provider = _machine_spec_to_capi(spec)
    spec.refuse_rest(NO_CAPI)
    top.refuse_rest(NO_CAPI)
    vm_id = _vm_id(top, meta, pid, status)
    _raise(what, errors)
    assert provider is not None
    annotations = _delete_annotation({**meta.annotations, **hooks}, to_capi=True)
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
          "metadata": _capi_meta(meta, to, "Machine", keys.GROUP, labels=labels, annotations=annotations),
          "spec": m_spec}
    om_meta = _capi_meta(meta, to, "Machine", keys.GROUP, labels={}, annotations={ADOPT_VM_ANNOTATION: vm_id})
    om = {"apiVersion": INFRA_API_VERSION, "kind": OVIRT_MACHINE_KIND, "metadata": om_meta,
          "spec": {**provider.vm, "providerID": provider_id(vm_id)}}
    return cm, om


def machine_to_mapi(machine: Mapping[str, Any], ovirt_machine: Mapping[str, Any],
                    to: ToMachineAPI = ToMachineAPI()) -> dict[str, Any]:
    """A Cluster API Machine and its OvirtMachine as a Machine API Machine of the same VM (its name is the VM's, the
    proof the Machine API asks). Raises ConversionError."""
    _check_kind(ovirt_machine, INFRA_API_VERSION, OVIRT_MACHINE_KIND, _describe(ovirt_machine))
    what, errors, top, meta = _open(machine, capi.API_VERSION, capi.MACHINE_KIND, capi.GROUP)
    spec = top.sub("spec")
    pid = spec.text("providerID")
    ovirt_cluster_id = _failure_domain_cluster(spec, to)
    cluster_name, ref_name, secret, taints = _machine_spec_to_mapi(spec, None, OVIRT_MACHINE_KIND)
    om_name = (ovirt_machine.get("metadata") or {}).get("name")
    if ref_name != om_name or om_name != meta.name:
        spec.error("infrastructureRef.name", f'Invalid value: "{ref_name}": the OvirtMachine must be the one given '
                                             f'("{om_name}") and bear the Machine\'s name, which is its VM\'s')
    spec.refuse_rest(NO_MAPI)
    top.refuse_rest(NO_MAPI)
    om = _Fields(ovirt_machine, OVIRT_MACHINE_KIND, errors)
    for key in ("apiVersion", "kind", "metadata", "status"):
        om.take(key)
    vm = _SpecFields(om.take("spec"), f"OvirtMachine.{MACHINE_SPEC_PATH}", errors)
    om_pid = vm.text("providerID")
    value = _vm_spec_to_mapi(vm, f"OvirtMachine.{MACHINE_SPEC_PATH}", ovirt_cluster_id, secret, to)
    om.refuse_rest(NO_MAPI)
    if pid and om_pid and pid != om_pid:
        top.error("spec.providerID", f'Invalid value: "{pid}": the OvirtMachine names "{om_pid}"')
    _raise(what, errors)
    hooks, annotations = _hooks_from_annotations(meta.annotations)
    m_spec: dict[str, Any] = {"providerSpec": {"value": value}}
    if hooks:
        m_spec["lifecycleHooks"] = hooks
    if taints:
        m_spec["taints"] = taints
    if pid or om_pid:
        m_spec["providerID"] = pid or om_pid
    if to.authoritative_api:
        m_spec["authoritativeAPI"] = to.authoritative_api
    labels = {k: v for k, v in meta.labels.items() if k not in _CAPI_SET_LABELS}
    out_meta = _mapi_meta(_Meta(meta.name, meta.namespace, labels, annotations), to,
                          {capi.CLUSTER_NAME_LABEL: cluster_name})
    return {"apiVersion": keys.API_VERSION, "kind": "Machine", "metadata": out_meta, "spec": m_spec}


def ovirt_cluster_for(cluster_name: str, namespace: str, identity_secret: str, ovirt_cluster_id: str,
                      paused: bool = True) -> dict[str, Any]:
    """The OvirtCluster of the target Cluster: the engine of the Machine API's credentials Secret (converted by
    api.migration_secrets.identity_secret under the same name) and the oVirt cluster of the converted specs."""
    meta: dict[str, Any] = {"name": cluster_name, "namespace": namespace,
                            "labels": {capi.CLUSTER_NAME_LABEL: cluster_name}}
    if paused:
        meta["annotations"] = {capi.PAUSED_ANNOTATION: ""}
    return {"apiVersion": INFRA_API_VERSION, "kind": OVIRT_CLUSTER_KIND, "metadata": meta,
            "spec": {"identityRef": {"name": identity_secret}, "clusterId": ovirt_cluster_id}}


def secrets_named(objects: Iterator[Mapping[str, Any]] | list[Mapping[str, Any]]) -> tuple[set[str], set[str]]:
    """(user data Secrets, credentials Secrets) that converted Machine API objects name."""
    user_data: set[str] = set()
    credentials: set[str] = set()
    for obj in objects:
        spec = obj.get("spec") or {}
        machine_spec = (spec.get("template") or {}).get("spec") if obj.get("kind") == "MachineSet" else spec
        value = ((machine_spec or {}).get("providerSpec") or {}).get("value") or {}
        for key, names in (("userDataSecret", user_data), ("credentialsSecret", credentials)):
            name = (value.get(key) or {}).get("name")
            if name:
                names.add(name)
    return user_data, credentials
