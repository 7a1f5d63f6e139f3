"""The admission policies of config/admission on the real API server (docs/architecture.md#admission-time-validation):
each rule refuses, when it is typed, a provider spec (or a MachineHealthCheck's remediation template) the controller
refuses, with the controller's own words for the same field path; what the controller accepts (the samples, the e2e
tests' Machines, the limits themselves) passes; and an update that does not write the provider spec (a label, a
finalizer removed, a scale) is never refused, so an invalid object stored before the policy can still be scaled and
deleted."""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any, Iterator

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from api import infrastructure, keys
from api.capi import CLUSTER_NAME_LABEL
from api.field_errors import InvalidProviderSpec
from api.ids import NOT_AN_OVIRT_ID
from api.machinehealthcheck import validate_remediation_template
from api.meta import ObjectReference
from api.provider_spec import PROVIDER_SPEC_PATH, parse_provider_spec
from api.remediation import GROUP as REMEDIATION_GROUP
from api.remediation import VERSION as REMEDIATION_VERSION
from api.validation import (
    MAX_CORES_PER_SOCKET,
    MAX_DISK_GB,
    MAX_MEMORY_MB,
    MAX_SOCKETS,
    MAX_THREADS_PER_CORE,
    MAX_VCPUS,
    validate_provider_spec,
)
from hack import gen_admission
from hack.ovirt_install import REPO, Installation, machine_for, machineset_for, sample
from machine_controller.controllers.provider import InvalidMachineConfiguration
from machine_controller.ovirt.engine_limits import MAX_VM_NAME_LENGTH, check_vm_name

SAMPLE_VALUE = sample("machineset.yaml")["spec"]["template"]["spec"]["providerSpec"]["value"]
# The samples' installation: the Machines below are the samples' template, as the e2e tests' Machines are.
INST = Installation(sample("machineset.yaml")["metadata"]["labels"]["machine.openshift.io/cluster-api-cluster"],
                    SAMPLE_VALUE["cluster_id"], SAMPLE_VALUE["template_name"],
                    tuple(SAMPLE_VALUE["affinity_groups_names"]))
MACHINESET_PATH = f"spec.template.{PROVIDER_SPEC_PATH}"
SELECTOR_LABEL = "e2e.ovirt-machine-controller/admission-policy"
DELETE = object()  # a key removed from the spec (None writes JSON null)
# Engine ids (api/ids.py): UUIDs.
ID_1 = "0000000a-000a-000a-000a-00000000000a"
ID_2 = "0000000b-000b-000b-000b-00000000000b"


def shipped() -> list[dict[str, Any]]:
    return [d for f in (gen_admission.POLICY_FILE, gen_admission.MHC_POLICY_FILE, gen_admission.INFRA_POLICY_FILE)
            for d in yaml.safe_load_all((REPO / "config" / "admission" / f).read_text()) if d]


