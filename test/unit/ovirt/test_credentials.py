import base64

import pytest

from machine_controller.ovirt.cluster_inputs import CredentialsWatch
from machine_controller.ovirt.connection import ConnectionPool, NoCredentials
from machine_controller.ovirt.credentials import InvalidCredentials, from_secret, from_secret_data


def _enc(**values: str) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


def _secret(namespace: str, name: str, **values: str) -> dict:
    return {"metadata": {"namespace": namespace, "name": name}, "data": _enc(**values)}


DEFAULT = ("openshift-machine-api", "ovirt-credentials")
SIX = dict(ovirt_url="https://engine.example/ovirt-engine/api", ovirt_username="admin@internal",
           ovirt_password="s3cret-pass", ovirt_cafile="", ovirt_insecure="false", ovirt_ca_bundle="PEM")


def test_reads_openshifts_six_keys():
    creds = from_secret(_secret(*DEFAULT, **SIX))
    assert creds.url == SIX["ovirt_url"] and creds.username == "admin@internal"
    assert creds.password == "s3cret-pass" and creds.insecure is False and creds.ca_bundle == "PEM"


@pytest.mark.parametrize("value,expected", [("true", True), ("1", True), ("T", True), ("False", False), ("0", False)])
def test_insecure_parses_like_go_parsebool(value, expected):
    assert from_secret(_secret(*DEFAULT, **{**SIX, "ovirt_insecure": value})).insecure is expected


@pytest.mark.parametrize("value", ["", "yes", "maybe"])
def test_insecure_that_is_not_a_boolean_rejects_the_secret(value):
    with pytest.raises(InvalidCredentials, match="ovirt_insecure"):
        from_secret(_secret(*DEFAULT, **{**SIX, "ovirt_insecure": value}))


@pytest.mark.parametrize("key", ["ovirt_url", "ovirt_username", "ovirt_password"])
def test_missing_required_key_is_named(key):
    values = {k: v for k, v in SIX.items() if k != key}
    with pytest.raises(InvalidCredentials, match=key):
        from_secret(_secret(*DEFAULT, **values))


def test_password_never_appears_in_repr_or_errors():
    creds = from_secret(_secret(*DEFAULT, **SIX))
    assert "s3cret-pass" not in repr(creds)
    assert "s3cret-pass" not in creds.fingerprint()
    with pytest.raises(InvalidCredentials) as err:
        from_secret(_secret(*DEFAULT, **{**SIX, "ovirt_insecure": "s3cret-pass"[:0] + "nope"}))
    assert "s3cret-pass" not in str(err.value)


def test_fingerprint_changes_with_any_field():
    a = from_secret(_secret(*DEFAULT, **SIX))
    b = from_secret(_secret(*DEFAULT, **{**SIX, "ovirt_password": "other"}))
    assert a.fingerprint() != b.fingerprint()


def _refusal(secret: dict) -> tuple[str, str]:
    """What the controller reports for a Secret given by --credentials-namespace/--credentials-name: its readiness
    problem, and the error a request to the engine gets meanwhile."""
    pool = ConnectionPool(size=1)
    watch = CredentialsWatch(pool)
    watch.handler().on_add(secret)
    with pytest.raises(NoCredentials) as err:
        with pool.connection():
            pass
    return str(watch.problem), str(err.value)


@pytest.mark.parametrize("key", ["ovirt_url", "ovirt_password", "ovirt_insecure"])
def test_the_controller_reports_a_missing_key_against_the_secret_it_read(key):
    values = {k: v for k, v in SIX.items() if k != key}
    for message in _refusal(_secret("team-a", "engine-creds", **values)):
        assert "secret team-a/engine-creds" in message and f"key {key}" in message and "missing" in message
        assert "ovirt-credentials" not in message


def test_the_controller_reports_a_bad_insecure_value_against_the_secret_it_read():
    for message in _refusal(_secret("team-a", "engine-creds", **{**SIX, "ovirt_insecure": "maybe"})):
        assert "secret team-a/engine-creds" in message and "key ovirt_insecure" in message
        assert "boolean" in message and "ovirt-credentials" not in message


@pytest.mark.parametrize("key", ["ovirt_url", "ovirt_username", "ovirt_password", "ovirt_insecure"])
def test_a_missing_key_is_reported_against_the_secret_read(key):
    values = {k: v for k, v in SIX.items() if k != key}
    with pytest.raises(InvalidCredentials) as err:
        from_secret(_secret("team-a", "engine-creds", **values))
    message = str(err.value)
    assert "secret team-a/engine-creds" in message and f"key {key}" in message and "missing" in message
    assert "ovirt-credentials" not in message


def test_a_bad_insecure_value_is_reported_against_the_secret_read():
    with pytest.raises(InvalidCredentials) as err:
        from_secret(_secret("team-a", "engine-creds", **{**SIX, "ovirt_insecure": "maybe"}))
    message = str(err.value)
    assert "secret team-a/engine-creds" in message and "key ovirt_insecure" in message
    assert "boolean" in message and "'maybe'" in message and "ovirt-credentials" not in message


def test_a_secret_without_data_is_named():
    with pytest.raises(InvalidCredentials, match="secret team-a/engine-creds has no data"):
        from_secret({"metadata": {"namespace": "team-a", "name": "engine-creds"}})


def test_text_that_is_not_base64_names_the_secret_and_the_key():
    secret = _secret("team-a", "engine-creds", **SIX)
    secret["data"]["ovirt_password"] = "%%%"
    with pytest.raises(InvalidCredentials) as err:
        from_secret(secret)
    assert "secret team-a/engine-creds" in str(err.value) and "key ovirt_password" in str(err.value)


def test_credentials_not_from_a_secret_are_named_by_their_source():
    with pytest.raises(InvalidCredentials, match="credentials directory /etc/ovirt: key ovirt_url is missing"):
        from_secret_data({"ovirt_insecure": "true"}, encoded=False, source="credentials directory /etc/ovirt")


@pytest.mark.parametrize("url", ["engine.example", "engine.example/ovirt-engine/api", "https://", "https:///ovirt-engine/api",
                                 "ftp://engine.example/ovirt-engine/api", "https://engine example/ovirt-engine/api"])
def test_an_engine_url_without_scheme_or_host_is_refused_by_its_key(url):
    """Such a URL reached the SDK, whose libcurl answered "No host present", with no word of the key at fault."""
    with pytest.raises(InvalidCredentials) as e:
        from_secret(_secret("ns", "mine", **{**SIX, "ovirt_url": url}))
    assert "secret ns/mine: key ovirt_url" in str(e.value) and "https://" in str(e.value)


@pytest.mark.parametrize("url", ["https://engine.example/ovirt-engine/api", "http://10.0.0.1:8080/ovirt-engine/api",
                                 "https://[fd00::1]/ovirt-engine/api"])
def test_an_engine_url_with_scheme_and_host_is_taken(url):
    assert from_secret(_secret(*DEFAULT, **{**SIX, "ovirt_url": url})).url == url
