"""The credentials secret is OpenShift's, read live: TLS is verified by default, a fixed secret is picked up
without a restart, and the password never shows in logs, events or metrics (docs/compatibility.md#credentials)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from hack import ovirt_install
from machines import MACHINE_API_NS, unique_name

WRONG_PASSWORD = "not-the-password-7f3e"


def _apply_secret(menv, name: str, **kwargs) -> None:
    sim = menv.sim
    values = dict(url=sim.url, username=sim.username, password=sim.password,
                  ca_pem=Path(sim.ca_file).read_text())
    values.update(kwargs)
    secret = ovirt_install.credentials_secret(namespace=MACHINE_API_NS, name=name, **values)
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(secret))


def _condition_message(m: dict) -> str:
    return " ".join(c.get("message", "") for c in (m.get("status") or {}).get("conditions", [])
                    if c["type"] == "InstanceExists")


def test_untrusted_tls_and_wrong_password_wait_then_a_fixed_secret_is_used_live(menv):
    secret = unique_name("creds")
    # No CA: the engine's certificate is not trusted, and verification is on by default (ovirt_insecure=false).
    _apply_secret(menv, secret, ca_pem="")
    ctl = menv.controller(extra_args=(f"--credentials-name={secret}",))
    name = menv.create_machine(unique_name())
    m = menv.wait_machine(name, lambda m: "unreachable" in _condition_message(m) or "SSL" in _condition_message(m)
                          or "certificate" in _condition_message(m).lower(), "reporting the TLS failure")
    assert m["status"]["phase"] == "Provisioning"

    _apply_secret(menv, secret, password=WRONG_PASSWORD)
    m = menv.wait_machine(name, lambda m: "password" in _condition_message(m).lower()
                          or "auth" in _condition_message(m).lower() or "401" in _condition_message(m),
                          "reporting the refused login")
    assert m["status"]["phase"] == "Provisioning" and menv.vms_named(name) == []

    _apply_secret(menv, secret)  # rotated to the right credentials: no restart
    menv.wait_phase(name, "Running", timeout=90)

    events = menv.cluster.kubectl("get", "events", "-A", "-o", "json").stdout
    for text in (ctl.log_text(), events, ctl.metrics(), json.dumps(menv.machine(name))):
        assert WRONG_PASSWORD not in text and menv.sim.password not in text


def test_a_refused_secret_named_by_flag_is_reported_by_its_own_name_and_key(menv):
    secret_name = unique_name("creds")
    sim = menv.sim
    secret = ovirt_install.credentials_secret(sim.url, sim.username, sim.password, namespace=MACHINE_API_NS,
                                              name=secret_name)
    secret["data"]["ovirt_insecure"] = base64.b64encode(b"maybe").decode()
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(secret))
    ctl = menv.controller(extra_args=(f"--credentials-name={secret_name}",))
    name = menv.create_machine(unique_name())
    where = f"secret {MACHINE_API_NS}/{secret_name}: key ovirt_insecure"
    m = menv.wait_machine(name, lambda m: where in _condition_message(m), "reporting the refused secret by its name")
    assert "ovirt-credentials" not in _condition_message(m) and m["status"]["phase"] == "Provisioning"
    assert where in ctl.log_text()

    del secret["data"]["ovirt_url"]
    secret["data"]["ovirt_insecure"] = base64.b64encode(b"false").decode()
    menv.cluster.kubectl("replace", "-f", "-", input=yaml.safe_dump(secret))
    where = f"secret {MACHINE_API_NS}/{secret_name}: key ovirt_url is missing"
    menv.wait_machine(name, lambda m: where in _condition_message(m), "reporting the missing key by the secret's name")
