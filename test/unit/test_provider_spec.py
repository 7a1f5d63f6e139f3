"""OvirtMachineProviderSpec parsing and validation (docs/compatibility.md#provider-spec), rule by rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from api.machineset import MachineSet
from api.provider_spec import (
    CPU,
    OSDisk,
    OvirtMachineProviderSpec,
    OvirtMachineProviderStatus,
    parse_provider_spec,
    parse_provider_status,
)
from api.validation import FieldError, InvalidProviderSpec, load_provider_spec, validate_provider_spec

SAMPLE_MACHINESET = Path(__file__).resolve().parents[2] / "config" / "samples" / "machineset.yaml"
P = "spec.providerSpec.value"

VALID = {
    "apiVersion": "ovirtproviderconfig.machine.openshift.io/v1beta1",
    "kind": "OvirtMachineProviderSpec",
    "userDataSecret": {"name": "worker-user-data"},
    "credentialsSecret": {"name": "ovirt-credentials"},
    "id": "",
    "name": "",
    "template_name": "infra-rhcos",
    "cluster_id": "5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b",
    "cpu": {"sockets": 1, "cores": 4, "threads": 1},
    "memory_mb": 16348,
    "os_disk": {"size_gb": 120},
    "type": "server",
}
# Engine ids (api/ids.py): a UUID in its 8-4-4-4-12 form.
ID_1 = "0000000a-000a-000a-000a-00000000000a"
ID_2 = "0000000b-000b-000b-000b-00000000000b"
NOT_AN_ID = "must be an oVirt ID, a UUID such as 5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b"
UNSEARCHABLE = ("must not hold a wildcard (*), a double quote, a backslash or a control character: the engine's "
                "search cannot take them as a literal")


def spec_with(**changes) -> dict:
    """VALID with keys replaced; a value of None removes the key."""
    d = copy.deepcopy(VALID)
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def messages(d: dict) -> list[str]:
    return [str(e) for e in validate_provider_spec(parse_provider_spec(d))]


# --- parsing ------------------------------------------------------------------------------------------


def test_valid_spec_parses_every_field_with_its_json_name():
    spec = parse_provider_spec(
        spec_with(
            network_interfaces=[{"vnic_profile_id": ID_1}],
            affinity_groups_names=["ag-1"],
            auto_pinning_policy="resize_and_pin",
            hugepages=2048,
            guaranteed_memory_mb=8000,
            clone=True,
            sparse=False,
            format="raw",
            storage_domain_id=ID_2,
        )
    )
    assert spec.user_data_secret.name == "worker-user-data"
    assert spec.credentials_secret.name == "ovirt-credentials"
    assert (spec.template_name, spec.cluster_id, spec.type) == ("infra-rhcos", VALID["cluster_id"], "server")
    assert spec.cpu == CPU(sockets=1, cores=4, threads=1) and spec.cpu.vcpus == 4
    assert spec.memory_mb == 16348 and spec.os_disk == OSDisk(size_gb=120)
    assert spec.network_interfaces[0].vnic_profile_id == ID_1
    assert spec.affinity_groups_names == ["ag-1"]
    assert spec.auto_pinning_policy == "resize_and_pin" and spec.auto_pinning_enabled
    assert (spec.hugepages, spec.guaranteed_memory_mb) == (2048, 8000)
    assert (spec.clone, spec.sparse, spec.format, spec.storage_domain_id) == (True, False, "raw", ID_2)
    assert validate_provider_spec(spec) == []


def test_json_and_yaml_text_and_bytes_parse_to_the_same_spec():
    from_dict = parse_provider_spec(VALID)
    assert parse_provider_spec(json.dumps(VALID)) == from_dict
    assert parse_provider_spec(json.dumps(VALID).encode()) == from_dict
    assert parse_provider_spec(yaml.safe_dump(VALID)) == from_dict
    assert parse_provider_spec(yaml.safe_dump(VALID).encode()) == from_dict


def test_unknown_keys_are_ignored():
    spec = parse_provider_spec(
        spec_with(metadata={"creationTimestamp": None}, future_field={"x": 1}, instanceType="ignored")
    )
    assert spec == parse_provider_spec(VALID)


def test_to_dict_round_trips_with_the_exact_go_keys():
    d = spec_with(clone=False, sparse=True, format="cow", network_interfaces=[{"vnic_profile_id": ID_1}])
    out = parse_provider_spec(d).to_dict()
    assert out == d
    assert "userDataSecret" in out and "credentialsSecret" in out and "os_disk" in out


def test_to_dict_writes_go_non_omitempty_keys_and_omits_unset_pointers():
    out = OvirtMachineProviderSpec().to_dict()
    assert out == {
        "apiVersion": "ovirtproviderconfig.machine.openshift.io/v1beta1",
        "kind": "OvirtMachineProviderSpec",
        "id": "",
        "name": "",
        "template_name": "",
        "cluster_id": "",
    }


def test_explicit_false_pointers_are_kept():
    out = parse_provider_spec(spec_with(clone=False, sparse=False, type="server")).to_dict()
    assert out["clone"] is False and out["sparse"] is False


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, f"{P}: Required value: the oVirt provider spec is missing"),
        ("", f"{P}: Required value: the oVirt provider spec is missing"),
        ("[1, 2]", f"{P}: Invalid value: expected object, got array"),
        ("key: [unclosed", None),
        ("just text", f"{P}: Invalid value: expected object, got string"),
        (spec_with(memory_mb="16G"), f"{P}.memory_mb: Invalid value: expected integer, got string"),
        (spec_with(cpu={"sockets": 1, "cores": "4", "threads": 1}),
         f"{P}.cpu.cores: Invalid value: expected integer, got string"),
        (spec_with(clone="yes"), f"{P}.clone: Invalid value: expected boolean, got string"),
        (spec_with(affinity_groups_names="ag"),
         f"{P}.affinity_groups_names: Invalid value: expected array, got string"),
        (spec_with(affinity_groups_names=["a", 3]),
         f"{P}.affinity_groups_names[1]: Invalid value: expected string, got integer"),
        (spec_with(userDataSecret="worker-user-data"),
         f"{P}.userDataSecret: Invalid value: expected object, got string"),
        (spec_with(hugepages=True), f"{P}.hugepages: Invalid value: expected integer, got boolean"),
    ],
)
def test_malformed_values_raise_invalid_provider_spec_with_the_field_path(raw, expected):
    with pytest.raises(InvalidProviderSpec) as info:
        parse_provider_spec(raw)
    if expected is None:
        assert str(info.value).startswith(f"{P}: Invalid value: cannot parse as JSON or YAML:")
    else:
        assert str(info.value) == expected
    assert len(info.value.errors) == 1


def test_null_values_take_the_defaults():
    spec = parse_provider_spec(spec_with(clone=None) | {"sparse": None, "format": None})
    assert (spec.clone, spec.sparse, spec.format) == (None, None, "")


# --- validation, rule by rule ---------------------------------------------------------------------------

VALID_VARIANTS = {
    "minimal": VALID,
    "instance type instead of cpu and memory": spec_with(cpu=None, memory_mb=None, instance_type_id=ID_1),
    "desktop": spec_with(type="desktop"),
    "high_performance": spec_with(type="high_performance"),
    "hugepages 2048": spec_with(hugepages=2048),
    "hugepages 1GiB": spec_with(hugepages=1048576),
    "hugepages 0": spec_with(hugepages=0),
    "guaranteed equal to memory": spec_with(guaranteed_memory_mb=16348),
    "auto pinning none": spec_with(auto_pinning_policy="none"),
    "auto pinning resize_and_pin": spec_with(auto_pinning_policy="resize_and_pin"),
    "storage domain with clone": spec_with(clone=True, storage_domain_id=ID_1),
    "storage domain with default clone (server)": spec_with(storage_domain_id=ID_1),
    "format cow sparse on thin clone": spec_with(clone=False, format="cow", sparse=True),
    "format raw preallocated on clone": spec_with(clone=True, format="raw", sparse=False),
    "desktop thin with cow": spec_with(type="desktop", format="cow"),
    "affinity groups and nics": spec_with(
        affinity_groups_names=["a", "b"], network_interfaces=[{"vnic_profile_id": ID_1}, {"vnic_profile_id": ID_2}]
    ),
    "template name with spaces and dots": spec_with(template_name="RHCOS 4.14 (x86_64)"),
    "ids in upper case": spec_with(cluster_id=VALID["cluster_id"].upper(), storage_domain_id=ID_1.upper()),
    "no credentialsSecret (ignored by the actuator)": spec_with(credentialsSecret=None),
}


@pytest.mark.parametrize("spec", VALID_VARIANTS.values(), ids=VALID_VARIANTS.keys())
def test_valid_specs_have_no_errors(spec):
    assert messages(spec) == []
    assert isinstance(load_provider_spec(spec), OvirtMachineProviderSpec)


SUPPORTED_TYPES = '"desktop", "server", "high_performance"'
THIN = 'clone defaults to false for type "desktop"'

INVALID = {
    "userDataSecret missing": (
        spec_with(userDataSecret=None),
        [f"{P}.userDataSecret: Required value: must reference the Secret holding the Ignition user data"],
    ),
    "userDataSecret name empty": (
        spec_with(userDataSecret={"name": ""}),
        [f"{P}.userDataSecret.name: Required value: must name the Secret holding the Ignition user data"],
    ),
    "template_name empty": (
        spec_with(template_name=""),
        [f"{P}.template_name: Required value: must name the oVirt template to create the VM from"],
    ),
    # The template is searched for by its name: what the engine's search cannot take as a literal is refused
    # where it enters (machine_controller/ovirt/search.py).
    **{f"template_name {why}": (
        spec_with(template_name=name),
        [f'{P}.template_name: Invalid value: "{name}": {UNSEARCHABLE}'],
    ) for why, name in (("with a wildcard", "rhcos-*"), ("with a quote", 'rhcos"4.14'),
                        ("with a backslash", "rhcos\\4"), ("with a tab", "rhcos\t4"))},
    "cluster_id missing": (
        spec_with(cluster_id=None),
        [f"{P}.cluster_id: Required value: must be the ID of the oVirt cluster to create the VM in"],
    ),
    # Ids go into the engine's URL paths: anything but a UUID is refused where it enters, naming its field
    # (docs/architecture.md#acting-only-on-what-is-ours).
    "cluster_id with a space": (
        spec_with(cluster_id="5f4c6a1e-8d3b-4f2a-9c7e 1b2d3e4f5a6b"),
        [f'{P}.cluster_id: Invalid value: "5f4c6a1e-8d3b-4f2a-9c7e 1b2d3e4f5a6b": {NOT_AN_ID}'],
    ),
    "cluster_id a name": (spec_with(cluster_id="Default"), [f'{P}.cluster_id: Invalid value: "Default": {NOT_AN_ID}']),
    "cluster_id with a trailing newline": (
        spec_with(cluster_id=VALID["cluster_id"] + "\n"),
        [f'{P}.cluster_id: Invalid value: "{VALID["cluster_id"]}\n": {NOT_AN_ID}'],
    ),
    "cluster_id with a path": (
        spec_with(cluster_id=f"{VALID['cluster_id']}/../../vms"),
        [f'{P}.cluster_id: Invalid value: "{VALID["cluster_id"]}/../../vms": {NOT_AN_ID}'],
    ),
    "instance_type_id not an id": (
        spec_with(instance_type_id="Large", cpu=None, memory_mb=None),
        [f'{P}.instance_type_id: Invalid value: "Large": {NOT_AN_ID}'],
    ),
    "storage_domain_id not an id": (
        spec_with(storage_domain_id="data 1"),
        [f'{P}.storage_domain_id: Invalid value: "data 1": {NOT_AN_ID}'],
    ),
    "vnic profile not an id": (
        spec_with(network_interfaces=[{"vnic_profile_id": ID_1}, {"vnic_profile_id": "ovirtmgmt"}]),
        [f'{P}.network_interfaces[1].vnic_profile_id: Invalid value: "ovirtmgmt": {NOT_AN_ID}'],
    ),
    "instance type with memory and cpu": (
        spec_with(instance_type_id=ID_1),
        [
            f"{P}.memory_mb: Forbidden: must not be set together with instance_type_id",
            f"{P}.cpu: Forbidden: must not be set together with instance_type_id",
        ],
    ),
    "instance type with guaranteed memory": (
        spec_with(instance_type_id=ID_1, cpu=None, memory_mb=None, guaranteed_memory_mb=100),
        [f"{P}.guaranteed_memory_mb: Forbidden: must not be set together with instance_type_id"],
    ),
    "memory missing": (
        spec_with(memory_mb=None),
        [f"{P}.memory_mb: Required value: must be set when instance_type_id is not set"],
    ),
    "memory negative": (spec_with(memory_mb=-1), [f"{P}.memory_mb: Invalid value: -1: must be greater than 0"]),
    "memory beyond any engine": (
        spec_with(memory_mb=1000000000000000),
        [f"{P}.memory_mb: Invalid value: 1000000000000000: must be at most 6291456 (6 TiB, the most any oVirt "
         "engine gives a 64-bit VM)"],
    ),
    "cores per socket beyond the engine's limit": (
        spec_with(cpu={"sockets": 1, "cores": 255, "threads": 1}),
        [f"{P}.cpu.cores: Invalid value: 255: must be at most 254"],
    ),
    "threads per core beyond the engine's limit": (
        spec_with(cpu={"sockets": 1, "cores": 2, "threads": 9}),
        [f"{P}.cpu.threads: Invalid value: 9: must be at most 8"],
    ),
    "more vCPUs than a VM can have": (
        spec_with(cpu={"sockets": 4, "cores": 200, "threads": 1}),
        [f'{P}.cpu: Invalid value: "4x200x1": 800 vCPUs; an oVirt VM has at most 710'],
    ),
    "sockets beyond the engine's limit": (
        spec_with(cpu={"sockets": 10001, "cores": 1, "threads": 1}),
        [f"{P}.cpu.sockets: Invalid value: 10001: must be at most 10000",
         f'{P}.cpu: Invalid value: "10001x1x1": 10001 vCPUs; an oVirt VM has at most 710'],
    ),
    "disk beyond a 64-bit byte count": (
        spec_with(os_disk={"size_gb": 2 ** 40}),
        [f"{P}.os_disk.size_gb: Invalid value: {2 ** 40}: must be at most 8589934591 (the engine counts disk sizes "
         "in bytes as a 64-bit number)"],
    ),
    "cpu missing": (spec_with(cpu=None), [f"{P}.cpu: Required value: must be set when instance_type_id is not set"]),
    "cpu sockets zero": (
        spec_with(cpu={"sockets": 0, "cores": 4, "threads": 1}),
        [f"{P}.cpu.sockets: Invalid value: 0: must be greater than 0"],
    ),
    "cpu cores negative": (
        spec_with(cpu={"sockets": 1, "cores": -2, "threads": 1}),
        [f"{P}.cpu.cores: Invalid value: -2: must be greater than 0"],
    ),
    "cpu threads missing": (
        spec_with(cpu={"sockets": 1, "cores": 4}),
        [f"{P}.cpu.threads: Invalid value: 0: must be greater than 0"],
    ),
    "os_disk missing": (spec_with(os_disk=None),
                        [f"{P}.os_disk: Required value: must give the size of the bootable disk"]),
    "os_disk size zero": (
        spec_with(os_disk={"size_gb": 0}),
        [f"{P}.os_disk.size_gb: Invalid value: 0: must be greater than 0"],
    ),
    "os_disk size missing": (
        spec_with(os_disk={}),
        [f"{P}.os_disk.size_gb: Invalid value: 0: must be greater than 0"],
    ),
    "type empty": (spec_with(type=""), [f"{P}.type: Required value: supported values: {SUPPORTED_TYPES}"]),
    "type unknown": (
        spec_with(type="Server"),
        [f'{P}.type: Unsupported value: "Server": supported values: {SUPPORTED_TYPES}'],
    ),
    "auto pinning unknown": (
        spec_with(auto_pinning_policy="adjust"),
        [f'{P}.auto_pinning_policy: Unsupported value: "adjust": supported values: "none", "resize_and_pin"'],
    ),
    "hugepages unsupported": (
        spec_with(hugepages=4096),
        [f"{P}.hugepages: Unsupported value: 4096: supported values: 2048, 1048576"],
    ),
    "guaranteed above memory": (
        spec_with(memory_mb=8192, guaranteed_memory_mb=9000),
        [f"{P}.guaranteed_memory_mb: Invalid value: 9000: must not exceed memory_mb (8192)"],
    ),
    "guaranteed negative": (
        spec_with(guaranteed_memory_mb=-5),
        [f"{P}.guaranteed_memory_mb: Invalid value: -5: must not be negative"],
    ),
    "format unknown": (
        spec_with(format="qcow2"),
        [f'{P}.format: Unsupported value: "qcow2": supported values: "raw", "cow"'],
    ),
    "storage domain with clone false": (
        spec_with(clone=False, storage_domain_id=ID_1),
        [
            f"{P}.storage_domain_id: Forbidden: needs cloned template disks but clone is false; "
            "thin disks stay on the template's storage domain"
        ],
    ),
    "storage domain on desktop without clone": (
        spec_with(type="desktop", storage_domain_id=ID_1),
        [
            f"{P}.storage_domain_id: Forbidden: needs cloned template disks but {THIN}; "
            "thin disks stay on the template's storage domain"
        ],
    ),
    "raw format without clone": (
        spec_with(clone=False, format="raw"),
        [f'{P}.format: Forbidden: "raw" needs cloned template disks but clone is false; thin disks are cow overlays'],
    ),
    "preallocated without clone": (
        spec_with(type="desktop", sparse=False),
        [
            f"{P}.sparse: Forbidden: false (preallocated) needs cloned template disks but {THIN}; "
            "thin disks are sparse"
        ],
    ),
    "affinity group name empty": (
        spec_with(affinity_groups_names=["ok", ""]),
        [f'{P}.affinity_groups_names[1]: Invalid value: "": must be a non-empty affinity group name'],
    ),
    "affinity group name blank": (
        spec_with(affinity_groups_names=["  "]),
        [f'{P}.affinity_groups_names[0]: Invalid value: "  ": must be a non-empty affinity group name'],
    ),
    "affinity group name duplicated": (
        spec_with(affinity_groups_names=["ag", "other", "ag"]),
        [f'{P}.affinity_groups_names[2]: Duplicate value: "ag"'],
    ),
    "vnic profile empty": (
        spec_with(network_interfaces=[{"vnic_profile_id": ID_1}, {}]),
        [f"{P}.network_interfaces[1].vnic_profile_id: Required value: must be the ID of an oVirt vNIC profile"],
    ),
}


@pytest.mark.parametrize("spec, expected", INVALID.values(), ids=INVALID.keys())
def test_each_rule_reports_its_field_and_message(spec, expected):
    assert messages(spec) == expected


@pytest.mark.parametrize("spec, expected", INVALID.values(), ids=INVALID.keys())
def test_yaml_input_is_validated_the_same(spec, expected):
    errors = validate_provider_spec(parse_provider_spec(yaml.safe_dump(spec)))
    assert [str(e) for e in errors] == expected


def test_every_problem_is_reported_at_once_in_a_stable_order():
    bad = {"type": "tank", "cpu": {"sockets": 0, "cores": 0, "threads": 0}, "hugepages": 3}
    assert messages(bad) == [
        f"{P}.userDataSecret: Required value: must reference the Secret holding the Ignition user data",
        f"{P}.template_name: Required value: must name the oVirt template to create the VM from",
        f"{P}.cluster_id: Required value: must be the ID of the oVirt cluster to create the VM in",
        f"{P}.memory_mb: Required value: must be set when instance_type_id is not set",
        f"{P}.cpu.sockets: Invalid value: 0: must be greater than 0",
        f"{P}.cpu.cores: Invalid value: 0: must be greater than 0",
        f"{P}.cpu.threads: Invalid value: 0: must be greater than 0",
        f"{P}.os_disk: Required value: must give the size of the bootable disk",
        f'{P}.type: Unsupported value: "tank": supported values: {SUPPORTED_TYPES}',
        f"{P}.hugepages: Unsupported value: 3: supported values: 2048, 1048576",
    ]


def test_invalid_provider_spec_joins_all_messages_for_the_machine_error_message():
    with pytest.raises(InvalidProviderSpec) as info:
        load_provider_spec(spec_with(type="", os_disk={"size_gb": 0}))
    assert info.value.errors == [
        FieldError(f"{P}.os_disk.size_gb", "Invalid value: 0: must be greater than 0"),
        FieldError(f"{P}.type", f"Required value: supported values: {SUPPORTED_TYPES}"),
    ]
    assert str(info.value) == (
        f"{P}.os_disk.size_gb: Invalid value: 0: must be greater than 0; "
        f"{P}.type: Required value: supported values: {SUPPORTED_TYPES}"
    )


def test_validation_path_prefix_can_be_changed():
    errors = validate_provider_spec(parse_provider_spec(spec_with(type="")), base="value")
    assert [e.path for e in errors] == ["value.type"]


# --- derived settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vm_type, clone, expected",
    [("desktop", None, False), ("server", None, True), ("high_performance", None, True), ("desktop", True, True),
     ("server", False, False)],
)
def test_effective_clone_defaults_by_vm_type(vm_type, clone, expected):
    assert OvirtMachineProviderSpec(type=vm_type, clone=clone).effective_clone is expected


@pytest.mark.parametrize("policy, enabled", [("", False), ("none", False), ("resize_and_pin", True)])
def test_auto_pinning_enabled(policy, enabled):
    assert OvirtMachineProviderSpec(auto_pinning_policy=policy).auto_pinning_enabled is enabled


# --- provider status ----------------------------------------------------------------------------------


def test_provider_status_uses_the_keys_mao_rewrites():
    status = OvirtMachineProviderStatus(instance_id="vm-uuid", instance_state="up")
    assert status.to_dict() == {"instanceId": "vm-uuid", "instanceState": "up"}
    assert parse_provider_status({"instanceId": "vm-uuid", "instanceState": "up", "metadata": {}}) == status
    assert OvirtMachineProviderStatus().to_dict() == {}


# --- the installer's MachineSet -------------------------------------------------------------------------


def test_installer_shaped_sample_machineset_parses_and_validates():
    doc = yaml.safe_load(SAMPLE_MACHINESET.read_text())
    ms = MachineSet.from_dict(doc)
    infra_id = ms.metadata.labels["machine.openshift.io/cluster-api-cluster"]
    spec = load_provider_spec(ms.spec.template.spec.provider_spec.value)
    assert spec.template_name == f"{infra_id}-rhcos"
    assert spec.user_data_secret.name == "worker-user-data"
    assert spec.credentials_secret.name == "ovirt-credentials"
    assert spec.type == "server" and spec.cpu.threads == 1 and spec.os_disk.size_gb > 0
    assert spec.affinity_groups_names == [f"{infra_id}-compute"]
    # The raw YAML text of the value, as a Machine's RawExtension would carry it, parses the same.
    raw = yaml.safe_dump(doc["spec"]["template"]["spec"]["providerSpec"]["value"])
    assert load_provider_spec(raw) == spec


def test_non_utf8_bytes_are_an_invalid_spec():
    with pytest.raises(InvalidProviderSpec, match=r"^spec\.providerSpec\.value: Invalid value: not UTF-8 text"):
        parse_provider_spec(b"\xff\xfe")


def test_the_engines_largest_shapes_are_still_valid():
    """The limits refuse only what no engine gives: the largest shapes a 4.7 cluster accepts pass."""
    spec = spec_with(memory_mb=6 * 1024 * 1024, cpu={"sockets": 2, "cores": 177, "threads": 2},
                     os_disk={"size_gb": 8589934591})
    assert messages(spec) == []
