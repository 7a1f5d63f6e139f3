"""`python -m machine_controller.migrate` on the installer's files (config/samples: the worker MachineSet, its user
data and credentials Secrets): both directions, the Secrets each front end reads under its own keys, and a refusal
that names every field and writes nothing (docs/cluster-api.md#migrating-from-the-machine-api)."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from api.migration import ConversionError, credentials_to_identity, identity_to_credentials, user_data_to_bootstrap
from machine_controller.migrate import main
from machine_controller.ovirt.credentials import from_secret
from machine_controller.ovirt.engines import IDENTITY_KEYS

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "config" / "samples"
INSTALLER_FILES = [str(SAMPLES / f) for f in ("machineset.yaml", "worker-user-data.yaml", "ovirt-credentials.yaml")]


def run(argv: list[str], stdin: str = "") -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, [d for d in yaml.safe_load_all(out.getvalue()) if d], err.getvalue()


def decoded(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def by_kind(objects: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for o in objects:
        out.setdefault(o["kind"], []).append(o)
    return out


def test_the_installers_files_convert_to_cluster_api_with_the_secrets_both_sides_read():
    code, objects, err = run(["to-capi", "--cluster", "ocp", *INSTALLER_FILES])
    assert (code, err) == (0, "")
    kinds = by_kind(objects)
    assert sorted(kinds) == ["MachineDeployment", "MachineSet", "OvirtCluster", "OvirtMachineTemplate", "Secret"]
    (oc,) = kinds["OvirtCluster"]
    assert oc["spec"] == {"identityRef": {"name": "ovirt-credentials"},
                          "clusterId": "5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b"}
    assert (oc["metadata"]["name"], oc["metadata"]["namespace"]) == ("ocp", "openshift-machine-api")
    secrets = {s["metadata"]["name"]: decoded(s) for s in kinds["Secret"]}
    user_data = secrets["worker-user-data"]
    # The same Secret serves both: the Machine API's userData, Cluster API's value and format (Ignition here).
    assert user_data["userData"] == user_data["value"] == '{"ignition":{"version":"3.2.0"}}'
    assert user_data["format"] == "ignition" and user_data["disableTemplating"] == "true"
    identity = next(s for s in kinds["Secret"] if s["metadata"]["name"] == "ovirt-credentials")
    creds = from_secret(identity, keys=IDENTITY_KEYS)  # what the OvirtCluster controller reads of it
    assert (creds.url, creds.username, creds.password, creds.insecure) == (
        "https://127.0.0.1:8443/ovirt-engine/api", "admin@internal", "demo-password", True)
    assert from_secret(identity) == creds  # and what the Machine API's controller reads, unchanged


def test_converting_back_gives_the_installers_machineset_and_secrets():
    _, capi_objects, _ = run(["to-capi", "--cluster", "ocp", *INSTALLER_FILES])
    code, objects, err = run(["to-mapi"], stdin=yaml.safe_dump_all(capi_objects))
    assert (code, err) == (0, "")
    kinds = by_kind(objects)
    (ms,) = kinds["MachineSet"]
    original = yaml.safe_load((SAMPLES / "machineset.yaml").read_text())
    assert ms["metadata"] == original["metadata"]
    value = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
    assert value["credentialsSecret"] == {"name": "ovirt-credentials"}  # from the OvirtCluster's identityRef
    assert value["userDataSecret"] == {"name": "worker-user-data"}
    assert ms["spec"]["authoritativeAPI"] == "ClusterAPI"
    assert sorted(s["metadata"]["name"] for s in kinds["Secret"]) == ["ovirt-credentials", "worker-user-data"]


def test_a_kubectl_list_on_stdin_converts_and_a_machine_comes_with_its_ovirtmachine():
    m = yaml.safe_load((SAMPLES / "machineset.yaml").read_text())["spec"]["template"]
    machine = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
               "metadata": {"name": "w-1", "namespace": "openshift-machine-api", **m["metadata"]},
               "spec": {**m["spec"], "providerID": "ovirt://0b6f5d1c-3a5e-4c1f-9f0e-2a7d9e4b8c11"}}
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [machine]})
    code, objects, err = run(["to-capi", "--cluster", "ocp", "--namespace", "workers", "--no-ovirt-cluster"], listed)
    assert (code, err) == (0, "")
    assert [(o["kind"], o["metadata"]["namespace"]) for o in objects] == [("Machine", "workers"),
                                                                          ("OvirtMachine", "workers")]


def test_a_refusal_names_every_field_and_writes_nothing():
    ms = yaml.safe_load((SAMPLES / "machineset.yaml").read_text())
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["someField"] = 1
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}
    code, objects, err = run(["to-capi", "--cluster", "ocp"], yaml.safe_dump_all([ms, other]))
    assert code == 1 and objects == []
    assert "spec.template.spec.providerSpec.value.someField: has no Cluster API equivalent" in err
    assert "ConfigMap n/c: not a Machine API MachineSet or Machine" in err


def test_to_mapi_refuses_a_machinedeployment_without_its_template():
    _, capi_objects, _ = run(["to-capi", "--cluster", "ocp", INSTALLER_FILES[0]])
    md = next(o for o in capi_objects if o["kind"] == "MachineDeployment")
    code, objects, err = run(["to-mapi"], yaml.safe_dump(md))
    assert code == 1 and objects == []
    assert "the OvirtMachineTemplate ocp-demo-x7k2p-worker-" in err and "is not among the objects given" in err


def test_the_command_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "machine_controller.migrate", "to-capi", "--cluster", "ocp",
                           INSTALLER_FILES[0]], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [d["kind"] for d in yaml.safe_load_all(done.stdout)] == ["MachineDeployment", "OvirtMachineTemplate",
                                                                   "MachineSet", "OvirtCluster"]


# --- the Secrets ------------------------------------------------------------------------------------------------


def _secret(name: str, **values: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "openshift-machine-api"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}}


def test_cloud_config_user_data_is_said_to_be_cloud_config():
    converted = decoded(user_data_to_bootstrap(_secret("u", userData="#cloud-config\nruncmd: []\n")))
    assert converted["format"] == "cloud-config"


def test_a_ca_file_path_has_no_identity_equivalent():
    with pytest.raises(ConversionError, match=r"data\[ovirt_cafile\]: has no Cluster API equivalent"):
        credentials_to_identity(_secret("c", ovirt_url="https://e/ovirt-engine/api", ovirt_cafile="/etc/ca.pem"))


def test_an_identity_becomes_the_machine_apis_six_keys():
    identity = _secret("id", url="https://e/ovirt-engine/api", username="admin@internal", password="p",
                       **{"ca.crt": "PEM"})
    creds = from_secret(identity_to_credentials(identity))
    assert (creds.url, creds.username, creds.password, creds.insecure, creds.ca_bundle) == (
        "https://e/ovirt-engine/api", "admin@internal", "p", False, "PEM")


def test_secret_keys_that_disagree_are_refused():
    with pytest.raises(ConversionError, match=r"data\[value\]: Invalid value: differs from data\[userData\]"):
        user_data_to_bootstrap(_secret("u", userData="a", value="b"))
