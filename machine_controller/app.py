"""Wiring: informers, queues, controllers, the oVirt pool and its credentials, leader election, servers."""

from __future__ import annotations

import base64
import threading
import time

import structlog
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from machine_controller.config import Config
from machine_controller.controllers.machine import MachineReconciler
from machine_controller.controllers.machine_metrics import ITEMS as MACHINE_ITEMS, MachineMetrics, machine_families
from machine_controller.controllers.mao_metrics import MaoCollector
from machine_controller.controllers.machineset import add_machineset_controller
from machine_controller.controllers.node_status import node_ready
from machine_controller.controllers.nodelink import (INDEX_INTERNAL_IP, INDEX_PROVIDER_ID, NodeLinkReconciler,
                                                     internal_ip_index, provider_id_index)
from machine_controller.controllers.nodes import OvirtNodeReconciler
from machine_controller.controllers.resources import INFRASTRUCTURES, MACHINES, NODES, SECRETS
from machine_controller.ovirt.actuator import OvirtActuator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import InvalidCredentials, from_secret_data
from machine_controller.ovirt.errors import MissingDependencyError
from machine_controller.runtime.controller import Controller, enqueue_mapped, enqueue_object, when_changed
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import EventHandler, Informer
from machine_controller.runtime.kube import Rest, load_api_client
from machine_controller.runtime.leader_election import LeaderElectionConfig
from machine_controller.runtime.logging import configure_logging
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger("app")
COMPONENT = "ovirt-machine-controller"
_VIP_CACHE_S = 60.0


class CredentialsWatch:
    """Feeds the pool from the credentials secret, live: a rotated secret is used by the next request."""

    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        self.problem: str | None = "secret not seen yet"

    def handler(self) -> EventHandler:
        return EventHandler(on_add=self._apply, on_update=lambda _old, new: self._apply(new),
                            on_delete=lambda _obj: self._clear("secret deleted"))

    def _apply(self, secret: dict) -> None:
        try:
            creds = from_secret_data(secret.get("data"))
        except InvalidCredentials as e:
            self._clear(str(e))
            return
        if self.pool.set_credentials(creds):
            log.info("oVirt credentials loaded", url=creds.url, username=creds.username, fingerprint=creds.fingerprint())
        self.problem = None

    def _clear(self, why: str) -> None:
        log.error("oVirt credentials unusable", problem=why)
        self.problem = why
        self.pool.set_credentials(None)


class UserData:
    """The Ignition config of a Machine, from its user-data secret (key `userData`, reference 4.3 step 2)."""

    def __init__(self, rest: Rest):
        self._rest = rest

    def __call__(self, namespace: str, name: str) -> str:
        try:
            secret = self._rest.get(SECRETS, name, namespace)
        except ApiException as e:
            if e.status == 404:
                raise MissingDependencyError(f"user-data secret {namespace}/{name} not found") from None
            raise
        raw = (secret.get("data") or {}).get("userData")
        if not raw:
            raise MissingDependencyError(f"user-data secret {namespace}/{name} has no key userData")
        return base64.b64decode(raw).decode()


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
            except ApiException as e:
                if e.status not in (404, 403):
                    raise
                vips = set()
            self._cached = (time.monotonic(), vips)
            return vips


def build(config: Config, registry: CollectorRegistry | None = None) -> Manager:
    registry = registry if registry is not None else CollectorRegistry()
    api = load_api_client(config.kubeconfig)
    rest = Rest(api)
    leader = None
    if config.leader_elect:
        leader = LeaderElectionConfig(
            namespace=config.leader_election_namespace, name=config.leader_election_id, identity=config.identity,
            lease_duration=config.lease_duration_s, renew_deadline=config.renew_deadline_s,
            retry_period=config.retry_period_s)
    manager = Manager(
        api, registry=registry,
        health_address=(config.bind_address, config.health_port) if config.health_port else None,
        metrics_address=(config.bind_address, config.metrics_port) if config.metrics_port else None,
        leader_election=leader)

    pool = ConnectionPool(size=config.ovirt_connections)
    client = OvirtClient(pool)
    creds = CredentialsWatch(pool)
    secrets = manager.add_informer(Informer(
        api, SECRETS, namespace=config.credentials_namespace,
        field_selector=f"metadata.name={config.credentials_name}", resync_period=config.resync_s))
    secrets.add_handler(creds.handler())
    if manager.health is not None:
        manager.health.add_readyz_check("ovirt-credentials", lambda: creds.problem is None)
    manager.on_shutdown(pool.close)

    indexers = {INDEX_PROVIDER_ID: provider_id_index, INDEX_INTERNAL_IP: internal_ip_index}
    machines = manager.add_informer(Informer(api, MACHINES, namespace=config.namespace or None,
                                             resync_period=config.resync_s, indexers=indexers))
    nodes = manager.add_informer(Informer(api, NODES, resync_period=config.resync_s, indexers=indexers))
    events = EventRecorder(api, COMPONENT)
    manager.on_shutdown(events.close)

    def queue(name: str) -> WorkQueue:
        return WorkQueue(name, controller_rate_limiter(base=config.backoff_base_s, cap=config.backoff_cap_s),
                         registry=registry)

    actuator = OvirtActuator(client, UserData(rest), ClusterVips(rest))
    mao = MaoCollector()
    registry.register(mao)
    mao.add(MACHINE_ITEMS, machines.store.list, machine_families)
    machine_rec = MachineReconciler(rest, machines.store, actuator, events, MachineMetrics(registry))
    mq = queue("machine")
    machines.add_handler(enqueue_object(mq))
    manager.add_controller(Controller("machine", mq, machine_rec.reconcile, workers=config.workers, registry=registry))

    link = NodeLinkReconciler(rest, nodes.store, machines.store)
    lq = queue("nodelink")
    # What nodelink reads of a Node; heartbeats (status.conditions) do not matter to it.
    nodes.add_handler(when_changed(enqueue_object(lq), ("spec", "providerID"), ("spec", "taints"),
                                   ("status", "addresses"), ("metadata", "labels"), ("metadata", "annotations"),
                                   ("metadata", "deletionTimestamp"), node_ready))
    machines.add_handler(enqueue_mapped(lq, lambda m: [] if m["metadata"].get("deletionTimestamp")
                                        else link.nodes_for_machine(m)))
    manager.add_controller(Controller("nodelink", lq, link.reconcile_quietly, workers=2, registry=registry))

    node_rec = OvirtNodeReconciler(rest, nodes.store, client, events)
    nq = queue("ovirt-node")
    # A Node is looked up in oVirt when it appears, when its providerID or readiness changes (a VM that stopped
    # or vanished makes its Node NotReady/Unknown), and at every resync.
    nodes.add_handler(when_changed(enqueue_object(nq), ("spec", "providerID"), node_ready))
    manager.add_controller(Controller("ovirt-node", nq, node_rec.reconcile, workers=2, registry=registry))

    add_machineset_controller(manager, api, rest, machines, nodes, events, queue("machineset"),
                              namespace=config.namespace or None, resync_s=config.resync_s, mao=mao)
    return manager


def run(config: Config) -> int:
    configure_logging(config.log_level)
    manager = build(config)
    log.info("starting", namespace=config.namespace or "(all)", workers=config.workers,
             leader_elect=config.leader_elect, identity=config.identity)
    return manager.run()
