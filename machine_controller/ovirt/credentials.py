"""The oVirt credentials secret, exactly as OpenShift ships it (docs/compatibility.md#credentials).

`openshift-machine-api/ovirt-credentials` carries six string keys, produced by the cloud-credential-operator:
ovirt_url, ovirt_username, ovirt_password, ovirt_cafile, ovirt_insecure, ovirt_ca_bundle. `ovirt_insecure`
must parse as a boolean, as Go's strconv.ParseBool does; a missing or empty value rejects the whole secret.
A refusal names where the values came from (the Secret actually read, which flags may name, or the file or
directory a driver read them from), the key and what is wrong, never a value of another key.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.parse
from dataclasses import dataclass, field

SECRET_NAMESPACE = "openshift-machine-api"
SECRET_NAME = "ovirt-credentials"

@dataclass(frozen=True)
class SecretKeys:
    """The key names of a credentials Secret: the Machine API's `ovirt-credentials` (the default), or an
    OvirtCluster's identity Secret (api/infrastructure.py IDENTITY_*_KEY), one parser for both front ends. Without
    `insecure_required`, an absent insecure key means a verified connection."""

    url: str = "ovirt_url"
    username: str = "ovirt_username"
    password: str = "ovirt_password"
    insecure: str = "ovirt_insecure"
    ca_file: str | None = "ovirt_cafile"
    ca_bundle: str = "ovirt_ca_bundle"
    insecure_required: bool = True


MACHINE_API_KEYS = SecretKeys()

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class InvalidCredentials(ValueError):
    """The secret is unusable; the message names the key, never a value."""


@dataclass(frozen=True)
class OvirtCredentials:
    url: str
    username: str
    password: str = field(repr=False)
    insecure: bool = False
    ca_file: str = ""
    ca_bundle: str = field(default="", repr=False)

    def fingerprint(self) -> str:
        """Changes whenever any field changes; safe to log (a hash, not the values)."""
        h = hashlib.sha256()
        for part in (self.url, self.username, self.password, str(self.insecure), self.ca_file, self.ca_bundle):
            h.update(part.encode() + b"\0")
        return h.hexdigest()[:12]


def _parse_bool(value: str, source: str, key: str) -> bool:
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidCredentials(f"{source}: key {key} must be a boolean (true or false), got {value!r}")


def from_secret(secret: dict, keys: SecretKeys = MACHINE_API_KEYS) -> OvirtCredentials:
    """Parse a Secret object as read from the API server; refusals name it as `secret namespace/name`."""
    meta = secret.get("metadata") or {}
    return from_secret_data(secret.get("data"), source=f"secret {meta.get('namespace')}/{meta.get('name')}",
                            keys=keys)


def from_secret_data(data: dict[str, str] | None, *, source: str, encoded: bool = True,
                     keys: SecretKeys = MACHINE_API_KEYS) -> OvirtCredentials:
    """Parse a Secret's `data` (base64 values, `encoded=True`) or `stringData`-like plain values, under the key
    names `keys`. `source` names where they came from in every refusal (no default: a default named the wrong object
    once)."""
    if not data:
        raise InvalidCredentials(f"{source} has no data")
    values: dict[str, str] = {}
    for key, raw in data.items():
        try:
            values[key] = base64.b64decode(raw, validate=True).decode() if encoded else raw
        except (ValueError, UnicodeDecodeError) as e:
            raise InvalidCredentials(f"{source}: key {key} is not valid base64 text") from e
    for key in (keys.url, keys.username, keys.password):
        # Blank is empty: a URL of spaces or a newline, stripped below, reached the SDK as "No host present".
        if not values.get(key, "").strip():
            raise InvalidCredentials(f"{source}: key {key} is missing or empty")
    if keys.insecure_required and not values.get(keys.insecure):
        raise InvalidCredentials(f"{source}: key {keys.insecure} is missing or empty (it must be true or false)")
    url = values[keys.url].strip()
    _check_url(url, source, keys.url)
    insecure = values.get(keys.insecure, "").strip()
    return OvirtCredentials(
        url=url,
        username=values[keys.username].strip(),
        password=values[keys.password],
        insecure=_parse_bool(insecure, source, keys.insecure) if insecure else False,
        ca_file=values.get(keys.ca_file, "").strip() if keys.ca_file else "",
        ca_bundle=values.get(keys.ca_bundle, ""),
    )


def _check_url(url: str, source: str, key: str) -> None:
    """The engine's API URL must name a scheme libcurl speaks to the engine and a host: anything else reached the
    SDK, whose libcurl answered "No host present" without a word of the key at fault."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as e:  # a malformed port or IPv6 literal
        raise InvalidCredentials(f"{source}: key {key} is not a URL ({e}); it must be like "
                                 "https://engine.example/ovirt-engine/api") from None
    if parts.scheme not in ("https", "http") or not host or any(c.isspace() for c in url):
        raise InvalidCredentials(f"{source}: key {key} must be the engine's API URL with a scheme and a host, "
                                 "like https://engine.example/ovirt-engine/api")
