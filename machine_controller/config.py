"""Every setting of the controller process, with its default and --help text: the one place they live."""

from __future__ import annotations

import argparse
import os
import re
import socket
from dataclasses import dataclass
from typing import Callable, NoReturn, TypeVar

from machine_controller.ovirt.credentials import SECRET_NAME, SECRET_NAMESPACE
from machine_controller.runtime.bounds import number_problem
from machine_controller.runtime.cluster_proxy import TRUSTED_CA_BUNDLE
from machine_controller.runtime.logging import LOG_LEVELS

# Every controller the process can run, by the name `--controllers` takes (kube-controller-manager's style). On
# OpenShift, machine-api-operator runs its own machineset, nodelink and machinehealthcheck controllers, so this
# process runs only the actuator side there, with the MachineSets' capacity annotations, which MAO's MachineSet
# controller leaves to the provider (docs/architecture.md#deployment-modes).
# Cluster API's infrastructure provider (docs/architecture.md#deployment-modes) runs only when named: `*` is the
# Machine API's set, so a deployment of it watches no kind whose CRD it does not install.
CAPI_CONTROLLER_NAMES = ("ovirtcluster", "ovirtmachine", "ovirtmachinetemplate")
CONTROLLER_NAMES = ("machine", "machineset", "machineset-capacity", "nodelink", "machinehealthcheck", "remediation",
                    "ovirt-nodes", *CAPI_CONTROLLER_NAMES)


def select_controllers(spec: str) -> tuple[str, ...]:
    """`*` (every Machine API controller), names, and `-name` to leave one out: "*,-machineset" or
    "machine,ovirt-nodes"; Cluster API's (CAPI_CONTROLLER_NAMES) only by name: "*,ovirtcluster,ovirtmachine"."""
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
            chosen.update(n for n in CONTROLLER_NAMES if n not in CAPI_CONTROLLER_NAMES)
        else:
            chosen.add(name)
    selected = tuple(n for n in CONTROLLER_NAMES if n in chosen and n not in removed)
    if not selected:
        raise ValueError(f"no controller selected by {spec!r}")
    return selected


# What runs when machine-api-operator starts this image as the `machine-controller` container of its
# `machine-api-controllers` Deployment, in place of the Go provider: the command MAO gives it, and the actuator side
# only (with the capacity annotations MAO's MachineSet controller does not write), since the same pod runs MAO's own
# machineset, nodelink and health-check controllers (docs/compatibility.md#deployment-on-openshift).
MAO_COMMAND = "machine-controller-manager"
MAO_CONTROLLERS = "machine,machineset-capacity,ovirt-nodes,remediation"
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")  # Go's time.Duration text: "120s", "1m30s"
_GO_DURATIONS = re.compile(r"(?:\d+(?:\.\d+)?(?:h|ms|m|s))+")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


N = TypeVar("N", int, float)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|nan)", re.I)


class FlagParser(argparse.ArgumentParser):
    """argparse with a one-line error: `prog: error: argument --workers: must be at least 1, got 0 (see --help)`,
    exit code 2. argparse's own error prints the usage first, dozens of lines for this many flags, which buries the
    one that says what is wrong."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes the argument as given: a line break in it would split the one line.
        message = _CONTROL.sub(lambda m: repr(m.group())[1:-1], message)
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def bounded(kind: type[N], low: N, high: N) -> Callable[[str], N]:
    """An argparse `type` for a number of `kind` within [low, high]: every numeric flag enters through one, so a
    0 or a negative never starts a process that hangs or spins (a negative resync period was a busy loop, 0 engine
    connections a silent hang). Floats must be finite. The classes the values go to check them again, in the same
    words (runtime/bounds.py)."""
    def parse(text: str) -> N:
        # Plain digits, as Go's strconv takes them: Python's int() and float() also take " 5 ", "1_000" and other
        # scripts' digits, which no other tool of a cluster reads as numbers.
        if not (_INTEGER if kind is int else _NUMBER).fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}")
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        problem = number_problem(value, low, high)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    parse.__name__ = kind.__name__  # argparse names the type in some of its own messages
    return parse


def kubeconfig_file(text: str) -> str:
    """An argparse `type` for --kubeconfig (also applied to its default from $KUBECONFIG): a path, or a list of
    paths as kubectl takes in $KUBECONFIG; '' for the in-cluster config. The Kubernetes client skips a listed file
    that does not exist, and fails with a traceback on one it cannot read or when none exists: this names the path
    at fault instead, at start-up."""
    source = " ($KUBECONFIG)" if text == os.environ.get("KUBECONFIG") else ""
    paths = [p for p in text.split(os.pathsep) if p]
    existing = [p for p in paths if os.path.exists(os.path.expanduser(p))]
    for path in existing:
        if not os.path.isfile(os.path.expanduser(path)):
            raise argparse.ArgumentTypeError(f"{path!r}{source} is not a file")
        if not os.access(os.path.expanduser(path), os.R_OK):
            raise argparse.ArgumentTypeError(f"{path!r}{source} is not readable")
    if paths and not existing:
        what = f"{paths[0]!r} does not exist" if len(paths) == 1 else f"none of {', '.join(map(repr, paths))} exists"
        raise argparse.ArgumentTypeError(what + source)
    return text


def add_kubeconfig_flag(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig for every tool that talks to the API server, checked at start-up like any other flag."""
    parser.add_argument("--kubeconfig", type=kubeconfig_file, default=os.environ.get("KUBECONFIG") or None,
                        help="kubeconfig file (default: $KUBECONFIG); in-cluster config when unset")


