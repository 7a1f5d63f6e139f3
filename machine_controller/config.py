"""Every setting of the controller process, with its default and --help text: the one place they live."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass

from machine_controller.ovirt.credentials import SECRET_NAME, SECRET_NAMESPACE


# Every controller the process can run, by the name `--controllers` takes (kube-controller-manager's style). On
# OpenShift, machine-api-operator runs its own machineset, nodelink and machinehealthcheck controllers, so this
# process runs only the actuator side there (docs/architecture.md#deployment-modes).
CONTROLLER_NAMES = ("machine", "machineset", "nodelink", "machinehealthcheck", "remediation", "ovirt-nodes")


def select_controllers(spec: str) -> tuple[str, ...]:
    """`*` (everything), names, and `-name` to leave one out: "*,-machineset" or "machine,ovirt-nodes"."""
    chosen: set[str] = set()
    removed: set[str] = set()
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name = item[1:] if item.startswith("-") else item
        if name != "*" and name not in CONTROLLER_NAMES:
            raise ValueError(f"unknown controller {name!r}; known: {', '.join(CONTROLLER_NAMES)}")
        if item.startswith("-"):
            removed.add(name)
        elif name == "*":
            chosen.update(CONTROLLER_NAMES)
        else:
            chosen.add(name)
    selected = tuple(n for n in CONTROLLER_NAMES if n in chosen and n not in removed)
    if not selected:
        raise ValueError(f"no controller selected by {spec!r}")
    return selected


def _controllers_arg(value: str) -> tuple[str, ...]:
    try:
        return select_controllers(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclass(frozen=True)
class Config:
    kubeconfig: str | None
    controllers: tuple[str, ...]
    namespace: str
    credentials_namespace: str
    credentials_name: str
    workers: int
    resync_s: float
    backoff_base_s: float
    backoff_cap_s: float
    ovirt_connections: int
    max_concurrent_power_cycles: int
    leader_elect: bool
    leader_election_namespace: str
    leader_election_id: str
    lease_duration_s: float
    renew_deadline_s: float
    retry_period_s: float
    health_port: int
    metrics_port: int
    bind_address: str
    log_level: str
    identity: str


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ovirt-machine-controller",
        description="Reconciles machine.openshift.io Machines into oVirt VMs, links them to their Nodes, and "
        "keeps oVirt Nodes' providerIDs (the OpenShift Machine API with the oVirt actuator).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    env = os.environ.get
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig file; in-cluster config when unset")
    p.add_argument("--controllers", type=_controllers_arg, default="*", metavar="LIST",
                   help="controllers to run: '*' for all, names, '-name' to leave one out (e.g. "
                        "'machine,ovirt-nodes,remediation' beside machine-api-operator's own); known: "
                        + ", ".join(CONTROLLER_NAMES))
    p.add_argument("--namespace", default="openshift-machine-api",
                   help="namespace whose Machines are reconciled; '' for all namespaces")
    p.add_argument("--credentials-namespace", default=SECRET_NAMESPACE, help="namespace of the oVirt credentials secret")
    p.add_argument("--credentials-name", default=SECRET_NAME, help="name of the oVirt credentials secret")
    p.add_argument("--workers", type=int, default=8,
                   help="concurrent Machine reconciles (MAO runs one; waits are requeues here, so more is safe)")
    p.add_argument("--resync-period", dest="resync_s", type=float, default=600.0,
                   help="seconds between full re-reconciles of every object (CAPO's SyncPeriod)")
    p.add_argument("--backoff-base", dest="backoff_base_s", type=float, default=1.0,
                   help="first retry delay of a failing reconcile, doubled per failure")
    p.add_argument("--backoff-cap", dest="backoff_cap_s", type=float, default=300.0, help="longest retry delay")
    p.add_argument("--ovirt-connections", type=int, default=4, help="size of the shared oVirt connection pool")
    p.add_argument("--max-concurrent-power-cycles", type=int, default=3,
                   help="VMs that remediation may have powered off at once (a bound on fencing storms)")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="run only while holding the leader Lease")
    p.add_argument("--leader-election-namespace", default="openshift-machine-api")
    p.add_argument("--leader-election-id", default="cluster-api-provider-ovirt-leader",
                   help="name of the Lease (CAPO's election ID)")
    p.add_argument("--leader-elect-lease-duration", dest="lease_duration_s", type=float, default=120.0)
    p.add_argument("--leader-elect-renew-deadline", dest="renew_deadline_s", type=float, default=110.0)
    p.add_argument("--leader-elect-retry-period", dest="retry_period_s", type=float, default=20.0)
    p.add_argument("--health-port", type=int, default=9440, help="/healthz and /readyz (0: off)")
    p.add_argument("--metrics-port", type=int, default=8081, help="Prometheus /metrics (0: off)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the health and metrics servers")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--identity", default=env("POD_NAME") or socket.gethostname(),
                   help="leader-election identity (the pod name in a Deployment)")
    return p


def parse(argv: list[str] | None = None) -> Config:
    args = build_parser().parse_args(argv)
    return Config(**vars(args))
