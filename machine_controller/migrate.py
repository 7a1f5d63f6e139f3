"""`python -m machine_controller.migrate`: converts OpenShift's Machine API objects to Cluster API's and back
(docs/cluster-api.md#migrating-from-the-machine-api), as YAML read from files or stdin and written to stdout:

    kubectl get machinesets.machine.openshift.io,machines.machine.openshift.io -n openshift-machine-api -o yaml \\
        | python -m machine_controller.migrate to-capi --cluster ocp > capi.yaml

It talks to no API server: what it reads and what it writes can be looked at before anything is applied. The
conversion itself is the api/migration package (the objects, and the Secrets in api/migration/secrets.py); this
module only pairs the objects, picks the Secrets they name and reports every refusal. Nothing is written when any
object is refused.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Iterable, Mapping, TextIO

import yaml

from api import capi, keys
from api.infrastructure import API_VERSION as INFRA_API_VERSION
from api.infrastructure import OVIRT_CLUSTER_KIND, OVIRT_MACHINE_KIND, OVIRT_MACHINE_TEMPLATE_KIND
from api.migration import (
    DEPLOYMENT_NAME_LABEL,
    MACHINE_DEPLOYMENT_KIND,
    ConversionError,
    ToClusterAPI,
    ToMachineAPI,
    bootstrap_to_user_data,
    credentials_to_identity,
    identity_to_credentials,
    machine_to_capi,
    machine_to_mapi,
    machinedeployment_to_mapi,
    machineset_to_capi,
    ovirt_cluster_for,
    secrets_named,
    user_data_to_bootstrap,
)

Obj = Mapping[str, Any]


class Refused(Exception):
    """What could not be converted, one line per object."""


def read_objects(streams: Iterable[TextIO]) -> list[Obj]:
    """Every object of the YAML documents, `kind: List` (kubectl's `-o yaml` of several) unpacked."""
    objects: list[Obj] = []
    for stream in streams:
        for doc in yaml.safe_load_all(stream):
            if doc is None:
                continue
            if not isinstance(doc, Mapping):
                raise Refused(f"a YAML document is not an object: {str(doc)[:60]!r}")
            objects.extend((doc.get("items") or []) if doc.get("kind") == "List" else [doc])
    return objects


def _key(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _name(obj: Obj) -> str:
    kind, namespace, name = _key(obj)
    return f"{kind} {namespace}/{name}"


def to_capi(objects: list[Obj], cluster: str, namespace: str = "", paused: bool = True,
            with_ovirt_cluster: bool = True) -> list[dict[str, Any]]:
    """Cluster API's objects for the Machine API's `objects` (MachineSets, Machines, and the Secrets they name)."""
    to = ToClusterAPI(cluster_name=cluster, namespace=namespace, paused=paused)
    out: list[dict[str, Any]] = []
    refusals: list[str] = []
    sets_and_machines = [o for o in objects if o.get("apiVersion") == keys.API_VERSION]
    user_data, credentials = secrets_named(sets_and_machines)
    cluster_ids: set[str] = set()
    for obj in objects:
        try:
            if obj.get("apiVersion") == keys.API_VERSION and obj.get("kind") == "MachineSet":
                md, template, machine_set = machineset_to_capi(obj, to)
                out += [md, template, machine_set]
                cluster_ids.add(template["spec"]["template"]["spec"].get("cluster_id", ""))
            elif obj.get("apiVersion") == keys.API_VERSION and obj.get("kind") == "Machine":
                out += list(machine_to_capi(obj, to))
                cluster_ids.add(out[-1]["spec"].get("cluster_id", ""))
            elif obj.get("kind") == "Secret" and _key(obj)[2] in user_data:
                out.append(user_data_to_bootstrap(obj, namespace))
            elif obj.get("kind") == "Secret" and _key(obj)[2] in credentials:
                out.append(credentials_to_identity(obj, namespace))
            else:
                refusals.append(f"{_name(obj)}: not a Machine API MachineSet or Machine, nor a Secret they name")
        except ConversionError as e:
            refusals.append(str(e))
    if len(credentials) > 1:
        refusals.append(f"credentialsSecret: the objects name {sorted(credentials)}: one Cluster has one engine "
                        "identity (the OvirtCluster's identityRef)")
    if with_ovirt_cluster and credentials and not refusals:
        if len(cluster_ids) != 1:
            refusals.append(f"cluster_id: the objects' VMs are in oVirt clusters {sorted(cluster_ids)}: the "
                            "OvirtCluster's clusterId is one (give --no-ovirt-cluster and write its failureDomains)")
        else:
            ns = namespace or _key(sets_and_machines[0])[1]
            out.append(ovirt_cluster_for(cluster, ns, next(iter(credentials)), next(iter(cluster_ids)), paused))
    if refusals:
        raise Refused("\n".join(refusals))
    return out


def to_mapi(objects: list[Obj], namespace: str = "",
            authoritative_api: str | None = "ClusterAPI") -> list[dict[str, Any]]:
    """The Machine API's objects for Cluster API's `objects`: MachineDeployments with their OvirtMachineTemplates,
    Machines with their OvirtMachines, the OvirtCluster (its identity and failure domains) and the Secrets."""
    by_key = {_key(o): o for o in objects}
    ovirt_clusters = [o for o in objects if o.get("apiVersion") == INFRA_API_VERSION
                      and o.get("kind") == OVIRT_CLUSTER_KIND]
    used: set[tuple[str, str, str]] = {_key(o) for o in ovirt_clusters}
    refusals: list[str] = []

    def target(obj: Obj) -> ToMachineAPI:
        cluster_name = (obj.get("spec") or {}).get("clusterName")
        ns = _key(obj)[1]
        oc = next((c for c in ovirt_clusters if _key(c)[1] == ns and _key(c)[2] == cluster_name), None)
        spec = (oc or {}).get("spec") or {}
        domains = {d.get("name"): d.get("clusterId") for d in spec.get("failureDomains") or []}
        return ToMachineAPI(namespace=namespace, credentials_secret=(spec.get("identityRef") or {}).get("name", ""),
                            failure_domains=domains, authoritative_api=authoritative_api)

    def infra(obj: Obj, kind: str, name: str) -> Obj | None:
        found = by_key.get((kind, _key(obj)[1], name))
        if found is None:
            refusals.append(f"{_name(obj)}: the {kind} {name} it names is not among the objects given")
        else:
            used.add(_key(found))
        return found

    out: list[dict[str, Any]] = []
    secrets: set[str] = set()
    for obj in objects:
        kind = obj.get("kind")
        if obj.get("apiVersion") != capi.API_VERSION or kind not in (MACHINE_DEPLOYMENT_KIND, capi.MACHINE_KIND):
            continue
        used.add(_key(obj))
        spec = obj.get("spec") or {}
        machine_spec = ((spec.get("template") or {}).get("spec") or {}) if kind == MACHINE_DEPLOYMENT_KIND else spec
        ref = (machine_spec.get("infrastructureRef") or {}).get("name", "")
        secrets.add((machine_spec.get("bootstrap") or {}).get("dataSecretName") or "")
        try:
            if kind == MACHINE_DEPLOYMENT_KIND:
                if (template := infra(obj, OVIRT_MACHINE_TEMPLATE_KIND, ref)) is not None:
                    out.append(machinedeployment_to_mapi(obj, template, target(obj)))
            elif (om := infra(obj, OVIRT_MACHINE_KIND, ref)) is not None:
                out.append(machine_to_mapi(obj, om, target(obj)))
        except ConversionError as e:
            refusals.append(str(e))
    deployments = {_key(o)[1:] for o in objects if o.get("kind") == MACHINE_DEPLOYMENT_KIND}
    for obj in objects:
        # A MachineDeployment's MachineSet is its bookkeeping: the MachineDeployment is converted.
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if obj.get("apiVersion") == capi.API_VERSION and obj.get("kind") == "MachineSet" and \
                (_key(obj)[1], labels.get(DEPLOYMENT_NAME_LABEL)) in deployments:
            used.add(_key(obj))
    identities = {((c.get("spec") or {}).get("identityRef") or {}).get("name") for c in ovirt_clusters}
    for obj in objects:
        if obj.get("kind") != "Secret":
            continue
        used.add(_key(obj))
        try:
            if _key(obj)[2] in secrets:
                out.append(bootstrap_to_user_data(obj, namespace))
            elif _key(obj)[2] in identities:
                out.append(identity_to_credentials(obj, namespace))
            else:
                refusals.append(f"{_name(obj)}: no object given names it")
        except ConversionError as e:
            refusals.append(str(e))
    refusals += [f"{_name(o)}: not a MachineDeployment, Machine, or an object one of them names"
                 for o in objects if _key(o) not in used]
    if refusals:
        raise Refused("\n".join(refusals))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m machine_controller.migrate",
        description="Convert OpenShift Machine API objects (oVirt) to Cluster API objects and back; YAML from the "
                    "files (or stdin) to stdout. Every field is mapped or refused by name "
                    "(docs/cluster-api.md#migrating-from-the-machine-api).")
    sub = parser.add_subparsers(dest="direction", required=True)
    capi_p = sub.add_parser("to-capi", help="MachineSets, Machines and the Secrets they name -> Cluster API")
    capi_p.add_argument("--cluster", required=True, help="the Cluster API Cluster the objects join")
    capi_p.add_argument("--namespace", default="", help="namespace of the new objects (default: the source's)")
    capi_p.add_argument("--unpaused", action="store_true",
                        help="emit the objects without the cluster.x-k8s.io/paused annotation")
    capi_p.add_argument("--no-ovirt-cluster", action="store_true",
                        help="emit no OvirtCluster (the Cluster has one; its identityRef must be the credentials)")
    mapi_p = sub.add_parser("to-mapi", help="MachineDeployments, Machines and their objects -> Machine API")
    mapi_p.add_argument("--namespace", default="", help="namespace of the new objects (default: the source's)")
    mapi_p.add_argument("--machine-api-authoritative", action="store_true",
                        help="emit spec.authoritativeAPI: MachineAPI instead of ClusterAPI")
    for p in (capi_p, mapi_p):
        p.add_argument("files", nargs="*", help="YAML files (default: stdin)")
    return parser


def main(argv: list[str] | None = None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout,
         stderr: TextIO = sys.stderr) -> int:
    args = build_parser().parse_args(argv)
    try:
        streams: list[TextIO] = [open(f, encoding="utf-8") for f in args.files] or [stdin]
        try:
            objects = read_objects(streams)
        finally:
            for s in streams:
                if s is not stdin:
                    s.close()
        if args.direction == "to-capi":
            out = to_capi(objects, args.cluster, args.namespace, paused=not args.unpaused,
                          with_ovirt_cluster=not args.no_ovirt_cluster)
        else:
            out = to_mapi(objects, args.namespace,
                          authoritative_api="MachineAPI" if args.machine_api_authoritative else "ClusterAPI")
    except (Refused, OSError, yaml.YAMLError) as e:
        print(f"refused, nothing converted:\n{e}", file=stderr)
        return 1
    yaml.safe_dump_all(out, stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
