"""The two Secrets a migration between the Machine API and Cluster API carries over
(docs/cluster-api.md#migrating-from-the-machine-api): the user data, and the engine's credentials; and which of them
the converted objects name.

Both front ends read the same things under other keys: the user data is `userData` for the Machine API and `value`
with its `format` for Cluster API (api/capi.py); the credentials are `ovirt_url`, `ovirt_username`, ... in the
Machine API's `ovirt-credentials` and `url`, `username`, ... in an OvirtCluster's identity Secret
(api/infrastructure.py). A converted Secret keeps every key it had and gains the other side's, under its own name: the
same Secret then serves both front ends while Machines move one by one, and converting it back is converting it
again. A key that the other side has no place for (`ovirt_cafile`, a path on the controller's host) is refused by
name unless empty.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Iterator, Mapping

from api import capi
from api.field_errors import FieldError
from api.infrastructure import (
    IDENTITY_CA_KEY,
    IDENTITY_INSECURE_KEY,
    IDENTITY_PASSWORD_KEY,
    IDENTITY_URL_KEY,
    IDENTITY_USERNAME_KEY,
)
from api.migration.fields import ConversionError

USER_DATA_KEY = "userData"
# The Machine API's credentials keys and the identity keys they become (machine_controller/ovirt/credentials.py).
CREDENTIAL_KEYS = (("ovirt_url", IDENTITY_URL_KEY), ("ovirt_username", IDENTITY_USERNAME_KEY),
                   ("ovirt_password", IDENTITY_PASSWORD_KEY), ("ovirt_insecure", IDENTITY_INSECURE_KEY),
                   ("ovirt_ca_bundle", IDENTITY_CA_KEY))
_CA_FILE_KEY = "ovirt_cafile"


def _values(secret: Mapping[str, Any], what: str) -> dict[str, str]:
    """The Secret's values as text: `data` (base64) and `stringData` (as a manifest may give them)."""
    if secret.get("apiVersion") != "v1" or secret.get("kind") != "Secret":
        raise ConversionError(what, [FieldError("kind", "Unsupported value: a v1 Secret is expected")])
    values: dict[str, str] = {}
    errors = []
    for key, raw in (secret.get("data") or {}).items():
        try:
            values[key] = base64.b64decode(raw, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, TypeError):
            errors.append(FieldError(f"data[{key}]", "Invalid value: not base64 of UTF-8 text"))
    values.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
    if errors:
        raise ConversionError(what, errors)
    return values


def _secret(source: Mapping[str, Any], values: Mapping[str, str], namespace: str) -> dict[str, Any]:
    meta = source.get("metadata") or {}
    out_meta: dict[str, Any] = {"name": meta.get("name"), "namespace": namespace or meta.get("namespace")}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out_meta[key] = dict(meta[key])
    return {"apiVersion": "v1", "kind": "Secret", "type": source.get("type") or "Opaque", "metadata": out_meta,
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(values.items())}}


def bootstrap_format(user_data: str) -> capi.BootstrapFormat:
    """Ignition when the text is an Ignition config (a JSON object with an `ignition` key, what OpenShift's
    installer writes), else cloud-config."""
    try:
        doc = json.loads(user_data)
    except ValueError:
        return capi.BootstrapFormat.CLOUD_CONFIG
    return capi.BootstrapFormat.IGNITION if isinstance(doc, dict) and "ignition" in doc \
        else capi.BootstrapFormat.CLOUD_CONFIG


def user_data_to_bootstrap(secret: Mapping[str, Any], namespace: str = "") -> dict[str, Any]:
    """The Machine API's user data Secret, also holding Cluster API's bootstrap data keys (`value`, `format`)."""
    what = f"Secret {(secret.get('metadata') or {}).get('name')}"
    values = _values(secret, what)
    if not values.get(USER_DATA_KEY):
        raise ConversionError(what, [FieldError(f"data[{USER_DATA_KEY}]", "Required value: the user data")])
    data = values[USER_DATA_KEY]
    known = values.get(capi.BOOTSTRAP_DATA_KEY)
    if known is not None and known != data:
        raise ConversionError(what, [FieldError(f"data[{capi.BOOTSTRAP_DATA_KEY}]",
                                                f"Invalid value: differs from data[{USER_DATA_KEY}]")])
    return _secret(secret, {**values, capi.BOOTSTRAP_DATA_KEY: data,
                            capi.BOOTSTRAP_FORMAT_KEY: values.get(capi.BOOTSTRAP_FORMAT_KEY)
                            or bootstrap_format(data).value}, namespace)


