"""Command-line entry point: `ovirt-machine-controller`."""

from __future__ import annotations

import argparse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ovirt-machine-controller",
        description="Reconciles machine.openshift.io Machines, MachineSets and MachineHealthChecks into oVirt VMs.",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file; in-cluster configuration when omitted")
    parser.add_argument("--namespace", default="openshift-machine-api", help="namespace watched (default: %(default)s)")
    return parser


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
