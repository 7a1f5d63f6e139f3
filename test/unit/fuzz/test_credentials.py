"""The oVirt credentials Secret (machine_controller/ovirt/credentials.py): any data, base64 or not, gives credentials
or InvalidCredentials naming the key, never showing the password or the CA bundle; credentials that parse can be
used: a URL and a user name that are not blank (docs/compatibility.md#credentials)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from machine_controller.ovirt.credentials import InvalidCredentials, from_secret

from .strategies import texts

KEYS = ("ovirt_url", "ovirt_username", "ovirt_password", "ovirt_cafile", "ovirt_insecure", "ovirt_ca_bundle")
# Marked values: a message showing one is seen as leaking it, whatever else the message says.
_SECRET_VALUES = {"ovirt_password": "pw-", "ovirt_ca_bundle": "-----BEGIN "}


def _plain_value(key: str) -> st.SearchStrategy:
    common = {
        "ovirt_url": st.sampled_from(["https://engine.example/ovirt-engine/api", " ", ""]),
        "ovirt_username": st.sampled_from(["admin@internal", " ", ""]),
        "ovirt_insecure": st.sampled_from(["true", "false", "1", "0", "T", "f", " true ", "yes", ""]),
    }.get(key, st.nothing())
    value = st.one_of(common, texts)
    return value.map(lambda v: _SECRET_VALUES[key] + v) if key in _SECRET_VALUES else value


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


@st.composite
def secret_data(draw):
    """(data as the Secret holds it, whether its values are base64 of the plain ones)."""
    # Each of the six keys nine times in ten (a secret mostly as shipped), and a few others.
    keys = [k for k in KEYS if draw(st.integers(0, 9))] + draw(st.lists(texts, max_size=2))
    plain = {k: draw(_plain_value(k)) for k in keys}
    data = {k: v if draw(st.integers(0, 9)) == 0 else _b64(v) for k, v in plain.items()}
    return data, plain


@given(secret_data())
def test_any_secret_gives_usable_credentials_or_a_refusal_naming_a_key(case):
    data, plain = case
    try:
        creds = from_secret({"metadata": {"namespace": "ns", "name": "creds"}, "data": data})
    except InvalidCredentials as e:
        message = str(e)
        assert "secret ns/creds" in message
        assert "has no data" in message or any(f"key {k}" in message for k in (*KEYS, *data)), message
        for key in _SECRET_VALUES:
            assert key not in plain or plain[key] not in message, message
        return
    assert creds.url.strip() and creds.username.strip(), creds


@pytest.mark.parametrize("key", ["ovirt_url", "ovirt_username"])
def test_a_blank_url_or_user_name_is_refused_naming_its_key(key):
    # Found by test_any_secret_gives_usable_credentials_or_a_refusal_naming_a_key in a long run (ovirt_username
    # " "): the key was present and not empty, then stripped to nothing, and the engine was asked with no user.
    plain = {"ovirt_url": "https://engine.example/ovirt-engine/api", "ovirt_username": "admin@internal",
             "ovirt_password": "pw", "ovirt_insecure": "false", key: " "}
    with pytest.raises(InvalidCredentials, match=f"key {key}"):
        from_secret({"metadata": {"namespace": "ns", "name": "creds"}, "data": {k: _b64(v) for k, v in plain.items()}})
