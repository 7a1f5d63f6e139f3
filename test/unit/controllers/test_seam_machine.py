"""An OvirtMachine with its Cluster API Machine and OvirtCluster, described as the seam's Machine
(controllers/infrastructure/seam_machine.py): the one oVirt actuator serves both front ends from it."""

from __future__ import annotations

import pytest

from api.capi import CapiMachine
from api.infrastructure import OvirtCluster
from api.meta import ObjectMeta
from api.validation import load_provider_spec
from machine_controller.controllers.infrastructure.seam_machine import seam_machine
from machine_controller.controllers.provider import InvalidMachineConfiguration, MissingDependency

VM = "9f1c2b7e-0000-4000-8000-000000000001"
DEFAULT = "9f1c2b7e-0000-4000-8000-0000000000c1"
OWN = "9f1c2b7e-0000-4000-8000-0000000000c3"
ZONE = "9f1c2b7e-0000-4000-8000-0000000000c2"
SPEC = {"template_name": "ubuntu-2404-kube", "type": "server", "cpu": {"sockets": 1, "cores": 2, "threads": 1},
        "memory_mb": 4096, "os_disk": {"size_gb": 20}}
META = ObjectMeta(name="c1-md-0-abcde", namespace="ns", uid="om-uid")
OC = OvirtCluster.from_dict({"metadata": {"name": "c1"}, "spec": {
    "identityRef": {"name": "engine"}, "clusterId": DEFAULT,
    "failureDomains": [{"name": "zone-b", "clusterId": ZONE}]}})


def capi_machine(failure_domain: str = "", secret: str | None = "boot", node: str = "") -> CapiMachine:
    return CapiMachine.from_dict({"metadata": {"name": "m"}, "spec": {
        "clusterName": "c1", "failureDomain": failure_domain,
        "bootstrap": {"dataSecretName": secret} if secret else {}}, "status": {"nodeRef": {"name": node}} if node
        else {}})


def test_the_description_is_a_valid_provider_spec_of_the_same_vm_with_the_bootstrap_secret_as_user_data():
    m = seam_machine(META, SPEC, {"instanceId": VM}, capi_machine(node="n1"), OC)
    assert (m.metadata.name, m.metadata.namespace) == ("c1-md-0-abcde", "ns")  # the VM's name
    spec = load_provider_spec(m.spec.provider_spec.value)  # what the actuator reads, validated
    assert spec.template_name == "ubuntu-2404-kube" and spec.memory_mb == 4096 and spec.cluster_id == DEFAULT
    assert spec.user_data_secret.name == "boot"
    assert m.status.provider_status == {"instanceId": VM}
    assert m.status.node_ref.name == "n1"
    assert m.spec.provider_id is None
    assert m.cluster_id == ""  # no Machine API infra-ID tag is asked of the engine


@pytest.mark.parametrize("failure_domain, own, expected", [
    ("", None, DEFAULT),  # the OvirtCluster's default
    ("", OWN, OWN),  # the OvirtMachine's own
    ("zone-b", OWN, ZONE),  # the failure domain Cluster API chose wins
])
def test_the_vm_goes_to_the_failure_domains_cluster_else_its_own_else_the_ovirt_clusters(failure_domain, own,
                                                                                       expected):
    spec = {**SPEC, **({"cluster_id": own} if own else {})}
    m = seam_machine(META, spec, None, capi_machine(failure_domain), OC)
    assert m.spec.provider_spec.value["cluster_id"] == expected


def test_a_failure_domain_not_offered_is_waited_for_not_guessed():
    with pytest.raises(MissingDependency, match="'zone-x'"):
        seam_machine(META, SPEC, None, capi_machine("zone-x"), OC)


def test_an_invalid_spec_names_the_field_under_spec():
    with pytest.raises(InvalidMachineConfiguration, match=r"spec\.memory_mb"):
        seam_machine(META, {**SPEC, "memory_mb": -1}, None, capi_machine(), OC)


def test_the_recorded_id_and_provider_id_are_hints_for_the_actuator():
    m = seam_machine(META, {**SPEC, "providerID": f"ovirt://{VM}"}, {"instanceId": VM}, capi_machine(), OC)
    assert m.spec.provider_id == f"ovirt://{VM}" and m.status.provider_status == {"instanceId": VM}


def test_deleting_an_unreadable_spec_still_describes_the_vm_by_name():
    m = seam_machine(META, {"memory_mb": "lots"}, {"instanceId": VM}, CapiMachine(), OC, deleting=True)
    assert m.metadata.name == "c1-md-0-abcde" and m.spec.provider_spec.value is None
    assert m.status.provider_status == {"instanceId": VM}
