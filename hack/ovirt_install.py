"""What the OpenShift installer sets up in oVirt for a cluster, and the credentials secret it leaves in the
cluster: used by the demo and the end-to-end tests to prepare the simulator like a real installation.

The installer creates an oVirt tag named after the infra ID (the actuator tags every VM with it) and the
affinity groups the MachineSets name (`<infraID>-compute`, `<infraID>-controlplane`). The RHCOS template and
the cluster are the simulator's seeded ones; `machineset_for` points a MachineSet's provider spec at them.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ovirtsdk4 as sdk
import ovirtsdk4.types as types
import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "config" / "samples"


@dataclass(frozen=True)
class Installation:
    infra_id: str
    cluster_id: str
    template_name: str
    affinity_groups: tuple[str, ...]


def prepare(conn: sdk.Connection, infra_id: str, affinity_groups: tuple[str, ...] = ("compute",)) -> Installation:
    """Create (idempotently) the infra-ID tag and affinity groups through the engine API, as the installer does."""
    system = conn.system_service()
    tags = system.tags_service()
    if not any(t.name == infra_id for t in tags.list()):
        tags.add(types.Tag(name=infra_id, description=f"OpenShift cluster {infra_id}"))
    cluster = system.clusters_service().list()[0]
    groups = system.clusters_service().cluster_service(cluster.id).affinity_groups_service()
    names = tuple(f"{infra_id}-{g}" for g in affinity_groups)
    existing = {g.name for g in groups.list()}
    for name in names:
        if name not in existing:
            # Soft anti-affinity, as the installer's default `compute` group: spread workers over hosts.
            groups.add(types.AffinityGroup(name=name, positive=False, enforcing=False,
                                           vms_rule=types.AffinityRule(enabled=True, positive=False, enforcing=False)))
    template = next(t for t in system.templates_service().list() if t.name != "Blank")
    return Installation(infra_id, cluster.id, template.name, names)


def credentials_secret(url: str, username: str, password: str, ca_pem: str = "", insecure: bool = False,
                       namespace: str = "openshift-machine-api", name: str = "ovirt-credentials") -> dict[str, Any]:
    """The secret the cloud-credential-operator writes, with OpenShift's six keys
    (docs/compatibility.md#credentials)."""
    values = {"ovirt_url": url, "ovirt_username": username, "ovirt_password": password, "ovirt_cafile": "",
              "ovirt_insecure": "true" if insecure else "false", "ovirt_ca_bundle": ca_pem}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}}


def sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / name).read_text())


def machineset_for(inst: Installation, namespace: str | None = None, name: str | None = None,
                   node_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The installer-shaped sample MachineSet, pointed at this installation's cluster and template; under another
    `name` if given (its selector and template follow), and with `node_labels` for its Machines' Nodes (nodelink
    copies them)."""
    ms = copy.deepcopy(sample("machineset.yaml"))
    value = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
    value["cluster_id"] = inst.cluster_id
    value["template_name"] = inst.template_name
    if namespace:
        ms["metadata"]["namespace"] = namespace
    if name:
        ms["metadata"]["name"] = name
        for where in (ms["spec"]["selector"]["matchLabels"], ms["spec"]["template"]["metadata"]["labels"]):
            where["machine.openshift.io/cluster-api-machineset"] = name
    if node_labels:
        ms["spec"]["template"]["spec"].setdefault("metadata", {}).setdefault("labels", {}).update(node_labels)
    return ms


def machine_for(inst: Installation, namespace: str, name: str, **provider_overrides: Any) -> dict[str, Any]:
    """A standalone Machine from the sample MachineSet's template (without the MachineSet label, so no set adopts
    it). Provider-spec keys given as overrides replace the template's; None removes a key."""
    template = machineset_for(inst, namespace)["spec"]["template"]
    spec = template["spec"]
    value = spec["providerSpec"]["value"]
    for key, val in provider_overrides.items():
        if val is None:
            value.pop(key, None)
        else:
            value[key] = val
    labels = {k: v for k, v in template["metadata"]["labels"].items() if not k.endswith("-machineset")}
    labels["machine.openshift.io/cluster-api-cluster"] = inst.infra_id
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}
