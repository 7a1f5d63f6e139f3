"""`ovirt-csi-driver`: flags, the gRPC server on the CSI endpoint, signals (docs/storage.md#csi-driver).

The controller Deployment runs `--services controller` beside external-provisioner, external-attacher and
external-resizer; the node DaemonSet runs `--services node` alone, registering itself with the kubelet
(`registration.py`). Both serve their own liveness check (`health.py`). The engine credentials are the keys of the
`ovirt-credentials` Secret mounted as files (`--credentials-dir`), needed by the controller side only.
"""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc

from api.ids import is_ovirt_id
from machine_controller.config import PORT, WORKERS, FlagParser, bounded
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import InvalidCredentials, from_secret_data
from machine_controller.runtime.logging import LOG_LEVELS, configure_logging, get_logger
from machine_controller.runtime.server import HealthServer

from ..disks import Disks
from . import spec
from .controller import controller_servicer
from .health import probe_check
from .identity import identity_servicer
from .node import DEVICE_WAIT_S, node_servicer
from .registration import Registration
from .volumes import DRIVER_NAME

log = get_logger(__name__)
SERVICES = ("controller", "node")
SMBIOS_UUID = "/sys/class/dmi/id/product_uuid"


def endpoint_arg(text: str) -> str:
    """An argparse `type` for --endpoint: `unix:` and an absolute path, or `[tcp://]host:port` with a port of
    1-65535; anything else is one line naming the flag (FlagParser), not gRPC's bind failure as a traceback."""
    if text.startswith("unix:"):
        if not _socket_path(text).strip("/"):
            raise argparse.ArgumentTypeError(f"{text!r} names no socket path (unix:///path/csi.sock)")
        return text
    address = text.removeprefix("tcp://")
    host, colon, port = address.rpartition(":")
    numeric = port.isascii() and port.isdigit()
    if "://" in address or not colon or "/" in host or not numeric or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is neither unix:///path/csi.sock nor host:port (a port of 1-65535)")
    return text


def parse(argv: list[str]) -> argparse.Namespace:
    p = FlagParser(prog="ovirt-csi-driver", description=f"The {DRIVER_NAME} CSI driver for oVirt disks.")
    p.add_argument("--endpoint", type=endpoint_arg, default="unix:///csi/csi.sock",
                   help="unix:///path/csi.sock (a stale socket is replaced) or host:port")
    p.add_argument("--services", default="controller,node",
                   help="which CSI services besides Identity: controller, node or both (comma-separated)")
    p.add_argument("--node-id", default="",
                   help=f"the node's VM id (default: the SMBIOS UUID in {SMBIOS_UUID}, which oVirt sets to it)")
    p.add_argument("--credentials-dir", default="/etc/ovirt-credentials",
                   help="a directory with the ovirt-credentials Secret's keys as files (controller only)")
    p.add_argument("--device-wait", type=bounded(float, 0.0, 3600.0), default=DEVICE_WAIT_S,
                   help="seconds a node call waits for the disk's /dev/disk/by-id link to appear")
    p.add_argument("--workers", type=WORKERS, default=8, help="concurrent gRPC calls")
    p.add_argument("--registration-dir", default="",
                   help="the kubelet's plugins_registry directory as mounted here: register the node plugin with "
                        "the kubelet through a socket there (node only; empty: do not register)")
    p.add_argument("--kubelet-registration-path", default="",
                   help="the CSI socket's path as the kubelet sees it on the node, e.g. "
                        f"/var/lib/kubelet/plugins/{DRIVER_NAME}/csi.sock (with --registration-dir)")
    p.add_argument("--health-port", type=PORT, default=0,
                   help="serve /healthz, the driver's Probe called on its own endpoint, on this port (0: off)")
    p.add_argument("--probe-timeout", type=bounded(float, 0.1, 300.0), default=4.0,
                   help="seconds /healthz waits for the Probe (the controller side's asks the engine)")
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    args = p.parse_args(argv)
    args.services = [s.strip() for s in args.services.split(",") if s.strip()]
    bad = set(args.services) - set(SERVICES)
    if bad or not args.services:
        p.error(f"--services takes controller and/or node, got {args.services}")
    if args.registration_dir and "node" not in args.services:
        p.error("--registration-dir registers a node plugin: it needs --services with node")
    if bool(args.registration_dir) != bool(args.kubelet_registration_path):
        p.error("--registration-dir and --kubelet-registration-path go together")
    if args.kubelet_registration_path and not os.path.isabs(args.kubelet_registration_path):
        p.error(f"--kubelet-registration-path must be an absolute path, got {args.kubelet_registration_path!r}")
    return args


def read_credentials_dir(path: str) -> dict[str, str]:
    d = Path(path)
    if not d.is_dir():
        raise InvalidCredentials(f"credentials directory {path} does not exist")
    return {f.name: f.read_text() for f in d.iterdir() if f.name.startswith("ovirt_") and f.is_file()}