# The ranges of the numeric flags, shared by every entry point that takes them.
PORT = bounded(int, 0, 65535)  # 0: that server is off
WORKERS = bounded(int, 1, 1024)
_DAY_S = 86400.0
RESYNC_S = bounded(float, 1.0, 7 * _DAY_S)  # below a second, a resync is a busy loop of full re-reconciles
BACKOFF_S = bounded(float, 0.01, _DAY_S)
LEASE_S = bounded(float, 0.1, _DAY_S)


def from_mao_args(argv: list[str]) -> list[str]:
    """MAO's flags for its provider container (klog's and controller-runtime's spelling: `--v=3`,
    `--logtostderr=true`, `--leader-elect=true`, `--leader-elect-lease-duration=120s`, `--feature-gates=...`) in
    this process's terms, after the actuator-side `--controllers`. Anything else is passed on as it is, so an
    unknown flag is still a clear error."""
    out = [f"--controllers={MAO_CONTROLLERS}"]  # numbers are range-checked by `parse`, as if typed as ours
    for arg in argv:
        name, eq, value = arg.partition("=")
        if name in ("--logtostderr", "--alsologtostderr", "--feature-gates"):
            continue  # logs always go to stderr; no feature gate changes what this process does
        if name in ("--v", "-v") and value.isascii() and value.isdigit():  # "²".isdigit(), but int("²") fails
            out.append("--log-level=debug" if int(value) >= 4 else "--log-level=info")
        elif name == "--leader-elect" and eq:
            out.append("--leader-elect" if value.lower() in ("true", "1") else "--no-leader-elect")
        elif name.startswith("--leader-elect-") and eq and _GO_DURATIONS.fullmatch(value):
            seconds = sum(float(n) * _GO_UNITS[u] for n, u in _GO_DURATION.findall(value))
            out.append(f"{name}={seconds:g}")
        elif name == "--namespace" and eq:
            # MAO's own namespace (its pod's): the Go provider's Lease is in its pod's namespace, and the
            # credentials secret is there on OpenShift (openshift-machine-api); so both follow MAO wherever it runs
            # (docs/compatibility.md#deployment-on-openshift).
            out += [arg, f"--leader-election-namespace={value}", f"--credentials-namespace={value}"]
        else:
            out.append(arg)
    return out


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
    ovirt_timeout_s: int
    trusted_ca_bundle: str
    max_concurrent_power_cycles: int
    leader_elect: bool
    leader_election_namespace: str
    leader_election_id: str
    lease_duration_s: float
    renew_deadline_s: float
    retry_period_s: float
    health_port: int
    metrics_port: int
    metrics_secure: bool
    metrics_cert_dir: str
    bind_address: str
    log_level: str
    identity: str


