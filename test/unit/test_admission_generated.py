"""config/admission is what hack/gen_admission.py generates from api/: the committed policy carries the limits and
allowed values of the controller's own validation, typed once (docs/architecture.md#admission-time-validation).
The policy's behaviour on a real API server is test/e2e/test_admission_policy.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from api import machinehealthcheck, validation
from api._fields import json_fields
from api.ids import OVIRT_ID_PATTERN
from api.provider_spec import OvirtMachineProviderSpec
from hack import gen_admission

REPO = Path(__file__).resolve().parents[2]


def committed_policy(file: str = gen_admission.POLICY_FILE) -> dict:
    docs = yaml.safe_load_all((gen_admission.ADMISSION_DIR / file).read_text())
    return next(d for d in docs if d and d["kind"] == "ValidatingAdmissionPolicy")


def committed_policies() -> list[dict]:
    return [committed_policy(f) for f in (gen_admission.POLICY_FILE, gen_admission.MHC_POLICY_FILE)]


def test_committed_policy_equals_generated():
    assert gen_admission.check() == [], "run `python -m hack.gen_admission`"


def test_check_mode_fails_with_a_diff_when_a_file_drifts(tmp_path):
    gen_admission.write(tmp_path)
    assert gen_admission.check(tmp_path) == []
    target = tmp_path / gen_admission.POLICY_FILE
    target.write_text(target.read_text().replace(str(validation.MAX_VCPUS), "999", 1))
    (diff,) = gen_admission.check(tmp_path)
    assert f"--- committed/{gen_admission.POLICY_FILE}" in diff and "+" in diff
    (tmp_path / "kustomization.yaml").unlink()
    assert len(gen_admission.check(tmp_path)) == 2


def test_check_command_exit_status():
    ok = subprocess.run([sys.executable, "-m", "hack.gen_admission", "--check"], cwd=REPO, capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_limits_come_from_the_validation_constants(monkeypatch):
    """A limit changed in api/validation.py changes the policy: the number is not typed a second time."""
    monkeypatch.setattr(gen_admission, "MAX_MEMORY_MB", 12345678)
    rendered = gen_admission.render()[gen_admission.POLICY_FILE]
    assert "memory_mb <= 12345678" in rendered
    assert f"<= {validation.MAX_MEMORY_MB}" not in rendered


def test_every_declared_field_has_a_type_rule():
    messages = [v["message"] for v in committed_policy()["spec"]["validations"]]
    for f in json_fields(OvirtMachineProviderSpec):
        key = f.metadata["key"]
        assert any(m.startswith(f"providerSpec.value.{key}: Invalid value: expected ") for m in messages), key


def test_every_id_field_must_match_the_engine_id_pattern_of_api_ids():
    """The UUID form is api/ids.py's, not typed again; every id of the spec has its rule
    (docs/architecture.md#acting-only-on-what-is-ours)."""
    validations = committed_policy()["spec"]["validations"]
    for field in ("cluster_id", "instance_type_id", "storage_domain_id", "network_interfaces[].vnic_profile_id"):
        prefix = f"providerSpec.value.{field}: Invalid value: must be an oVirt ID"
        rule = next((v for v in validations if v["message"].startswith(prefix)), None)
        assert rule is not None, field
        assert f".matches('{OVIRT_ID_PATTERN}')" in rule["expression"], rule


def test_the_remediation_template_rules_speak_the_controllers_words():
    """Each message of the MachineHealthCheck policy is one of api/machinehealthcheck.py's, for the field it names."""
    validations = committed_policy(gen_admission.MHC_POLICY_FILE)["spec"]["validations"]
    fields = [v["message"].split(":", 1)[0] for v in validations]
    assert fields == [f"{machinehealthcheck.REMEDIATION_TEMPLATE_PATH}.{f}" for f in
                      ("apiVersion", "apiVersion", "apiVersion", "kind", "kind", "name")]
    for text in (machinehealthcheck.API_VERSION_REQUIRED, machinehealthcheck.API_VERSION_FORM,
                 machinehealthcheck.BUILTIN_GROUP, machinehealthcheck.KIND_REQUIRED, machinehealthcheck.KIND_FORM,
                 machinehealthcheck.NAME_REQUIRED):
        assert any(text.replace("'", "\\'") in v["messageExpression"] for v in validations), text


@pytest.mark.parametrize("file", [gen_admission.POLICY_FILE, gen_admission.MHC_POLICY_FILE])
def test_updates_are_judged_only_when_they_write_what_is_checked_and_failures_admit(file):
    spec = committed_policy(file)["spec"]
    assert spec["failurePolicy"] == "Ignore"
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE", "UPDATE"]
    (condition,) = spec["matchConditions"]
    assert condition["expression"].startswith("request.operation == 'CREATE' || ")
    assert "oldObject.?spec." in condition["expression"]


def test_updates_are_judged_only_when_they_write_the_provider_spec_and_failures_admit():
    spec = committed_policy()["spec"]
    assert spec["failurePolicy"] == "Ignore"
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE", "UPDATE"]
    (condition,) = spec["matchConditions"]
    assert condition["expression"].startswith("request.operation == 'CREATE' || ")
    assert "oldObject.?spec.?providerSpec.?value" in condition["expression"]
    assert "oldObject.?spec.?template.?spec.?providerSpec.?value" in condition["expression"]


def test_generation_is_deterministic_plain_yaml():
    rendered = gen_admission.render()
    assert rendered == gen_admission.render()
    for name, text in rendered.items():
        assert "&id" not in text and "*id" not in text, f"{name} uses YAML anchors"
        assert text.startswith(gen_admission.HEADER)


def test_messages_are_one_line():
    """The API server drops a message with a newline (and falls back to the static one)."""
    for v in (v for p in committed_policies() for v in p["spec"]["validations"]):
        assert "\n" not in v["message"] and "\\n" not in v["messageExpression"], v["message"]
