"""Wires informers, controllers, leader election and the health/metrics servers into one process lifecycle,
like controller-runtime's Manager.

Order, and why:
- Servers and informers start at once, leader or not: a standby replica keeps a warm cache so it can take over
  fast, and readiness means "caches synced", independent of leadership (controller-runtime does the same, so a
  standby is Ready and a rollout is not blocked by the leader's lease).
- Controllers' workers start only when leading *and* synced: reconciling from a partial cache would, for
  example, see a MachineSet with too few Machines and create extras.
- Losing leadership ends the process (exit code 1), as controller-runtime does: carrying on would risk two
  writers; the Deployment restarts us as a fresh candidate.
- SIGTERM/SIGINT: stop taking keys, let in-flight reconciles finish within `shutdown_timeout`, release the
  Lease so the successor starts at once, then stop informers and servers. A second signal exits immediately.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable

from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry, Gauge

from . import rest_metrics
from .controller import Controller
from .informer import Informer
from .leader_election import LeaderElectionConfig, LeaderElector
from .logging import get_logger
from .metrics import family
from .metrics_auth import MetricsAuth
from .server import HealthServer, ServingCert


def _leader_gauge(registry: CollectorRegistry) -> Gauge:
    return Gauge("leader_election_master_status", "Gauge of if the reporting system is master of the relevant lease, "
                 "0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.", ["name"],
                 registry=registry)


class Manager:
    def __init__(
        self,
        api_client: ApiClient,
        registry: CollectorRegistry | None = None,
        health_address: tuple[str, int] | None = ("0.0.0.0", 9440),
        metrics_address: tuple[str, int] | None = ("0.0.0.0", 8081),
        leader_election: LeaderElectionConfig | None = None,
        shutdown_timeout: float = 30.0,
        metrics_cert: ServingCert | None = None,
        metrics_auth: MetricsAuth | None = None,
    ) -> None:
        self.api_client = api_client
        self.registry = registry
        self.shutdown_timeout = shutdown_timeout
        self.informers: list[Informer] = []
        self.controllers: list[Controller] = []
        self._on_shutdown: list[Callable[[], Any]] = []
        self._stop = threading.Event()
        self._stopping = False
        self._exit_code = 0
        self._log = get_logger("manager")
        self._controllers_started = threading.Event()

        self.servers: list[HealthServer] = []
        self.health: HealthServer | None = None
        same_port = (health_address is not None and metrics_address is not None
                     and tuple(metrics_address) == tuple(health_address))
        if same_port and (metrics_cert is not None or metrics_auth is not None):
            # Probes are plain HTTP without a token; protected metrics need a port of their own.
            raise ValueError("protected metrics need a port other than the health port")
        if health_address is not None:
            self.health = HealthServer(*health_address, registry=registry, serve_metrics=same_port)
            self.servers.append(self.health)
        if metrics_address is not None and (health_address is None or tuple(metrics_address) != tuple(health_address)):
            self.servers.append(HealthServer(*metrics_address, registry=registry, serve_health=False,
                                             serving_cert=metrics_cert, metrics_auth=metrics_auth))
        if self.health is not None:
            self.health.add_readyz_check("informers-synced", self.informers_synced)

        rest_metrics.instrument(api_client, registry)
        self.elector: LeaderElector | None = None
        if leader_election is not None:
            self.elector = LeaderElector(api_client, leader_election, on_started_leading=self._start_controllers,
                                         on_stopped_leading=self._leadership_lost)
            # client-go's gauge: 1 while this replica holds the lease, 0 while it stands by.
            leading = family(registry, "leader_election_master_status", _leader_gauge)
            leading.labels(leader_election.name).set_function(lambda: 1.0 if self.is_leader() else 0.0)

    def add_informer(self, informer: Informer) -> Informer:
        self.informers.append(informer)
        return informer

    def add_controller(self, controller: Controller) -> Controller:
        self.controllers.append(controller)
        return controller

    def on_shutdown(self, callback: Callable[[], Any]) -> None:
        """Run `callback` at shutdown, after the controllers drained (e.g. flush an EventRecorder)."""
        self._on_shutdown.append(callback)

    def informers_synced(self) -> bool:
        return all(informer.has_synced() for informer in self.informers)

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def start(self) -> None:
        """Start everything in background threads; `wait()` or `run()` to block."""
        for server in self.servers:
            server.start()
        for informer in self.informers:
            informer.start()
        if self.elector is not None:
            self.elector.start()
        else:
            self._start_controllers()

    def _start_controllers(self) -> None:
        # Called on the elector's thread: hand the wait for sync to another thread so renewals go on.
        def wait_then_start() -> None:
            while not self._stop.is_set():
                if self.informers_synced():
                    for controller in self.controllers:
                        controller.start()
                    self._controllers_started.set()
                    return
                self._stop.wait(0.1)

        threading.Thread(target=wait_then_start, name="start-controllers", daemon=True).start()

    def _leadership_lost(self) -> None:
        if self._stopping:
            return
        self._log.error("leadership lost; exiting so a fresh candidate can take over")
        self._exit_code = 1
        self._stop.set()

    def stop(self) -> None:
        """Ask for a graceful shutdown (thread-safe, idempotent)."""
        self._stop.set()

    def wait(self) -> int:
        """Block until stopped, then shut down gracefully; the process exit code."""
        while not self._stop.wait(1.0):
            pass
        self.shutdown()
        return self._exit_code

    def run(self) -> int:
        """`start()`, handle SIGTERM/SIGINT, block, shut down. Returns the exit code."""
        if threading.current_thread() is threading.main_thread():
            self._install_signal_handlers()
        self.start()
        return self.wait()

    def _install_signal_handlers(self) -> None:
        def handle(signum: int, _frame: Any) -> None:
            if self._stop.is_set():
                os._exit(1)  # second signal: the operator wants us gone now
            self._log.info("signal received; shutting down", signal=signal.Signals(signum).name)
            self._stop.set()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def shutdown(self) -> None:
        self._stopping = True
        self._stop.set()
        deadline = time.monotonic() + self.shutdown_timeout
        drained = True
        for controller in self.controllers:
            drained &= controller.stop(max(0.0, deadline - time.monotonic()))
        for callback in self._on_shutdown:
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - shutdown continues whatever one hook does
                self._log.warning("shutdown hook failed", error=str(exc))
        if self.elector is not None:
            # Release only once no reconcile runs any more: the successor must not overlap with our writes.
            self.elector.stop(release=drained)
        for informer in self.informers:
            informer.stop()
        for server in self.servers:
            server.stop()
        self._log.info("stopped", drained=drained)
