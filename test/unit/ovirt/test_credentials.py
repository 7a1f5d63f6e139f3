import base64

import pytest

from machine_controller.ovirt.credentials import InvalidCredentials, from_secret_data


def _enc(**values: str) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


SIX = dict(ovirt_url="https://engine.example/ovirt-engine/api", ovirt_username="admin@internal",
           ovirt_password="s3cret-pass", ovirt_cafile="", ovirt_insecure="false", ovirt_ca_bundle="PEM")


def test_reads_openshifts_six_keys():
    creds = from_secret_data(_enc(**SIX))
    assert creds.url == SIX["ovirt_url"] and creds.username == "admin@internal"
    assert creds.password == "s3cret-pass" and creds.insecure is False and creds.ca_bundle == "PEM"


@pytest.mark.parametrize("value,expected", [("true", True), ("1", True), ("T", True), ("False", False), ("0", False)])
def test_insecure_parses_like_go_parsebool(value, expected):
    assert from_secret_data(_enc(**{**SIX, "ovirt_insecure": value})).insecure is expected


@pytest.mark.parametrize("value", ["", "yes", "maybe"])
def test_insecure_that_is_not_a_boolean_rejects_the_secret(value):
    with pytest.raises(InvalidCredentials, match="ovirt_insecure"):
        from_secret_data(_enc(**{**SIX, "ovirt_insecure": value}))


@pytest.mark.parametrize("key", ["ovirt_url", "ovirt_username", "ovirt_password"])
def test_missing_required_key_is_named(key):
    values = {k: v for k, v in SIX.items() if k != key}
    with pytest.raises(InvalidCredentials, match=key):
        from_secret_data(_enc(**values))


def test_password_never_appears_in_repr_or_errors():
    creds = from_secret_data(_enc(**SIX))
    assert "s3cret-pass" not in repr(creds)
    assert "s3cret-pass" not in creds.fingerprint()
    with pytest.raises(InvalidCredentials) as err:
        from_secret_data(_enc(**{**SIX, "ovirt_insecure": "s3cret-pass"[:0] + "nope"}))
    assert "s3cret-pass" not in str(err.value)


def test_fingerprint_changes_with_any_field():
    a = from_secret_data(_enc(**SIX))
    b = from_secret_data(_enc(**{**SIX, "ovirt_password": "other"}))
    assert a.fingerprint() != b.fingerprint()
