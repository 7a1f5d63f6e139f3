"""The fields of a Machine's spec that both conversions share (docs/cluster-api.md#migrating-from-the-machine-api):
the Machine API's lifecycle hooks (Cluster API annotations), its taints (Cluster API's taints put on the Node once),
the scale-down victim mark in each API's spelling, and the oVirt provider spec (an OvirtMachine's spec, and back)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from api import keys
from api.field_errors import FieldError, InvalidProviderSpec
from api.infrastructure import GROUP as INFRA_GROUP
from api.infrastructure import OvirtMachineSpec, load_ovirt_machine_spec, to_provider_spec
from api.migration.fields import NO_CAPI, NO_MAPI, Fields, SpecFields
from api.migration.targets import ToMachineAPI
from api.provider_spec import PROVIDER_API_VERSION, PROVIDER_SPEC_KIND, VMSpec, vm_fields
from api.validation import load_provider_spec

# Machine API lifecycle hooks are Cluster API annotations `<prefix>/<name>: <owner>` (clusterv1 machine_types.go).
_HOOK_PREFIXES = (("preDrain", "pre-drain.delete.hook.machine.cluster.x-k8s.io"),
                  ("preTerminate", "pre-terminate.delete.hook.machine.cluster.x-k8s.io"))
_CAPI_DELETE_MACHINE = "cluster.x-k8s.io/delete-machine"
# A Machine API Machine's taints are put on its Node when the Node registers and never removed: Cluster API's
# OnInitialization propagation (its MachineTaintPropagation feature gate must be on to take them).
_ON_INITIALIZATION = "OnInitialization"
_VM_KEYS = tuple(f.metadata["key"] for f in fields(VMSpec))


def _hooks_to_annotations(f: Fields) -> dict[str, str]:
    hooks = f.sub("lifecycleHooks")
    out: dict[str, str] = {}
    for key, prefix in _HOOK_PREFIXES:
        items = hooks.take(key, [])
        for i, hook in enumerate(items if isinstance(items, list) else []):
            h = Fields(hook, f"{hooks.at(key)}[{i}]", f.errors)
            out[f"{prefix}/{h.text('name')}"] = h.text("owner")
            h.refuse_rest(NO_CAPI)
    hooks.refuse_rest(NO_CAPI)
    return out


def hooks_from_annotations(annotations: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the Machine API's lifecycleHooks, the other annotations) of a Cluster API object's annotations."""
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


def _taints_to_capi(f: Fields) -> list[dict[str, Any]]:
    out = []
    taints = f.take("taints", [])
    for i, taint in enumerate(taints if isinstance(taints, list) else []):
        t = Fields(taint, f"{f.at('taints')}[{i}]", f.errors)
        converted = {"key": t.text("key"), "value": t.text("value"), "effect": t.text("effect"),
                     "propagation": _ON_INITIALIZATION}
        t.take("timeAdded")
        t.refuse_rest(NO_CAPI)
        out.append({k: v for k, v in converted.items() if v})
    return out


def _taints_to_mapi(f: Fields) -> list[dict[str, Any]]:
    out = []
    taints = f.take("taints", [])
    for i, taint in enumerate(taints if isinstance(taints, list) else []):
        t = Fields(taint, f"{f.at('taints')}[{i}]", f.errors)
        converted = {"key": t.text("key"), "value": t.text("value"), "effect": t.text("effect")}
        propagation = t.text("propagation")
        if propagation != _ON_INITIALIZATION:
            t.error("propagation", f'Unsupported value: "{propagation}": {NO_MAPI} (a Machine API Machine puts its '
                                   "taints on its Node once, when the Node registers: OnInitialization)")
        t.refuse_rest(NO_MAPI)
        out.append({k: v for k, v in converted.items() if v})
    return out


def delete_annotation(annotations: dict[str, str], to_capi: bool) -> dict[str, str]:
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
class ProviderSpec:
    vm: dict[str, Any]  # the OvirtMachine spec (VM settings)
    user_data_secret: str
    credentials_secret: str


def _provider_spec(f: Fields) -> ProviderSpec | None:
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
    v = Fields(raw, path, f.errors)
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
    return ProviderSpec(vm, spec.user_data_secret.name if spec.user_data_secret else "",
                        spec.credentials_secret.name if spec.credentials_secret else "")


def machine_spec_to_capi(mspec: Fields) -> tuple[dict[str, str], list[dict[str, Any]], ProviderSpec | None]:
    """(lifecycle hooks as annotations, taints, provider spec) of a Machine API Machine spec under `mspec`."""
    node_meta = mspec.sub("metadata")
    node_meta.refuse_rest(f"{NO_CAPI} (Cluster API puts on a Node only the labels of its Machine with the "
                          "node-role.kubernetes.io/ or node.cluster.x-k8s.io/ prefixes)")
    hooks = _hooks_to_annotations(mspec)
    taints = _taints_to_capi(mspec)
    mspec.take("authoritativeAPI")
    return hooks, taints, _provider_spec(mspec)


def vm_spec_to_mapi(f: SpecFields, base: str, ovirt_cluster_id: str, user_data_secret: str,
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


def failure_domain_cluster(f: Fields, to: ToMachineAPI) -> str:
    """The oVirt cluster of the Cluster API failure domain under `f` ("" for none)."""
    domain = f.text("failureDomain")
    if not domain:
        return ""
    cluster_id = (to.failure_domains or {}).get(domain, "")
    if not cluster_id:
        f.error("failureDomain", f'Invalid value: "{domain}": not a failure domain of the OvirtCluster given, so '
                                 "its oVirt cluster is unknown")
    return cluster_id


def machine_spec_to_mapi(mspec: Fields, cluster_name: str | None,
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


def mapi_machine_spec(value: dict[str, Any] | None, hooks: dict[str, Any], taints: list[Any], to: ToMachineAPI,
                      provider_id: str = "") -> dict[str, Any]:
    """A Machine API Machine's spec (a MachineSet template's, without `provider_id`): the provider spec `value`, the
    lifecycle hooks and taints, and the target's authoritativeAPI."""
    spec: dict[str, Any] = {"providerSpec": {"value": value}}
    if hooks:
        spec["lifecycleHooks"] = hooks
    if taints:
        spec["taints"] = taints
    if provider_id:
        spec["providerID"] = provider_id
    if to.authoritative_api:
        spec["authoritativeAPI"] = to.authoritative_api
    return spec
