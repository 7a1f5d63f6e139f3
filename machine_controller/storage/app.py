"""`ovirt-volume-provisioner`: the provisioner's own process (the same runtime and oVirt client as the Machine
controller, its own informers, credentials watch, metrics and leader lease)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Callable, TypeVar

from prometheus_client import CollectorRegistry

from machine_controller.config import PORT, WORKERS, FlagParser, add_kubeconfig_flag
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import SECRET_NAME, SECRET_NAMESPACE, InvalidCredentials, from_secret
from machine_controller.ovirt.request_metrics import RequestMetrics
from machine_controller.runtime.controller import Controller, enqueue_mapped
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import EventHandler, Informer
from machine_controller.runtime.kube import SECRETS, Rest, load_api_client
from machine_controller.runtime.leader_election import LeaderElectionConfig
from machine_controller.runtime.logging import get_logger
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.workqueue import WorkQueue

from .disks import Disks
from .metrics import StorageMetrics
from .provisioner import PROVISIONER, PVCS, PVS, STORAGE_CLASSES, Provisioner

T = TypeVar("T")
log = get_logger(__name__)


class CountingClient(OvirtClient):
    """Counts every request by what it does (the label is the call's description without the object's id)."""

    def __init__(self, pool: ConnectionPool, metrics: StorageMetrics, registry: CollectorRegistry) -> None:
        super().__init__(pool, metrics=RequestMetrics.of(registry))
        self.metrics = metrics

    def call(self, what: str, fn: Callable[[Any], T]) -> T:
        def counted(s: Any) -> T:
            self.metrics.requests.labels(what.split(" ")[0]).inc()
            return fn(s)
        return super().call(what, counted)


def credentials_handler(pool: ConnectionPool) -> EventHandler:
    def apply(obj: dict) -> None:
        try:
            pool.set_credentials(from_secret(obj))
        except InvalidCredentials as e:
            log.warning("ovirt credentials unusable", error=str(e))
            pool.set_credentials(None, problem=str(e))

    def forget(_obj: dict) -> None:
        pool.set_credentials(None)

    return EventHandler(on_add=apply, on_update=lambda _old, new: apply(new), on_delete=forget)


def build(args: argparse.Namespace, registry: CollectorRegistry | None = None) -> tuple[Manager, Provisioner]:
    registry = registry if registry is not None else CollectorRegistry()
    api = load_api_client(args.kubeconfig)
    rest = Rest(api)
    leader = None
    if args.leader_elect:
        leader = LeaderElectionConfig(namespace=args.leader_election_namespace, name=PROVISIONER,
                                      identity=f"{socket.gethostname()}_{os.getpid()}")
    manager = Manager(api, registry=registry,
                      health_address=(args.bind_address, args.health_port) if args.health_port else None,
                      metrics_address=(args.bind_address, args.metrics_port) if args.metrics_port else None,
                      leader_election=leader)
    metrics = StorageMetrics(registry)
    pool = ConnectionPool(size=2, user_agent=PROVISIONER)
    manager.on_shutdown(pool.close)
    secrets = manager.add_informer(Informer(api, SECRETS, namespace=args.credentials_namespace,
                                            field_selector=f"metadata.name={args.credentials_name}"))
    secrets.add_handler(credentials_handler(pool))
    pvcs = manager.add_informer(Informer(api, PVCS))
    pvs = manager.add_informer(Informer(api, PVS))
    classes = manager.add_informer(Informer(api, STORAGE_CLASSES))
    events = EventRecorder(api, PROVISIONER)
    manager.on_shutdown(events.close)
    provisioner = Provisioner(rest, Disks(CountingClient(pool, metrics, registry)), pvcs.store, pvs.store,
                              classes.store, events, metrics)
    queue = WorkQueue("ovirt-volume-provisioner", controller_rate_limiter(base=0.5, cap=60.0), registry=registry)
    pvcs.add_handler(enqueue_mapped(queue, provisioner.pvc_keys))
    pvs.add_handler(enqueue_mapped(queue, provisioner.pv_keys))
    manager.add_controller(Controller("ovirt-volume-provisioner", queue, provisioner.reconcile,
                                      workers=args.workers, registry=registry))
    return manager, provisioner


def parse(argv: list[str]) -> argparse.Namespace:
    p = FlagParser(prog=PROVISIONER, description=__doc__)
    add_kubeconfig_flag(p)
    p.add_argument("--credentials-namespace", default=SECRET_NAMESPACE)
    p.add_argument("--credentials-name", default=SECRET_NAME)
    p.add_argument("--bind-address", default="0.0.0.0")
    p.add_argument("--metrics-port", type=PORT, default=8083)
    p.add_argument("--health-port", type=PORT, default=9442)
    p.add_argument("--workers", type=WORKERS, default=2)
    p.add_argument("--leader-elect", action="store_true")
    p.add_argument("--leader-election-namespace", default=SECRET_NAMESPACE)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    manager, _ = build(parse(sys.argv[1:] if argv is None else argv))
    return manager.run()


if __name__ == "__main__":
    sys.exit(main())
