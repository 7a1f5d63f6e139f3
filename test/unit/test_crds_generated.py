"""config/crd is what hack/gen_crds.py generates from api/, and has OpenShift's shapes
(docs/compatibility.md#object-shapes)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hack import gen_crds

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "config" / "crd"


def load(plural: str) -> dict:
    return yaml.safe_load((CRD_DIR / f"machine.openshift.io_{plural}.yaml").read_text())


def version(plural: str) -> dict:
    (v,) = load(plural)["spec"]["versions"]
    return v


def schema(plural: str) -> dict:
    return version(plural)["schema"]["openAPIV3Schema"]


def columns(plural: str) -> list[tuple]:
    return [(c["name"], c["type"], c["jsonPath"], c.get("priority", 0))
            for c in version(plural)["additionalPrinterColumns"]]


def test_committed_crds_equal_generated():
    assert gen_crds.check() == [], "run `python -m hack.gen_crds`"


def test_check_mode_fails_with_a_diff_when_a_file_drifts(tmp_path):
    gen_crds.write(tmp_path)
    assert gen_crds.check(tmp_path) == []
    target = tmp_path / "machine.openshift.io_machines.yaml"
    target.write_text(target.read_text().replace("Provisioning", "Booting", 1))
    (diff,) = gen_crds.check(tmp_path)
    assert "--- committed/machine.openshift.io_machines.yaml" in diff and "+" in diff
    (tmp_path / "kustomization.yaml").unlink()
    assert len(gen_crds.check(tmp_path)) == 2


def test_check_command_exit_status():
    ok = subprocess.run([sys.executable, "-m", "hack.gen_crds", "--check"], cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_generation_is_deterministic_plain_yaml():
    rendered = gen_crds.render()
    assert rendered == gen_crds.render()
    for name, text in rendered.items():
        assert "&id" not in text and "*id" not in text, f"{name} uses YAML anchors"


def test_kustomization_lists_the_machine_api_remediation_and_cluster_api_crds():
    k = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(
        [*(f"machine.openshift.io_{p}.yaml" for p in ("machines", "machinesets", "machinehealthchecks")),
         *(f"remediation.ovirt.org_{p}.yaml" for p in ("ovirtremediationtemplates", "ovirtremediations")),
         *(f"infrastructure.cluster.x-k8s.io_{p}.yaml" for p in ("ovirtclusters", "ovirtmachines",
                                                                 "ovirtmachinetemplates"))]
    )


def test_remediation_template_nests_the_request_spec_where_health_checks_copy_it_from():
    """MachineHealthCheck (OpenShift's and this project's) and NodeHealthCheck copy `spec.template.spec` of the
    template into the request's `spec`: both schemas must hold the same spec there."""
    template = yaml.safe_load((CRD_DIR / "remediation.ovirt.org_ovirtremediationtemplates.yaml").read_text())
    request = yaml.safe_load((CRD_DIR / "remediation.ovirt.org_ovirtremediations.yaml").read_text())
    t_schema = template["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    r_schema = request["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    nested = t_schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    assert nested["properties"] == r_schema["properties"]["spec"]["properties"]
    assert "status" in request["spec"]["versions"][0]["subresources"]
    assert "status" not in template["spec"]["versions"][0].get("subresources", {})


@pytest.mark.parametrize("plural", ["machines", "machinesets", "machinehealthchecks"])
def test_common_shape(plural):
    crd = load(plural)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{plural}.machine.openshift.io"
    assert crd["spec"]["group"] == "machine.openshift.io" and crd["spec"]["scope"] == "Namespaced"
    v = version(plural)
    assert (v["name"], v["served"], v["storage"]) == ("v1beta1", True, True)
    assert v["subresources"]["status"] == {}
    assert schema(plural)["properties"]["metadata"] == {"type": "object"}


def _walk(node: dict, path: str):
    yield path, node
    for key, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}.{key}")
    if "items" in node:
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("plural", ["machines", "machinesets", "machinehealthchecks"])
def test_schemas_are_structural(plural):
    for path, node in _walk(schema(plural), plural):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        for key in node.get("x-kubernetes-list-map-keys", []):
            assert key in node["items"].get("required", []), f"{path}: list-map key {key} must be required"


