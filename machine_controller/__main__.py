"""Command-line entry point: `ovirt-machine-controller` (see `--help`)."""

from __future__ import annotations

from machine_controller.config import build_parser, parse


def main(argv: list[str] | None = None) -> int:
    config = parse(argv)
    from machine_controller.app import run  # heavy imports only once the flags are valid

    return run(config)


__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
