"""CLI: `python -m hack.controlplane up|down|restart|env|kubeconfig|status`."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .build import Binaries
from .cluster import LocalControlPlane, default_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hack.controlplane",
        description="A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler) on loopback, built from the pinned Go modules.",
    )
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"state directory (default: $OMC_CONTROLPLANE_DIR or {default_dir()})")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up", help="build the binaries if needed, start everything, wait until ready")
    sub.add_parser("down", help="stop every process and remove the state directory")
    sub.add_parser("status", help="exit 0 when running, print the API server URL")
    rs = sub.add_parser("restart", help="stop one component and start it again with the same flags and data")
    rs.add_argument("component", choices=["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"])
    rs.add_argument("--down-for", type=float, default=0.0, help="seconds to leave it stopped")
    env = sub.add_parser("env", help="print shell exports (KUBECONFIG, PATH with the pinned kubectl)")
    env.add_argument("--user", default="admin", choices=["admin", "restricted"])
    kc = sub.add_parser("kubeconfig", help="print the path of a kubeconfig")
    kc.add_argument("--user", default="admin", choices=["admin", "restricted"])
    args = parser.parse_args(argv)

    plane = LocalControlPlane(args.dir)
    if args.cmd == "up":
        plane.up()
        print(plane.kubeconfig())
    elif args.cmd == "down":
        plane.down()
    elif args.cmd == "restart":
        plane.restart(args.component, down_for=args.down_for)
    elif args.cmd == "status":
        if not plane.running():
            print("not running", file=sys.stderr)
            return 1
        print(plane.state.server)
    elif args.cmd == "env":
        print(f"export KUBECONFIG={shlex.quote(str(plane.kubeconfig(args.user)))}")
        print(f"export PATH={shlex.quote(str(Binaries().kube_dir))}:\"$PATH\"")
    elif args.cmd == "kubeconfig":
        print(plane.kubeconfig(args.user))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