def test_machine_printer_columns_match_openshift():
    assert columns("machines") == [
        ("Phase", "string", ".status.phase", 0),
        ("Type", "string", ".metadata.labels['machine\\.openshift\\.io/instance-type']", 0),
        ("Region", "string", ".metadata.labels['machine\\.openshift\\.io/region']", 0),
        ("Zone", "string", ".metadata.labels['machine\\.openshift\\.io/zone']", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0),
        ("Node", "string", ".status.nodeRef.name", 1),
        ("ProviderID", "string", ".spec.providerID", 1),
        ("State", "string", ".metadata.annotations['machine\\.openshift\\.io/instance-state']", 1),
    ]
    assert "scale" not in version("machines")["subresources"]
    assert "shortNames" not in load("machines")["spec"]["names"]


def test_machine_schema_keeps_raw_provider_fields_and_conditions_list_map():
    s = schema("machines")
    assert s["properties"]["spec"]["properties"]["providerSpec"]["properties"]["value"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "Provider-specific configuration, for oVirt an OvirtMachineProviderSpec.",
    }
    status = s["properties"]["status"]["properties"]
    assert status["providerStatus"]["x-kubernetes-preserve-unknown-fields"] is True
    assert status["conditions"]["x-kubernetes-list-type"] == "map"
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    hooks = s["properties"]["spec"]["properties"]["lifecycleHooks"]["properties"]["preDrain"]
    assert hooks["x-kubernetes-list-map-keys"] == ["name"]
    assert hooks["items"]["properties"]["name"]["maxLength"] == 256


def test_machineset_scale_subresource_columns_and_validation():
    v = version("machinesets")
    assert v["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    assert columns("machinesets") == [
        ("Desired", "integer", ".spec.replicas", 0),
        ("Current", "integer", ".status.replicas", 0),
        ("Ready", "integer", ".status.readyReplicas", 0),
        ("Available", "string", ".status.availableReplicas", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]
    spec = schema("machinesets")["properties"]["spec"]
    assert spec["required"] == ["selector"]
    assert spec["properties"]["deletePolicy"]["enum"] == ["Random", "Newest", "Oldest"]
    assert spec["properties"]["replicas"]["default"] == 1
    assert spec["properties"]["selector"]["x-kubernetes-map-type"] == "atomic"
    template_meta = spec["properties"]["template"]["properties"]["metadata"]["properties"]
    assert template_meta["labels"] == {"type": "object", "additionalProperties": {"type": "string"},
                                       "description": "Labels to apply."}
    assert schema("machinesets")["properties"]["status"]["properties"]["labelSelector"]["type"] == "string"


def test_mhc_names_columns_and_validation():
    crd = load("machinehealthchecks")
    assert crd["spec"]["names"]["shortNames"] == ["mhc", "mhcs"]
    assert columns("machinehealthchecks") == [
        ("MaxUnhealthy", "string", ".spec.maxUnhealthy", 0),
        ("ExpectedMachines", "integer", ".status.expectedMachines", 0),
        ("CurrentHealthy", "integer", ".status.currentHealthy", 0),
    ]
    spec = schema("machinehealthchecks")["properties"]["spec"]["properties"]
    assert spec["maxUnhealthy"]["x-kubernetes-int-or-string"] is True and "type" not in spec["maxUnhealthy"]
    assert spec["maxUnhealthy"]["default"] == "100%"
    assert spec["nodeStartupTimeout"]["default"] == "10m"
    assert spec["unhealthyConditions"]["minItems"] == 1


@pytest.mark.parametrize(
    "value, ok",
    [("0", True), ("7", True), ("0%", True), ("45%", True), ("100%", True), ("101%", False), ("5.5%", False),
     ("-1", False), ("ten", False)]
)
def test_max_unhealthy_pattern(value, ok):
    pattern = schema("machinehealthchecks")["properties"]["spec"]["properties"]["maxUnhealthy"]["pattern"]
    assert bool(re.search(pattern, value)) is ok


@pytest.mark.parametrize(
    "value, ok",
    [("0", True), ("10m", True), ("1h30m", True), ("1.5h", True), ("300ms", True), ("10", False), ("0xyz", False),
     ("5 m", False)]
)
def test_node_startup_timeout_pattern(value, ok):
    pattern = schema("machinehealthchecks")["properties"]["spec"]["properties"]["nodeStartupTimeout"]["pattern"]
    assert bool(re.search(pattern, value)) is ok
