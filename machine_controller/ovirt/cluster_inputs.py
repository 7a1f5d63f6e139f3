"""What the oVirt provider reads from the cluster: the credentials secret (followed live), a Machine's
Ignition user data, and the API/ingress VIPs that must never be reported as a Machine's address."""

from __future__ import annotations

import base64
import re
import threading
import time
from typing import Callable

import structlog

from machine_controller.controllers.provider import InvalidMachineConfiguration
from machine_controller.runtime.informer import EventHandler
from machine_controller.runtime.kube import SECRETS, ErrorKind, Resource, Rest, classify, is_not_found, object_key

from .connection import ConnectionPool
from .credentials import InvalidCredentials, from_secret
from .errors import MissingDependencyError
from .ttl_cache import TtlCache

log = structlog.get_logger(__name__)
_VIP_CACHE_S = 60.0
# How long a user-data Secret's text serves the Machines created after it was read (UserData).
USER_DATA_KEEP_S = 10.0
USER_DATA_PATH = "spec.providerSpec.value.userDataSecret"
# What XML 1.0 cannot carry (a strict UTF-8 decoding has no surrogates): the SDK writes the user data into the
# create request's XML, cutting it short at a NUL and sending other control characters as they are, which the
# engine then refuses with 400 (docs/compatibility.md#user-data).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
# OpenShift's cluster-wide Infrastructure object: where the API and ingress VIPs of an oVirt cluster are.
INFRASTRUCTURES = Resource("config.openshift.io", "v1", "infrastructures", "Infrastructure", namespaced=False)


class CredentialsWatch:
    """Feeds the pool from the credentials secret, live: a rotated secret is used by the next request."""

    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        self.problem: str | None = "secret not seen yet"

    def handler(self) -> EventHandler:
        return EventHandler(on_add=self._apply, on_update=lambda _old, new: self._apply(new),
                            on_delete=lambda obj: self._clear(f"secret {object_key(obj)} was deleted"))

    def _apply(self, secret: dict) -> None:
        try:
            creds = from_secret(secret)
        except InvalidCredentials as e:
            self._clear(str(e))
            return
        if self.pool.set_credentials(creds):
            log.info("oVirt credentials loaded", url=creds.url, username=creds.username,
                     fingerprint=creds.fingerprint())
        self.problem = None

    def _clear(self, why: str) -> None:
        log.error("oVirt credentials unusable", problem=why)
        self.problem = why
        self.pool.set_credentials(None, problem=why)


class UserData:
    """The Ignition config of a Machine, from its user-data secret (key `userData`, docs/compatibility.md#user-data).
    Text the engine could never take (not UTF-8, or characters its XML cannot carry) is an invalid configuration
    naming the field, found before any VM exists.

    A text read is kept for `keep_s`: the Machines of a burst (a MachineSet scaled by a thousand) share one read of
    their Secret instead of a GET each, and a Secret changed since is used by the Machines created after that time.
    A Secret missing, without `userData` or refused is read again at the next create, so a fixed one is seen at once
    (docs/compatibility.md#user-data)."""

    def __init__(self, rest: Rest, keep_s: float = USER_DATA_KEEP_S, clock: Callable[[], float] = time.monotonic,
                 *, key: str = "userData", path: str = USER_DATA_PATH, format_key: str | None = None,
                 formats: tuple[str, ...] = (), default_format: str = ""):
        """`key`: the Secret's key holding the text; `path`: the field that names the Secret, in refusals. With
        `format_key`, the Secret says in that key (absent: `default_format`) which of `formats` the text is, and
        any other is refused: Cluster API's bootstrap data Secret (`value`, `format`: cloud-config or ignition).
        Both formats reach the guest the same way, as the VM's initialization custom script: the engine hands it
        to cloud-init, or to Ignition on an Ignition OS (docs/compatibility.md#user-data)."""
        self._rest = rest
        self._kept: TtlCache[str] = TtlCache(keep_s, clock)
        self.key = key
        self.path = path
        self._format_key = format_key
        self._formats = formats
        self._default_format = default_format

    def __call__(self, namespace: str, name: str) -> str:
        return self._kept.get((namespace, name), lambda: self._read(namespace, name))

    def _read(self, namespace: str, name: str) -> str:
        try:
            secret = self._rest.get(SECRETS, name, namespace)
        except Exception as e:
            if is_not_found(e):
                raise MissingDependencyError(f"user-data secret {namespace}/{name} not found") from None
            raise
        raw = (secret.get("data") or {}).get(self.key)
        if not raw:
            raise MissingDependencyError(f"user-data secret {namespace}/{name} has no key {self.key}")
        if self._format_key is not None:
            encoded = (secret.get("data") or {}).get(self._format_key)
            fmt = base64.b64decode(encoded).decode("utf-8", "replace") if encoded else self._default_format
            if fmt not in self._formats:
                raise InvalidMachineConfiguration(
                    f"{self.path}: Invalid value: {name!r}: the {self._format_key} of Secret {namespace}/{name} is "
                    f"{fmt!r}; supported values: {', '.join(repr(f) for f in self._formats)}")
        data = base64.b64decode(raw)
        where = f"{self.path}: Invalid value: {name!r}: the {self.key} of Secret {namespace}/{name}"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidMachineConfiguration(
                f"{where} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None
        bad = _NOT_XML.search(text)
        if bad:
            raise InvalidMachineConfiguration(
                f"{where} holds the control character U+{ord(bad.group()):04X} at offset {bad.start()}, which the "
                "oVirt API cannot carry")
        return text


class ClusterVips:
    """API and ingress VIPs of an OpenShift-on-oVirt cluster (Infrastructure `cluster`,
    status.platformStatus.ovirt), excluded from Machine addresses. Absent on plain Kubernetes: none."""

    def __init__(self, rest: Rest):
        self._rest = rest
        self._lock = threading.Lock()
        self._cached: tuple[float, set[str]] = (0.0, set())

    def __call__(self) -> set[str]:
        with self._lock:
            at, vips = self._cached
            if time.monotonic() - at < _VIP_CACHE_S:
                return vips
            try:
                infra = self._rest.get(INFRASTRUCTURES, "cluster")
                ovirt = ((infra.get("status") or {}).get("platformStatus") or {}).get("ovirt") or {}
                vips = {ip for key in ("apiServerInternalIP", "ingressIP") for ip in [ovirt.get(key)] if ip}
                vips |= set(ovirt.get("apiServerInternalIPs") or []) | set(ovirt.get("ingressIPs") or [])
            except Exception as e:
                # Plain Kubernetes has no Infrastructure object; a deployment may not grant reading it.
                if classify(e) not in (ErrorKind.NOT_FOUND, ErrorKind.FORBIDDEN):
                    raise
                vips = set()
            self._cached = (time.monotonic(), vips)
            return vips
