"""`python -m hack.ovirtsim serve ...`: run the simulator until SIGINT/SIGTERM.

On start it prints one JSON line to stdout with `url`, `control_url`, `ca_file`, `username`, `password` (the
testing API reads it), then logs to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time

from hack.ovirtsim.config import DEFAULT_PASSWORD, DEFAULT_USERNAME, PROFILES, Profile, SimConfig


def _timing(value: str) -> tuple[str, float]:
    name, sep, seconds = value.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("expected NAME=SECONDS")
    return name, float(seconds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hack.ovirtsim",
                                     description="A simulator of the oVirt engine REST API (v4) for tests.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the engine simulator",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve.add_argument("--port", type=int, default=0, help="API port on 127.0.0.1 (0: a free port)")
    serve.add_argument("--control-port", type=int, default=0, help="control API port on 127.0.0.1 (0: a free port)")
    serve.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA")
    serve.add_argument("--cert-dir", default=None,
                       help="where the CA (ca.pem) and server certificate go; default: next to the state file "
                            "(pki/), else a new temporary directory")
    serve.add_argument("--state-file", default=None, help="persist the engine state here and reload it on start")
    serve.add_argument("--profile", choices=[p.value for p in Profile], default=Profile.FAST.value,
                       help="timing profile: fast (tests) or realtime (close to a real engine)")
    serve.add_argument("--timing", type=_timing, action="append", default=[], metavar="NAME=SECONDS",
                       help="override one timing of the profile; names: "
                            + ", ".join(f.name for f in __import__("dataclasses").fields(PROFILES[Profile.FAST])))
    serve.add_argument("--kubeconfig", default=None,
                       help="guests with a valid Ignition config join this Kubernetes cluster as Nodes")
    serve.add_argument("--username", default=DEFAULT_USERNAME)
    serve.add_argument("--password", default=DEFAULT_PASSWORD)
    serve.add_argument("--no-seed", action="store_true", help="start with an empty inventory")
    serve.add_argument("--log-level", default="WARNING")
    return parser


def config_from_args(args: argparse.Namespace) -> SimConfig:
    cert_dir = args.cert_dir
    if cert_dir is None and args.state_file:
        from pathlib import Path

        cert_dir = str(Path(args.state_file).parent / "pki")
    return SimConfig(port=args.port, control_port=args.control_port, tls=args.tls, cert_dir=cert_dir,
                     state_file=args.state_file, profile=Profile(args.profile),
                     timing_overrides=dict(args.timing), kubeconfig=args.kubeconfig, username=args.username,
                     password=args.password, seed=not args.no_seed)


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from hack.ovirtsim.server import Simulator  # imported late: `--help` stays instant

    sim = Simulator(config_from_args(args))
    sim.start()
    info = sim.describe()
    info["startup_seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(info), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    sim.stop()
    return 0