def build_parser() -> argparse.ArgumentParser:
    p = FlagParser(
        prog="ovirt-machine-controller",
        description="Reconciles machine.openshift.io Machines into oVirt VMs, links them to their Nodes, and "
        "keeps oVirt Nodes' providerIDs (the OpenShift Machine API with the oVirt actuator).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    env = os.environ.get
    add_kubeconfig_flag(p)
    p.add_argument("--controllers", type=_controllers_arg, default="*", metavar="LIST",
                   help="controllers to run: '*' for all of the Machine API's, names, '-name' to leave one out (e.g. "
                        f"'{MAO_CONTROLLERS}' beside machine-api-operator's own; the Cluster API ones only when "
                        "named); known: "
                        + ", ".join(CONTROLLER_NAMES))
    p.add_argument("--namespace", default="openshift-machine-api",
                   help="namespace whose Machines are reconciled; '' for all namespaces")
    p.add_argument("--credentials-namespace", default=SECRET_NAMESPACE,
                   help="namespace of the oVirt credentials secret")
    p.add_argument("--credentials-name", default=SECRET_NAME, help="name of the oVirt credentials secret")
    p.add_argument("--workers", type=WORKERS, default=8,
                   help="concurrent Machine reconciles (MAO runs one; waits are requeues here, so more is safe)")
    p.add_argument("--resync-period", dest="resync_s", type=RESYNC_S, default=600.0,
                   help="seconds between full re-reconciles of every object (CAPO's SyncPeriod)")
    p.add_argument("--backoff-base", dest="backoff_base_s", type=BACKOFF_S, default=1.0,
                   help="first retry delay of a failing reconcile, doubled per failure")
    p.add_argument("--backoff-cap", dest="backoff_cap_s", type=BACKOFF_S, default=300.0, help="longest retry delay")
    p.add_argument("--ovirt-connections", type=bounded(int, 1, 64), default=4,
                   help="size of the shared oVirt connection pool")
    p.add_argument("--ovirt-timeout", dest="ovirt_timeout_s", type=bounded(int, 1, 3600), default=60,
                   help="seconds an oVirt request may take before its answer is given up as lost; a power action "
                        "whose answer is lost is never sent again blindly, and fencing starts no VM until twice this "
                        "has passed since a lost stop (docs/fencing.md#requests-whose-answer-was-lost)")
    p.add_argument("--trusted-ca-bundle", default=TRUSTED_CA_BUNDLE, metavar="FILE",
                   help="the cluster-wide trusted CA bundle (PEM), trusted beside the credentials secret's CA for the "
                        "engine and used for the API server where no CA is configured; the default is where "
                        "machine-api-operator mounts it, used only when there; '' for none "
                        "(docs/compatibility.md#cluster-wide-trust-and-proxy)")
    p.add_argument("--max-concurrent-power-cycles", type=bounded(int, 1, 1000), default=3,
                   help="VMs that remediation may have powered off at once (a bound on fencing storms)")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="run only while holding the leader Lease")
    p.add_argument("--leader-election-namespace", default="openshift-machine-api")
    p.add_argument("--leader-election-id", default="cluster-api-provider-ovirt-leader",
                   help="name of the Lease (CAPO's election ID)")
    p.add_argument("--leader-elect-lease-duration", dest="lease_duration_s", type=LEASE_S, default=120.0)
    p.add_argument("--leader-elect-renew-deadline", dest="renew_deadline_s", type=LEASE_S, default=110.0)
    p.add_argument("--leader-elect-retry-period", dest="retry_period_s", type=LEASE_S, default=20.0)
    p.add_argument("--health-port", type=PORT, default=9440, help="/healthz and /readyz (0: off)")
    p.add_argument("--metrics-port", type=PORT, default=8081, help="Prometheus /metrics (0: off)")
    p.add_argument("--metrics-secure", action=argparse.BooleanOptionalAction, default=False,
                   help="serve /metrics over HTTPS to callers whose bearer token passes a TokenReview and a "
                        "SubjectAccessReview for GET /metrics (controller-runtime's secure metrics serving)")
    p.add_argument("--metrics-cert-dir", default="",
                   help="directory holding tls.crt and tls.key for --metrics-secure (a mounted serving-cert "
                        "Secret; re-read when rotated)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the health and metrics servers")
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    p.add_argument("--identity", default=env("POD_NAME") or socket.gethostname(),
                   help="leader-election identity (the pod name in a Deployment)")
    return p


def parse(argv: list[str] | None = None) -> Config:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.metrics_secure and not args.metrics_cert_dir:
        parser.error("--metrics-secure needs --metrics-cert-dir (the serving certificate's tls.crt and tls.key)")
    missing = [f for f in ("tls.crt", "tls.key") if not os.path.isfile(os.path.join(args.metrics_cert_dir, f))]
    if args.metrics_secure and missing:
        parser.error(f"--metrics-cert-dir {args.metrics_cert_dir!r} lacks {' and '.join(missing)}")
    if args.metrics_secure and args.metrics_port and args.metrics_port == args.health_port:
        parser.error("--metrics-secure needs a --metrics-port other than --health-port (probes are plain HTTP)")
    if args.trusted_ca_bundle not in ("", TRUSTED_CA_BUNDLE) and not os.path.isfile(args.trusted_ca_bundle):
        parser.error(f"argument --trusted-ca-bundle: {args.trusted_ca_bundle!r} is not a file")
    if args.backoff_cap_s < args.backoff_base_s:
        parser.error(f"argument --backoff-cap: must be at least --backoff-base ({args.backoff_base_s:g}), "
                     f"got {args.backoff_cap_s:g}")
    # client-go's rule for a leader elector (runtime/leader_election.py checks it again, with a traceback).
    if args.renew_deadline_s >= args.lease_duration_s:
        parser.error(f"argument --leader-elect-renew-deadline: must be below --leader-elect-lease-duration "
                     f"({args.lease_duration_s:g}), got {args.renew_deadline_s:g}")
    if args.renew_deadline_s <= 1.2 * args.retry_period_s:
        parser.error(f"argument --leader-elect-retry-period: 1.2 times it must be below "
                     f"--leader-elect-renew-deadline ({args.renew_deadline_s:g}), got {args.retry_period_s:g}")
    return Config(**vars(args))