def bootstrap_to_user_data(secret: Mapping[str, Any], namespace: str = "") -> dict[str, Any]:
    """Cluster API's bootstrap data Secret, also holding the Machine API's `userData`."""
    what = f"Secret {(secret.get('metadata') or {}).get('name')}"
    values = _values(secret, what)
    if not values.get(capi.BOOTSTRAP_DATA_KEY):
        raise ConversionError(what, [FieldError(f"data[{capi.BOOTSTRAP_DATA_KEY}]", "Required value: the data")])
    data = values[capi.BOOTSTRAP_DATA_KEY]
    known = values.get(USER_DATA_KEY)
    if known is not None and known != data:
        raise ConversionError(what, [FieldError(f"data[{USER_DATA_KEY}]",
                                                f"Invalid value: differs from data[{capi.BOOTSTRAP_DATA_KEY}]")])
    return _secret(secret, {**values, USER_DATA_KEY: data}, namespace)


def credentials_to_identity(secret: Mapping[str, Any], namespace: str = "") -> dict[str, Any]:
    """The Machine API's credentials Secret, also holding an OvirtCluster identity's keys."""
    what = f"Secret {(secret.get('metadata') or {}).get('name')}"
    values = _values(secret, what)
    errors = [FieldError(f"data[{_CA_FILE_KEY}]", "has no Cluster API equivalent (a path on the controller's host; "
                                                  f"give the CA itself in {CREDENTIAL_KEYS[-1][0]})")
              for _ in [0] if values.get(_CA_FILE_KEY, "").strip()]
    errors += [FieldError(f"data[{old}]", f"Invalid value: differs from data[{new}]")
               for old, new in CREDENTIAL_KEYS if new in values and old in values and values[new] != values[old]]
    if errors:
        raise ConversionError(what, errors)
    converted = {new: values[old] for old, new in CREDENTIAL_KEYS if values.get(old)}
    return _secret(secret, {**values, **converted}, namespace)


def identity_to_credentials(secret: Mapping[str, Any], namespace: str = "") -> dict[str, Any]:
    """An OvirtCluster's identity Secret, also holding the Machine API's credentials keys (all six, as
    cloud-credential-operator writes them)."""
    what = f"Secret {(secret.get('metadata') or {}).get('name')}"
    values = _values(secret, what)
    errors = [FieldError(f"data[{new}]", f"Invalid value: differs from data[{old}]")
              for old, new in CREDENTIAL_KEYS if new in values and old in values and values[new] != values[old]]
    if errors:
        raise ConversionError(what, errors)
    converted = {old: values.get(new, "") for old, new in CREDENTIAL_KEYS}
    # The Machine API requires ovirt_insecure; an identity without `insecure` is a verified connection.
    converted["ovirt_insecure"] = converted["ovirt_insecure"] or "false"
    return _secret(secret, {_CA_FILE_KEY: "", **values, **converted}, namespace)


def secrets_named(objects: Iterator[Mapping[str, Any]] | list[Mapping[str, Any]]) -> tuple[set[str], set[str]]:
    """(user data Secrets, credentials Secrets) that converted Machine API objects name."""
    user_data: set[str] = set()
    credentials: set[str] = set()
    for obj in objects:
        spec = obj.get("spec") or {}
        machine_spec = (spec.get("template") or {}).get("spec") if obj.get("kind") == "MachineSet" else spec
        value = ((machine_spec or {}).get("providerSpec") or {}).get("value") or {}
        for key, names in (("userDataSecret", user_data), ("credentialsSecret", credentials)):
            name = (value.get(key) or {}).get("name")
            if name:
                names.add(name)
    return user_data, credentials