@pytest.fixture(scope="module")
def policy(cluster) -> Iterator[str]:
    """The shipped policy and binding under a name of this run, the binding narrowed to the namespaces this file
    labels: the e2e files sharing this API server (one per pytest worker, or every worker on a $KUBECONFIG cluster)
    create invalid Machines on purpose, to watch the controller refuse them. Removed afterwards."""
    cluster.apply_crds()
    run = f"e2e-{random.randrange(16 ** 6):06x}"
    docs = shipped()
    for doc in docs:
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{run}"
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            doc["spec"]["policyName"] = f"{doc['spec']['policyName']}-{run}"
            doc["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {SELECTOR_LABEL: run}}}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    try:
        yield run
    finally:
        for doc in docs:
            cluster.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found", check=False)


@pytest.fixture(scope="module")
def objects(cluster) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(cluster.api_client())


def value(**changes: Any) -> dict[str, Any]:
    """The samples' provider spec with some keys changed (DELETE removes one)."""
    v = copy.deepcopy(SAMPLE_VALUE)
    for key, new in changes.items():
        if new is DELETE:
            v.pop(key, None)
        else:
            v[key] = copy.deepcopy(new)
    return v


def machine(namespace: str, spec_value: dict[str, Any] | None, name: str = "worker-0") -> dict[str, Any]:
    doc = machine_for(INST, namespace, name)
    if spec_value is None:
        del doc["spec"]["providerSpec"]
    else:
        doc["spec"]["providerSpec"]["value"] = spec_value
    return doc


def machineset(namespace: str, spec_value: dict[str, Any] | None, name: str = "workers") -> dict[str, Any]:
    doc = machineset_for(INST, namespace)
    doc["metadata"]["name"] = name
    if spec_value is None:
        del doc["spec"]["template"]["spec"]["providerSpec"]
    else:
        doc["spec"]["template"]["spec"]["providerSpec"]["value"] = spec_value
    return doc


def health_check(namespace: str, template: dict[str, Any] | None, name: str = "check") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {}, "unhealthyConditions": [{"type": "Ready", "status": "False",
                                                                     "timeout": "300s"}]}
    if template is not None:
        spec["remediationTemplate"] = template
    return {"apiVersion": keys.API_VERSION, "kind": "MachineHealthCheck",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _plural(doc: dict[str, Any]) -> str:
    return {"Machine": "machines", "MachineSet": "machinesets", "MachineHealthCheck": "machinehealthchecks",
            "OvirtMachine": "ovirtmachines", "OvirtMachineTemplate": "ovirtmachinetemplates"}[doc["kind"]]


def refusal(objects, doc: dict[str, Any], dry_run: bool = True) -> str | None:
    """None when the API server accepts the create of `doc`, else what the policy said (after 'denied request: ')."""
    try:
        group, version = doc["apiVersion"].split("/")
        objects.create_namespaced_custom_object(group, version, doc["metadata"]["namespace"], _plural(doc),
                                                doc, dry_run="All" if dry_run else None)
    except ApiException as e:
        assert e.status == 422, e.body
        message = json.loads(e.body)["message"]
        assert "denied request: " in message, message
        return message.split("denied request: ", 1)[1]
    return None


def controller_errors(spec_value: dict[str, Any] | None, base: str = PROVIDER_SPEC_PATH) -> list[str]:
    """What the controller says of this provider spec (api/validation.py), with paths under `base`."""
    try:
        return [str(err) for err in validate_provider_spec(parse_provider_spec(spec_value), base)]
    except InvalidProviderSpec as e:  # parsing names its paths under a Machine's
        return [str(err).replace(PROVIDER_SPEC_PATH, base, 1) for err in e.errors]


def said_by_controller(policy_message: str, errors: list[str]) -> bool:
    # The policy says what the controller says for the same path (a type error without the controller's ', got
    # <type>' tail, which CEL cannot name).
    return any(err == policy_message or err.startswith(policy_message + ",") for err in errors)


@pytest.fixture
def ns(cluster, namespace: str, policy: str, objects) -> str:
    """A namespace the policy covers, once the API server applies it there."""
    cluster.kubectl("label", "namespace", namespace, f"{SELECTOR_LABEL}={policy}")
    _wait_enforced(objects, namespace)
    return namespace


def _wait_enforced(objects, namespace: str, timeout: float = 30) -> None:
    # The API server learns of new policies, bindings and namespace labels from its informers, a moment later.
    deadline = time.monotonic() + timeout
    for probe in (machine(namespace, value(memory_mb=-1), name="probe"),
                  health_check(namespace, {"kind": "OvirtRemediationTemplate", "name": "t"}, name="probe")):
        while refusal(objects, probe) is None:
            assert time.monotonic() < deadline, f"the policies do not apply in {namespace} after {timeout}s"
            time.sleep(0.3)


# --- each rule refuses its bad object, naming the field as the controller does --------------------------------------

REFUSED = {
    # What the decoder refuses: wrong JSON types (api/_codec.py).
    "memory_as_string": ({"memory_mb": "16348"}, "memory_mb"),
    "memory_as_fraction": ({"memory_mb": 16348.5}, "memory_mb"),
    # The API server keeps an integer beyond int64 as a float: a type error for the policy, a range error for the
    # controller; the same field either way.
    "memory_beyond_int64": ({"memory_mb": 10 ** 30}, "memory_mb"),
    "cpu_as_string": ({"cpu": "4"}, "cpu"),
    "sockets_as_string": ({"cpu": {"sockets": "1", "cores": 4, "threads": 1}}, "cpu.sockets"),
    "os_disk_size_as_bool": ({"os_disk": {"size_gb": True}}, "os_disk.size_gb"),
    "clone_as_string": ({"clone": "yes"}, "clone"),
    "user_data_secret_as_string": ({"userDataSecret": "worker-user-data"}, "userDataSecret"),
    "affinity_groups_as_string": ({"affinity_groups_names": "ocp-demo-x7k2p-compute"}, "affinity_groups_names"),
    "affinity_group_as_number": ({"affinity_groups_names": ["a", 7]}, "affinity_groups_names[1]"),
    "nic_as_string": ({"network_interfaces": ["profile"]}, "network_interfaces[0]"),
    "nic_profile_as_number": ({"network_interfaces": [{"vnic_profile_id": ID_1}, {"vnic_profile_id": 5}]},
                              "network_interfaces[1].vnic_profile_id"),
    # What api/validation.py refuses.
    "no_user_data_secret": ({"userDataSecret": DELETE}, "userDataSecret"),
    "user_data_secret_without_name": ({"userDataSecret": {}}, "userDataSecret.name"),
    "no_template": ({"template_name": ""}, "template_name"),
    "template_name_with_a_wildcard": ({"template_name": "rhcos-*"}, "template_name"),
    "template_name_with_a_quote": ({"template_name": 'rhcos"4'}, "template_name"),
    "template_name_with_a_backslash": ({"template_name": "rhcos\\4"}, "template_name"),
    "no_cluster": ({"cluster_id": DELETE}, "cluster_id"),
    # Ids go into the engine's URL paths: a UUID or nothing (docs/architecture.md#acting-only-on-what-is-ours).
    "cluster_id_with_a_space": ({"cluster_id": "5f4c6a1e-8d3b-4f2a-9c7e 1b2d3e4f5a6b"}, "cluster_id"),
    "cluster_id_a_name": ({"cluster_id": "Default"}, "cluster_id"),
    "cluster_id_with_a_trailing_newline": ({"cluster_id": ID_1 + "\n"}, "cluster_id"),
    "instance_type_not_an_id": ({"instance_type_id": "Large", "memory_mb": DELETE, "cpu": DELETE}, "instance_type_id"),
    "storage_domain_not_an_id": ({"storage_domain_id": "data 1"}, "storage_domain_id"),
    "nic_profile_not_an_id": ({"network_interfaces": [{"vnic_profile_id": ID_1}, {"vnic_profile_id": "ovirtmgmt"}]},
                              "network_interfaces[1].vnic_profile_id"),
    "instance_type_with_memory": ({"instance_type_id": ID_1, "cpu": DELETE}, "memory_mb"),
    "instance_type_with_cpu": ({"instance_type_id": ID_1, "memory_mb": DELETE}, "cpu"),
    "instance_type_with_guaranteed_memory": ({"instance_type_id": ID_1, "memory_mb": DELETE, "cpu": DELETE,
                                              "guaranteed_memory_mb": 1024}, "guaranteed_memory_mb"),
    "no_memory": ({"memory_mb": DELETE}, "memory_mb"),
    "negative_memory": ({"memory_mb": -1}, "memory_mb"),
    "memory_beyond_any_engine": ({"memory_mb": MAX_MEMORY_MB + 1}, "memory_mb"),
    "no_cpu": ({"cpu": None}, "cpu"),
    "zero_sockets": ({"cpu": {"sockets": 0, "cores": 4, "threads": 1}}, "cpu.sockets"),
    "no_cores": ({"cpu": {"sockets": 1, "threads": 1}}, "cpu.cores"),
    "sockets_beyond_the_engine": ({"cpu": {"sockets": MAX_SOCKETS + 1, "cores": 1, "threads": 1}}, "cpu.sockets"),
    "cores_beyond_the_engine": ({"cpu": {"sockets": 1, "cores": MAX_CORES_PER_SOCKET + 1, "threads": 1}}, "cpu.cores"),
    "threads_beyond_the_engine": ({"cpu": {"sockets": 1, "cores": 1, "threads": MAX_THREADS_PER_CORE + 1}},
                                  "cpu.threads"),
    "vcpus_beyond_the_engine": ({"cpu": {"sockets": MAX_VCPUS // 2 + 1, "cores": 2, "threads": 1}}, "cpu"),
    "negative_guaranteed_memory": ({"guaranteed_memory_mb": -1}, "guaranteed_memory_mb"),
    "guaranteed_over_memory": ({"guaranteed_memory_mb": 99999}, "guaranteed_memory_mb"),
    "no_os_disk": ({"os_disk": DELETE}, "os_disk"),
    "zero_os_disk": ({"os_disk": {"size_gb": 0}}, "os_disk.size_gb"),
    "os_disk_beyond_int64_bytes": ({"os_disk": {"size_gb": MAX_DISK_GB + 1}}, "os_disk.size_gb"),
    "no_type": ({"type": DELETE}, "type"),
    "unknown_type": ({"type": "gaming"}, "type"),
    "unknown_auto_pinning": ({"auto_pinning_policy": "adjust"}, "auto_pinning_policy"),
    "bad_hugepages": ({"hugepages": 1234}, "hugepages"),
    "unknown_format": ({"format": "qcow2"}, "format"),
    "thin_desktop_on_another_domain": ({"type": "desktop", "storage_domain_id": ID_1}, "storage_domain_id"),
    "raw_without_clone": ({"clone": False, "format": "raw"}, "format"),
    "preallocated_without_clone": ({"clone": False, "sparse": False}, "sparse"),
    "blank_affinity_group": ({"affinity_groups_names": ["a", " \t"]}, "affinity_groups_names[1]"),
    "duplicate_affinity_group": ({"affinity_groups_names": ["a", "b", "a"]}, "affinity_groups_names[2]"),
    "nic_without_profile": ({"network_interfaces": [{"vnic_profile_id": ID_1}, {}]},
                            "network_interfaces[1].vnic_profile_id"),
    "null_nic": ({"network_interfaces": [None]}, "network_interfaces[0].vnic_profile_id"),
}


@pytest.mark.parametrize("kind", ["Machine", "MachineSet"])
@pytest.mark.parametrize("case", REFUSED)
def test_each_rule_refuses_what_the_controller_refuses_naming_the_field(ns, objects, kind, case):
    changes, field = REFUSED[case]
    spec_value = value(**changes)
    base = PROVIDER_SPEC_PATH if kind == "Machine" else MACHINESET_PATH
    doc = machine(ns, spec_value) if kind == "Machine" else machineset(ns, spec_value)

    said = refusal(objects, doc)
    assert said is not None, f"{case}: accepted"
    errors = controller_errors(spec_value, base)
    if case == "cluster_id_with_a_trailing_newline":
        # The API server drops a message of more than one line for the rule's static one, which names the field
        # without the value.
        assert said == f"providerSpec.value.{field}: Invalid value: {NOT_AN_OVIRT_ID}", said
        assert any(e.startswith(f"{base}.{field}: Invalid value: ") for e in errors), errors
        return
    assert said.startswith(f"{base}.{field}: "), said
    # The controller refuses the same spec for the same field, in the same words.
    if case == "memory_beyond_int64":
        assert any(e.startswith(f"{base}.{field}: ") for e in errors), errors
    else:
        assert said_by_controller(said, errors), (said, errors)


@pytest.mark.parametrize("kind", ["Machine", "MachineSet"])
def test_a_missing_provider_spec_is_refused(ns, objects, kind):
    base = PROVIDER_SPEC_PATH if kind == "Machine" else MACHINESET_PATH
    said = refusal(objects, machine(ns, None) if kind == "Machine" else machineset(ns, None))
    assert said == f"{base}: Required value: the oVirt provider spec is missing"
    assert said_by_controller(said.replace(base, PROVIDER_SPEC_PATH), controller_errors(None))


def test_a_machine_name_longer_than_the_engine_takes_is_refused(ns, objects):
    name = "w" * (MAX_VM_NAME_LENGTH + 1)
    said = refusal(objects, machine(ns, value(), name=name))
    with pytest.raises(InvalidMachineConfiguration) as controller:
        check_vm_name(name)
    assert said is not None and said == str(controller.value), said
    assert refusal(objects, machine(ns, value(), name=name[:-1])) is None
    # A MachineSet's name is not limited: the API server cuts generated Machine names to 63 characters.
    assert refusal(objects, machineset(ns, value(), name=name * 2)) is None


# --- what the controller accepts passes ------------------------------------------------------------------------------

ACCEPTED = {
    "sample": {},
    # The e2e tests' Machines that reach Running (test_machine_shapes.py, test_machine_bad_input.py).
    "high_performance": {"type": "high_performance", "cpu": {"sockets": 2, "cores": 2, "threads": 2}, "memory_mb": 8192,
                         "guaranteed_memory_mb": 8192, "hugepages": 2048, "clone": True, "sparse": False,
                         "format": "raw",
                         "network_interfaces": [{"vnic_profile_id": "0000000a-000a-000a-000a-00000000000a"}]},
    "auto_pinning": {"auto_pinning_policy": "resize_and_pin"},
    "big_memory": {"memory_mb": 512 * 1024},
    # Specs only the engine or its cluster refuses: the policy leaves them to the controller.
    "memory_over_the_cluster_level": {"memory_mb": 5 * 1024 * 1024},
    "os_disk_smaller_than_the_template": {"os_disk": {"size_gb": 10}},
    # The limits themselves.
    "at_every_limit": {"memory_mb": MAX_MEMORY_MB, "guaranteed_memory_mb": MAX_MEMORY_MB, "hugepages": 1048576,
                       "os_disk": {"size_gb": MAX_DISK_GB}},
    "most_sockets": {"cpu": {"sockets": MAX_VCPUS, "cores": 1, "threads": 1}},
    "most_cores_and_threads": {"cpu": {"sockets": 1, "cores": MAX_CORES_PER_SOCKET, "threads": 2}},
    "most_threads": {"cpu": {"sockets": 1, "cores": 1, "threads": MAX_THREADS_PER_CORE}},
    # Other shapes the controller takes.
    "instance_type": {"instance_type_id": ID_1, "memory_mb": DELETE, "cpu": DELETE},
    "instance_type_with_zero_memory": {"instance_type_id": ID_1, "memory_mb": 0, "cpu": None},
    "desktop_cloned_elsewhere": {"type": "desktop", "clone": True, "storage_domain_id": ID_1, "format": "raw"},
    "ids_in_upper_case": {"cluster_id": ID_2.upper(), "storage_domain_id": ID_1.upper(),
                          "network_interfaces": [{"vnic_profile_id": ID_2.upper()}]},
    "empty_ids_are_unset": {"instance_type_id": "", "storage_domain_id": ""},
    "thin_desktop": {"type": "desktop", "format": "cow", "sparse": True},
    "nulls_take_defaults": {"clone": None, "sparse": None, "format": None, "hugepages": None, "id": None,
                            "credentialsSecret": None, "network_interfaces": None, "affinity_groups_names": None,
                            "guaranteed_memory_mb": None, "auto_pinning_policy": None, "instance_type_id": None},
    "unknown_keys_ignored": {"metadata": {"labels": {"a": "b"}}, "future_setting": [1, "x"], "kind": DELETE,
                             "apiVersion": DELETE},
    "template_name_with_spaces_and_dots": {"template_name": "RHCOS 4.14 (x86_64)"},
    "group_names_with_inner_space": {"affinity_groups_names": ["a b", "a  b", "é"]},
    "empty_lists": {"affinity_groups_names": [], "network_interfaces": []},
}


@pytest.mark.parametrize("kind", ["Machine", "MachineSet"])
@pytest.mark.parametrize("case", ACCEPTED)
def test_what_the_controller_accepts_passes(ns, objects, kind, case):
    spec_value = value(**ACCEPTED[case])
    assert controller_errors(spec_value) == [], "not a valid spec"
    doc = machine(ns, spec_value) if kind == "Machine" else machineset(ns, spec_value)
    assert refusal(objects, doc) is None


def test_the_samples_pass(ns, objects):
    ms = machineset_for(INST, ns)
    assert refusal(objects, ms) is None
    longest = "w" * MAX_VM_NAME_LENGTH
    check_vm_name(longest)
    assert refusal(objects, machine(ns, value(), name=longest)) is None


def test_random_specs_are_refused_only_when_the_controller_refuses_them(ns, objects):
    """A few hundred specs mixing valid and invalid values: never a refusal the controller would not make, with its
    words; and most of what the controller refuses is refused when typed."""
    pool: dict[str, list[Any]] = {
        "memory_mb": [DELETE, None, 0, -5, 1, 16348, MAX_MEMORY_MB, MAX_MEMORY_MB + 1, "16348", 2.5],
        "guaranteed_memory_mb": [DELETE, 0, -1, 1024, 20000, "x"],
        "cpu": [DELETE, None, {}, {"sockets": 1, "cores": 1, "threads": 1}, {"sockets": 2, "cores": 0, "threads": 1},
                {"sockets": 400, "cores": 2, "threads": 1}, {"sockets": "2"}, [1]],
        "instance_type_id": [DELETE, "", ID_1, "it-1", 3],
        "cluster_id": [ID_2, "", "c 1"],
        "type": [DELETE, "", "server", "desktop", "high_performance", "Server"],
        "clone": [DELETE, None, True, False, "false"],
        "sparse": [DELETE, True, False],
        "format": [DELETE, "", "raw", "cow", "qcow2"],
        "storage_domain_id": [DELETE, "", ID_2, "sd 1"],
        "hugepages": [DELETE, 0, 2048, 4096],
        "os_disk": [DELETE, {}, {"size_gb": 120}, {"size_gb": -1}, {"size_gb": MAX_DISK_GB + 1}],
        "affinity_groups_names": [DELETE, [], ["a"], ["a", "a"], [""], ["\u00a0"], ["a", 1]],
        "network_interfaces": [DELETE, [], [{"vnic_profile_id": ID_1}], [{"vnic_profile_id": "p"}], [{}], [None],
                               ["p"]],
        "userDataSecret": [DELETE, None, {}, {"name": "worker-user-data"}, {"name": 1}],
        "template_name": [DELETE, "", "rhcos", "rhcos*", "a b"],
    }
    rng = random.Random(17)
    refused_by_controller = refused_by_both = 0
    for i in range(300):
        changes = {k: rng.choice(vals) for k, vals in rng.sample(sorted(pool.items()), rng.randint(1, 5))}
        spec_value = value(**changes)
        errors = controller_errors(spec_value)
        said = refusal(objects, machine(ns, spec_value, name=f"random-{i}"))
        refused_by_controller += bool(errors)
        if said is not None:
            refused_by_both += 1
            assert errors, f"refused what the controller accepts: {changes}: {said}"
            assert said_by_controller(said, errors), (changes, said, errors)
    assert refused_by_controller > 100 and refused_by_both == refused_by_controller, (refused_by_controller,
                                                                                      refused_by_both)


# --- updates that do not write the provider spec are never refused ---------------------------------------------------

def test_objects_stored_invalid_before_the_policy_can_be_labelled_scaled_and_deleted(cluster, namespace, policy,
                                                                                      objects):
    bad = value(memory_mb=-1)
    stored = machine(namespace, bad, name="stored-invalid")
    stored["metadata"]["finalizers"] = ["machine.machine.openshift.io"]  # as the controller had put it
    assert refusal(objects, stored, dry_run=False) is None  # the namespace is not covered yet
    assert refusal(objects, machineset(namespace, bad, name="stored-invalid"), dry_run=False) is None
    cluster.kubectl("label", "namespace", namespace, f"{SELECTOR_LABEL}={policy}")
    _wait_enforced(objects, namespace)

    def patch(kind: str, body: dict[str, Any]) -> str | None:
        try:
            objects.patch_namespaced_custom_object(keys.GROUP, keys.VERSION, namespace, kind, "stored-invalid", body)
        except ApiException as e:
            assert e.status == 422, e.body
            return json.loads(e.body)["message"]
        return None

    # Writing the provider spec is judged...
    said = patch("machines", {"spec": {"providerSpec": {"value": {"memory_mb": -2}}}})
    assert said is not None and f"{PROVIDER_SPEC_PATH}.memory_mb: Invalid value: -2" in said
    said = patch("machinesets", {"spec": {"template": {"spec": {"providerSpec": {"value": {"memory_mb": -2}}}}}})
    assert said is not None and f"{MACHINESET_PATH}.memory_mb: Invalid value: -2" in said
    # ...nothing else is.
    assert patch("machines", {"metadata": {"labels": {"touched": "yes"}}}) is None
    assert patch("machines", {"spec": {"providerID": "ovirt://0000000a-000a-000a-000a-00000000000a"}}) is None
    assert patch("machinesets", {"spec": {"replicas": 0}}) is None

    cluster.kubectl("-n", namespace, "delete", "machine", "stored-invalid", "--wait=false")
    assert patch("machines", {"metadata": {"finalizers": None}}) is None
    cluster.kubectl("-n", namespace, "wait", "--for=delete", "machine/stored-invalid", "--timeout=30s")
    cluster.kubectl("-n", namespace, "delete", "machineset", "stored-invalid", "--wait=true", "--timeout=30s")


# --- a MachineHealthCheck's remediation template ------------------------------------------------------------------

OVIRT_TEMPLATE = {"apiVersion": f"{REMEDIATION_GROUP}/{REMEDIATION_VERSION}", "kind": "OvirtRemediationTemplate",
                  "name": "fence"}
TEMPLATES_REFUSED = {
    "no_api_version": ({"apiVersion": DELETE}, "apiVersion"),
    "api_version_without_version": ({"apiVersion": f"{REMEDIATION_GROUP}/"}, "apiVersion"),
    "api_version_of_three_parts": ({"apiVersion": "a/b/c"}, "apiVersion"),
    "core_group": ({"apiVersion": "v1", "kind": "PodTemplate"}, "apiVersion"),
    "kubernetes_group": ({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachmentTemplate"}, "apiVersion"),
    "an_early_kubernetes_group": ({"apiVersion": "apps/v1", "kind": "ReplicaSetTemplate"}, "apiVersion"),
    "no_kind": ({"kind": DELETE}, "kind"),
    "kind_not_a_template": ({"kind": "OvirtRemediation"}, "kind"),
    "kind_template_alone": ({"kind": "Template"}, "kind"),
    "no_name": ({"name": ""}, "name"),
}


def _template(**changes: Any) -> dict[str, Any]:
    t = dict(OVIRT_TEMPLATE)
    for key, new in changes.items():
        if new is DELETE:
            t.pop(key, None)
        else:
            t[key] = new
    return t


@pytest.mark.parametrize("case", TEMPLATES_REFUSED)
def test_a_remediation_template_the_controller_refuses_is_refused_naming_the_field(ns, objects, case):
    changes, field = TEMPLATES_REFUSED[case]
    template = _template(**changes)
    said = refusal(objects, health_check(ns, template))
    assert said is not None, f"{case}: accepted"
    assert said.startswith(f"spec.remediationTemplate.{field}: "), said
    # The controller refuses it for the same field, in the same words (controllers/healthcheck/remediators.py).
    assert said in [str(e) for e in validate_remediation_template(ObjectReference.from_dict(template))], said


@pytest.mark.parametrize("template", [None, OVIRT_TEMPLATE,
                                      _template(apiVersion="self-node-remediation.medik8s.io/v1alpha1",
                                                kind="SelfNodeRemediationTemplate"),
                                      _template(apiVersion="infrastructure.cluster.x-k8s.io/v1beta1",
                                                kind="Metal3RemediationTemplate")],
                         ids=["none", "ovirt", "medik8s", "cluster-api"])
def test_a_remediation_template_of_another_projects_group_passes(ns, objects, template):
    """Whether its kind is a registered remediator needs the cluster's ClusterRoles: the controller's to judge."""
    if template is not None:
        assert validate_remediation_template(ObjectReference.from_dict(template)) == []
    assert refusal(objects, health_check(ns, template)) is None


def test_a_check_stored_with_a_bad_template_can_still_be_labelled_and_deleted(cluster, namespace, policy, objects):
    stored = health_check(namespace, _template(apiVersion=DELETE), name="stored-invalid")
    assert refusal(objects, stored, dry_run=False) is None  # the namespace is not covered yet
    cluster.kubectl("label", "namespace", namespace, f"{SELECTOR_LABEL}={policy}")
    _wait_enforced(objects, namespace)
    objects.patch_namespaced_custom_object(keys.GROUP, keys.VERSION, namespace, "machinehealthchecks",
                                           "stored-invalid", {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(ApiException) as refused:
        objects.patch_namespaced_custom_object(keys.GROUP, keys.VERSION, namespace, "machinehealthchecks",
                                               "stored-invalid", {"spec": {"remediationTemplate": {"kind": "X"}}})
    assert refused.value.status == 422
    cluster.kubectl("-n", namespace, "delete", "machinehealthcheck", "stored-invalid", "--wait=true", "--timeout=30s")


# --- where the policy ships ----------------------------------------------------------------------------------------

def _kinds(cluster, entry_point: str) -> set[tuple[str, str]]:
    built = yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / entry_point)).stdout)
    return {(d["kind"], d["metadata"]["name"]) for d in built if d}


def test_standalone_entry_point_ships_the_policy_and_the_openshift_overlay_does_not(cluster):
    """The overlay runs beside MAO, on OpenShift 4.13 and older (the last with the oVirt platform): Kubernetes 1.26,
    which serves no admissionregistration.k8s.io/v1 policies, so shipping it there would fail the apply."""
    policy_objects = {(kind, name) for name in (gen_admission.POLICY_NAME, gen_admission.MHC_POLICY_NAME,
                                                gen_admission.INFRA_POLICY_NAME)
                      for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")}
    assert policy_objects <= _kinds(cluster, "config")
    assert not policy_objects & _kinds(cluster, "config/openshift")


# --- the remediation kinds: their CRDs refuse bad values when they are typed ------------------------------------------

@pytest.mark.parametrize("spec, field", [
    ({"strategy": {"retryLimit": 0}}, "spec.template.spec.strategy.retryLimit"),
    ({"strategy": {"timeoutSeconds": 1}}, "spec.template.spec.strategy.timeoutSeconds"),
    ({"remediationStrategy": "Reboot"}, "spec.template.spec.remediationStrategy"),
    ({"powerOffTimeoutSeconds": "120"}, "spec.template.spec.powerOffTimeoutSeconds"),
    ({"onExhaustion": "Retry"}, "spec.template.spec.onExhaustion"),
])
def test_remediation_templates_are_checked_by_their_own_schema(cluster, namespace, objects, spec, field):
    """This project's CRDs carry the remediation spec's enums and minimums (hack/gen_crds.py), so a bad template is
    refused when typed without a policy (docs/architecture.md#admission-time-validation)."""
    cluster.apply_crds()
    cluster.wait_established(f"ovirtremediationtemplates.{REMEDIATION_GROUP}")
    doc = {"apiVersion": f"{REMEDIATION_GROUP}/{REMEDIATION_VERSION}", "kind": "OvirtRemediationTemplate",
           "metadata": {"name": "fence", "namespace": namespace}, "spec": {"template": {"spec": spec}}}
    with pytest.raises(ApiException) as refused:
        objects.create_namespaced_custom_object(REMEDIATION_GROUP, REMEDIATION_VERSION, namespace,
                                                "ovirtremediationtemplates", doc, dry_run="All")
    assert refused.value.status == 422 and field in json.loads(refused.value.body)["message"]


# --- Cluster API's kinds: OvirtMachine.spec and OvirtMachineTemplate.spec.template.spec, the same VM rules ------------

INFRA_CRDS = tuple(f"{plural}.{infrastructure.GROUP}" for plural in ("ovirtmachines", "ovirtmachinetemplates"))
# The provider spec's keys OvirtMachine.spec has not (the API server would prune them).
PROVIDER_SPEC_ONLY = ("apiVersion", "kind", "userDataSecret", "credentialsSecret", "id", "name")
# Cases whose value has the wrong JSON type: the infrastructure CRDs' structural schema refuses those itself, before
# any policy sees them (and the API server prunes a null field), so only the VM rules are the policy's there.
TYPE_CASES = ("memory_as_string", "memory_as_fraction", "memory_beyond_int64", "cpu_as_string", "sockets_as_string",
              "os_disk_size_as_bool", "clone_as_string", "user_data_secret_as_string", "affinity_groups_as_string",
              "affinity_group_as_number", "nic_as_string", "nic_profile_as_number", "null_nic")
VM_RULE_CASES = {case: row for case, row in REFUSED.items()
                 if case not in TYPE_CASES and not row[1].startswith("userDataSecret")}
VM_RULE_CASES["provider_id_of_another_provider"] = ({"providerID": "aws:///us-east-1a/i-0123"}, "providerID")
VM_RULE_CASES["provider_id_not_a_vm_id"] = ({"providerID": "ovirt://worker-0"}, "providerID")
INFRA_PATHS = {"OvirtMachine": infrastructure.MACHINE_SPEC_PATH,
               "OvirtMachineTemplate": infrastructure.TEMPLATE_SPEC_PATH}


def vm_value(**changes: Any) -> dict[str, Any]:
    """The samples' VM settings as an OvirtMachine's spec, with some keys changed."""
    v = value(**changes)
    for key in PROVIDER_SPEC_ONLY:
        v.pop(key, None)
    return v


def infra_doc(kind: str, namespace: str, spec: dict[str, Any], name: str = "worker-0") -> dict[str, Any]:
    body = spec if kind == "OvirtMachine" else {"template": {"spec": spec}}
    return {"apiVersion": infrastructure.API_VERSION, "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": body}


def infra_controller_errors(spec: dict[str, Any], base: str) -> list[str]:
    """What the OvirtMachine controller says of this spec (api/infrastructure.py)."""
    try:
        infrastructure.load_ovirt_machine_spec(spec, base)
    except InvalidProviderSpec as e:
        return [str(err) for err in e.errors]
    return []


@pytest.fixture
def infra_ns(cluster, ns: str, objects) -> str:
    cluster.wait_established(*INFRA_CRDS)
    deadline = time.monotonic() + 30
    for kind in INFRA_PATHS:
        probe = infra_doc(kind, ns, vm_value(memory_mb=-1), name="probe")
        while refusal(objects, probe) is None:
            assert time.monotonic() < deadline, f"the policy does not apply to {kind} in {ns}"
            time.sleep(0.3)
    return ns


@pytest.mark.parametrize("kind", list(INFRA_PATHS))
@pytest.mark.parametrize("case", VM_RULE_CASES)
def test_an_ovirt_machine_spec_the_controller_refuses_is_refused_in_its_words(infra_ns, objects, kind, case):
    changes, field = VM_RULE_CASES[case]
    spec = vm_value(**changes)
    base = INFRA_PATHS[kind]
    said = refusal(objects, infra_doc(kind, infra_ns, spec))
    assert said is not None, f"{case}: accepted"
    errors = infra_controller_errors(spec, base)
    if case == "cluster_id_with_a_trailing_newline":  # a message of more than one line: the rule's static one
        assert said == f"spec.{field}: Invalid value: {NOT_AN_OVIRT_ID}", said
        assert any(e.startswith(f"{base}.{field}: Invalid value: ") for e in errors), errors
        return
    assert said.startswith(f"{base}.{field}: "), said
    assert said in errors, (said, errors)


@pytest.mark.parametrize("kind", list(INFRA_PATHS))
@pytest.mark.parametrize("case", [*ACCEPTED, "provider_id"])
def test_an_ovirt_machine_spec_the_controller_accepts_passes(infra_ns, objects, kind, case):
    changes = ACCEPTED.get(case, {"providerID": f"ovirt://{ID_1}"})
    spec = vm_value(**changes)
    assert infra_controller_errors(spec, INFRA_PATHS[kind]) == [], "not a valid spec"
    assert refusal(objects, infra_doc(kind, infra_ns, spec)) is None


def test_an_ovirt_machine_stored_invalid_can_get_its_labels_and_status_written(cluster, namespace, policy, objects):
    """Cluster API writes owner references and labels, the controller its status: none of it is judged."""
    cluster.apply_crds()
    cluster.wait_established(*INFRA_CRDS)
    stored = infra_doc("OvirtMachine", namespace, vm_value(memory_mb=-1), name="stored-invalid")
    assert refusal(objects, stored) is None  # the namespace is not covered yet
    objects.create_namespaced_custom_object(infrastructure.GROUP, infrastructure.VERSION, namespace, "ovirtmachines",
                                            stored)
    cluster.kubectl("label", "namespace", namespace, f"{SELECTOR_LABEL}={policy}")
    _wait_enforced(objects, namespace)

    def patch(body: dict[str, Any], status: bool = False) -> None:
        call = (objects.patch_namespaced_custom_object_status if status
                else objects.patch_namespaced_custom_object)
        call(infrastructure.GROUP, infrastructure.VERSION, namespace, "ovirtmachines", "stored-invalid", body)

    patch({"metadata": {"labels": {CLUSTER_NAME_LABEL: "c1"}}})
    patch({"status": {"instanceState": "down"}}, status=True)
    with pytest.raises(ApiException) as refused:
        patch({"spec": {"memory_mb": -2}})
    assert refused.value.status == 422
    said = json.loads(refused.value.body)["message"]
    assert f"{infrastructure.MACHINE_SPEC_PATH}.memory_mb: Invalid value: -2" in said, said
