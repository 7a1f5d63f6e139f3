"""hack/capi/manifests.py: the objects the Cluster API tests, `make demo` and the benchmark apply are the ones this
project's controllers read (api/infrastructure.py, api/capi.py), and they name each other as Cluster API expects."""

from __future__ import annotations

import base64

from api import capi, infrastructure
from hack.capi import manifests

CLUSTER_ID = "00000000-0000-0000-0000-000000000001"
ENGINE = manifests.Engine("https://engine.example/ovirt-engine/api", "admin@internal", "secret", "PEM")


def test_template_spec_passes_the_ovirt_machine_spec_validation():
    doc = manifests.machine_template("ns", "c1-t1", manifests.vm_spec("kube-node", CLUSTER_ID, memory_mb=4096))
    template = infrastructure.OvirtMachineTemplate.from_dict(doc)
    spec = infrastructure.load_ovirt_machine_spec(doc["spec"]["template"]["spec"], infrastructure.TEMPLATE_SPEC_PATH)
    assert template.metadata.name == "c1-t1"
    assert (spec.template_name, spec.cluster_id, spec.memory_mb) == ("kube-node", CLUSTER_ID, 4096)


def test_machine_deployment_names_its_template_bootstrap_secret_and_cluster():
    md = manifests.machine_deployment("ns", "c1-md", "c1", replicas=3, template="c1-t1", version="v1.35.4",
                                      bootstrap_secret="c1-bootstrap")
    machine = capi.CapiMachineSpec.from_dict(md["spec"]["template"]["spec"])
    assert machine.cluster_name == "c1"
    assert machine.bootstrap.data_secret_name == "c1-bootstrap"
    assert (machine.infrastructure_ref.api_group, machine.infrastructure_ref.kind, machine.infrastructure_ref.name) \
        == (infrastructure.GROUP, infrastructure.OVIRT_MACHINE_TEMPLATE_KIND, "c1-t1")
    # The selector matches the Machines the template makes, or Cluster API's webhook refuses the MachineDeployment.
    assert md["spec"]["selector"]["matchLabels"].items() <= md["spec"]["template"]["metadata"]["labels"].items()
    assert md["spec"]["replicas"] == 3


def test_cluster_and_ovirt_cluster_name_each_other_and_the_identity_secret():
    cluster = manifests.cluster("ns", "c1", control_plane_ref={"apiGroup": "g", "kind": "K", "name": "p"})
    spec = capi.CapiClusterSpec.from_dict(cluster["spec"])
    assert (spec.infrastructure_ref.kind, spec.infrastructure_ref.name) == (infrastructure.OVIRT_CLUSTER_KIND, "c1")
    ovirt_cluster = infrastructure.OvirtCluster.from_dict(
        manifests.ovirt_cluster("ns", "c1", "c1-ovirt", CLUSTER_ID, {"host": "127.0.0.1", "port": 6443}))
    assert ovirt_cluster.spec.identity_ref.name == "c1-ovirt"
    secret = manifests.identity_secret("ns", "c1-ovirt", ENGINE)
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {infrastructure.IDENTITY_URL_KEY: ENGINE.url,
                       infrastructure.IDENTITY_USERNAME_KEY: ENGINE.username,
                       infrastructure.IDENTITY_PASSWORD_KEY: ENGINE.password, infrastructure.IDENTITY_CA_KEY: "PEM"}
    assert secret["metadata"]["labels"] == {manifests.MOVE_LABEL: ""}  # `clusterctl move` takes it by the label


def test_bootstrap_secret_holds_value_and_format_under_the_contract_keys():
    secret = manifests.bootstrap_secret("ns", "c1-bootstrap", "c1", value="{}",
                                        data_format=capi.BootstrapFormat.IGNITION)
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        capi.BOOTSTRAP_DATA_KEY: "{}", capi.BOOTSTRAP_FORMAT_KEY: "ignition"}
    # The move label: no owner reference links it to the Cluster, so `clusterctl move` takes it by the label.
    assert secret["metadata"]["labels"] == {capi.CLUSTER_NAME_LABEL: "c1", manifests.MOVE_LABEL: ""}
