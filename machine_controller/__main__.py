"""Command-line entry point: `ovirt-machine-controller` (see `--help`)."""

from __future__ import annotations

import sys
from pathlib import Path

from machine_controller.config import MAO_COMMAND, build_parser, from_mao_args, parse
from machine_controller.runtime.cluster_proxy import export_for_libcurl


def main(argv: list[str] | None = None) -> int:
    if argv is None and Path(sys.argv[0]).name == MAO_COMMAND:
        # Started by machine-api-operator under the Go provider's command name (the image links it): its flags.
        argv = from_mao_args(sys.argv[1:])
    config = parse(argv)
    # libcurl, under the oVirt SDK, reads the proxy environment itself: made to choose as Go does, before any thread
    # starts (docs/compatibility.md#cluster-wide-trust-and-proxy).
    export_for_libcurl()
    from machine_controller.app import run  # heavy imports only once the flags are valid

    return run(config)


__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
