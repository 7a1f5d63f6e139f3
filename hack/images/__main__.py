"""python -m hack.images [NAME...]: build the images that are missing or out of date, print their archives."""

from __future__ import annotations

import argparse
import time

from . import NAMES, archive
from .buildah import log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.images", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"which of {', '.join(NAMES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.names) - set(NAMES)
    if unknown:
        parser.error(f"unknown images: {', '.join(sorted(unknown))}")
    for name in args.names or NAMES:
        start = time.monotonic()
        path = archive(name)
        log(f"{name}: {path} ({path.stat().st_size / 2**20:.1f} MiB, {time.monotonic() - start:.1f} s)")
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
