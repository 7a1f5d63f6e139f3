"""One oVirt actuator per engine identity, for Cluster API's front end (the `Engines` seam, controllers/provider.py).

Each OvirtCluster names the Secret of its engine (`spec.identityRef`: keys url, username, password, ca.crt or
insecure), so one controller serves Clusters on several engines: the contract's multi-tenancy rule. An engine's
connection pool, client, VM lists and spec objects live in one `OvirtActuator`, made when an identity is first asked
for. The Secret is read again after `keep_s` (a GET, not an informer: a controller watching every Secret of every
namespace would keep them all in memory to read a few): a new resourceVersion with the same URL swaps the
credentials live, as the Machine API's secret does (connection.py); another URL is another engine, whose actuator
replaces the old one. A Secret missing or unusable raises MissingDependency naming it and the key at fault, and is
read again at the next call.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import structlog
from prometheus_client import CollectorRegistry

from api import capi
from api.infrastructure import (
    IDENTITY_CA_KEY,
    IDENTITY_INSECURE_KEY,
    IDENTITY_PASSWORD_KEY,
    IDENTITY_URL_KEY,
    IDENTITY_USERNAME_KEY,
    OVIRT_MACHINE_KIND,
)
from machine_controller.controllers.provider import EngineIdentity, MissingDependency
from machine_controller.runtime.cluster_proxy import TRUSTED_CA_BUNDLE
from machine_controller.runtime.kube import SECRETS, Rest, is_not_found

from .actuator import OvirtActuator
from .client import OvirtClient
from .cluster_inputs import UserData
from .connection import ConnectionPool
from .credentials import InvalidCredentials, OvirtCredentials, SecretKeys, from_secret
from .owner_mark import OwnerMarks
from .power import OvirtPower
from .request_metrics import RequestMetrics
from .ttl_cache import TtlCache

log = structlog.get_logger(__name__)

IDENTITY_KEYS = SecretKeys(url=IDENTITY_URL_KEY, username=IDENTITY_USERNAME_KEY, password=IDENTITY_PASSWORD_KEY,
                           insecure=IDENTITY_INSECURE_KEY, ca_file=None, ca_bundle=IDENTITY_CA_KEY,
                           insecure_required=False)
# How long a read of an identity Secret serves: a rotated password is used within this time.
IDENTITY_KEEP_S = 10.0
# The field of a Cluster API Machine naming its bootstrap data Secret, in a refusal of that data.
BOOTSTRAP_DATA_PATH = "Machine spec.bootstrap.dataSecretName"
# OvirtMachine names are unique per namespace only, and Clusters of several namespaces share an engine: a VM is an
# OvirtMachine's only when it bears its mark as well as its name (owner_mark.py).
OWNER_MARKS = OwnerMarks(kind=OVIRT_MACHINE_KIND)


@dataclass
class _Engine:
    resource_version: str
    credentials: OvirtCredentials
    pool: ConnectionPool
    actuator: OvirtActuator


class OvirtEngines:
    def __init__(self, rest: Rest, registry: CollectorRegistry | None = None, *, connections: int = 4,
                 timeout_s: int = 60, trusted_ca_bundle: str = TRUSTED_CA_BUNDLE, keep_s: float = IDENTITY_KEEP_S,
                 clock: Callable[[], float] = time.monotonic,
                 new_pool: Callable[[], ConnectionPool] | None = None):
        """`new_pool` makes an engine's connection pool (tests give one of their own)."""
        self._rest = rest
        self._metrics = RequestMetrics.of(registry)
        self._new_pool = new_pool or (lambda: ConnectionPool(size=connections, timeout_s=timeout_s,
                                                             trusted_ca_bundle=trusted_ca_bundle))
        self._secrets: TtlCache[dict] = TtlCache(keep_s, clock)
        self.bootstrap_data = UserData(rest, key=capi.BOOTSTRAP_DATA_KEY, path=BOOTSTRAP_DATA_PATH,
                                        format_key=capi.BOOTSTRAP_FORMAT_KEY,
                                        formats=tuple(f.value for f in capi.BootstrapFormat),
                                        default_format=capi.DEFAULT_BOOTSTRAP_FORMAT.value)
        self._lock = threading.Lock()
        self._engines: dict[EngineIdentity, _Engine] = {}
        self._wake: Callable[[str], None] | None = None

    def wake_with(self, wake: Callable[[str], None]) -> None:
        """`wake(key)` makes an OvirtMachine look again now: each engine's VM lists wake the OvirtMachines waiting for
        them (cluster_vm_lists.py), those of engines made later too."""
        with self._lock:
            self._wake = wake
            engines = list(self._engines.values())
        for engine in engines:
            engine.actuator.wake_with(wake)

    def actuator(self, identity: EngineIdentity) -> OvirtActuator:
        secret = self._secrets.get(identity, lambda: self._read(identity))
        rv = secret["metadata"].get("resourceVersion", "")
        with self._lock:
            engine = self._engines.get(identity)
            if engine is not None and engine.resource_version == rv:
                return engine.actuator
        try:
            creds = from_secret(secret, keys=IDENTITY_KEYS)
        except InvalidCredentials as e:
            raise MissingDependency(f"the engine identity of {identity.namespace}: {e}") from None
        retired = None
        with self._lock:
            engine = self._engines.get(identity)
            if engine is not None and engine.credentials.url == creds.url:
                # The same engine: the pool takes the new credentials live, and the actuator keeps what it knows.
                engine.pool.set_credentials(creds)
                engine.resource_version, engine.credentials = rv, creds
                return engine.actuator
            retired = engine
            pool = self._new_pool()
            pool.set_credentials(creds)
            actuator = OvirtActuator(OvirtClient(pool, metrics=self._metrics), self.bootstrap_data,
                                     user_data_path=BOOTSTRAP_DATA_PATH, owner_marks=OWNER_MARKS)
            if self._wake is not None:
                actuator.wake_with(self._wake)
            self._engines[identity] = _Engine(rv, creds, pool, actuator)
        log.info("oVirt engine identity loaded", secret=f"{identity.namespace}/{identity.secret_name}",
                 url=creds.url, username=creds.username, fingerprint=creds.fingerprint())
        if retired is not None:
            retired.pool.close()
        return actuator

    def power(self, identity: EngineIdentity, namespace: str) -> OvirtPower:
        """Fencing's power control on this engine, for the VMs of `namespace`'s OvirtMachines (their owner mark
        checked): the `EnginePower` seam, on the engine's own connections."""
        return OvirtPower(self.actuator(identity).client, owner_marks=OWNER_MARKS, namespace=namespace)

    def missing_clusters(self, identity: EngineIdentity, cluster_ids: Sequence[str]) -> list[str]:
        client = self.actuator(identity).client
        return [c for c in dict.fromkeys(cluster_ids) if client.cluster(c) is None]

    def forget(self, key: str) -> None:
        with self._lock:
            engines = list(self._engines.values())
        for engine in engines:
            engine.actuator.forget(key)

    def close(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.pool.close()

    def _read(self, identity: EngineIdentity) -> dict:
        try:
            return self._rest.get(SECRETS, identity.secret_name, identity.namespace)
        except Exception as e:
            if is_not_found(e):
                raise MissingDependency(f"engine identity Secret {identity.namespace}/{identity.secret_name} not "
                                        "found (the OvirtCluster's spec.identityRef.name)") from None
            raise