def node_id_of(args: argparse.Namespace) -> str:
    if args.node_id:
        node_id, source = args.node_id, "--node-id"
    else:
        try:
            node_id, source = Path(SMBIOS_UUID).read_text().strip().lower(), SMBIOS_UUID
        except OSError as e:
            raise SystemExit(f"ovirt-csi-driver: --node-id not given and {SMBIOS_UUID} unreadable: {e}") from None
    # The node id is the VM id the controller side puts into URL paths: it must be an engine UUID.
    if not is_ovirt_id(node_id):
        raise SystemExit(f"ovirt-csi-driver: node id {node_id!r} (from {source}) is no oVirt VM id (a UUID)")
    return node_id


def _socket_path(endpoint: str) -> str:
    return "/" + endpoint[len("unix:"):].lstrip("/")


class EndpointUnusable(Exception):
    """--endpoint is an address, but not one this process can listen on."""


def listen_address(endpoint: str) -> str:
    if endpoint.startswith("unix:"):
        path = _socket_path(endpoint)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            raise EndpointUnusable(f"the socket's directory {parent!r} does not exist")
        if os.path.lexists(path) and stat.S_ISSOCK(os.lstat(path).st_mode):
            os.remove(path)  # left by a previous run of the driver
        return f"unix://{path}"
    return endpoint.removeprefix("tcp://")


def client_address(endpoint: str) -> str:
    """The address a gRPC client of this process dials for `endpoint` (a wildcard host becomes loopback)."""
    if endpoint.startswith("unix:"):
        return f"unix://{_socket_path(endpoint)}"
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    return f"{'127.0.0.1' if host in ('', '0.0.0.0', '[::]') else host}:{port}"


def build(args: argparse.Namespace, pool: ConnectionPool | None = None) -> tuple[grpc.Server, ConnectionPool | None]:
    pb, pb_grpc = spec.load()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers))
    client = None
    if "controller" in args.services:
        if pool is None:
            pool = ConnectionPool(size=4, user_agent="ovirt-csi-driver")
            pool.set_credentials(from_secret_data(read_credentials_dir(args.credentials_dir), encoded=False,
                                                  source=f"credentials directory {args.credentials_dir}"))
        client = OvirtClient(pool)
        pb_grpc.add_ControllerServicer_to_server(controller_servicer(pb, pb_grpc, Disks(client)), server)
    if "node" in args.services:
        pb_grpc.add_NodeServicer_to_server(node_servicer(pb, pb_grpc, node_id_of(args), args.device_wait), server)
    pb_grpc.add_IdentityServicer_to_server(
        identity_servicer(pb, pb_grpc, client.ping if client else None), server)
    try:
        server.add_insecure_port(listen_address(args.endpoint))
    except RuntimeError as e:  # gRPC's bind failure: a host that does not resolve, an address in use
        raise EndpointUnusable(f"cannot listen on it: {e}") from None
    return server, pool


def start_node_extras(args: argparse.Namespace) -> tuple[HealthServer | None, Registration | None]:
    """The liveness endpoint and the kubelet registration, started once the CSI endpoint serves (the kubelet calls
    NodeGetInfo there as soon as it sees the registration socket)."""
    health = registration = None
    if args.health_port:
        pb, pb_grpc = spec.load()
        health = HealthServer(port=args.health_port, serve_metrics=False)
        health.add_healthz_check("csi-probe", probe_check(pb, pb_grpc, client_address(args.endpoint),
                                                          args.probe_timeout))
    if args.registration_dir:
        registration = Registration(args.registration_dir, DRIVER_NAME, args.kubelet_registration_path)
        registration.start()
        if health:
            health.add_healthz_check("kubelet-registration", registration.healthy)
    if health:
        health.start()
    return health, registration


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    configure_logging(args.log_level)
    try:
        server, pool = build(args)
    except (InvalidCredentials, spec.SpecUnavailable) as e:
        print(f"ovirt-csi-driver: {e}", file=sys.stderr)
        return 2
    except EndpointUnusable as e:
        print(f"ovirt-csi-driver: error: argument --endpoint: {args.endpoint!r}: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    log.info("serving", driver=DRIVER_NAME, endpoint=args.endpoint, services=args.services)
    code, health, registration = 0, None, None
    try:
        health, registration = start_node_extras(args)
    except (OSError, ValueError, RuntimeError) as e:  # a port in use, no registration directory
        print(f"ovirt-csi-driver: {e}", file=sys.stderr)
        code = 2
        stop.set()
    stop.wait()
    if registration is not None:
        registration.stop()  # first: the kubelet unregisters the driver while its endpoint still answers
    if health is not None:
        health.stop()
    server.stop(grace=5).wait()
    if pool is not None:
        pool.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
