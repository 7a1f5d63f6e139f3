"""Files generated from api/ and committed (config/crd by hack/gen_crds.py, config/admission by
hack/gen_admission.py): write them, or say how the committed ones differ from what the generator makes now.

Each generator gives `render()`, file name -> content; `main` is its command line (`--check` exits 1 with a diff,
which the unit tests and `make test` run, so a change in api/ cannot leave a stale file behind).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Callable


def diffs(rendered: dict[str, str], directory: Path) -> list[str]:
    """Unified diffs between the committed files and the rendered ones (empty when up to date)."""
    out = []
    for name, expected in rendered.items():
        path = directory / name
        actual = path.read_text(encoding="utf-8") if path.exists() else ""
        if actual != expected:
            out.append("".join(difflib.unified_diff(actual.splitlines(keepends=True),
                                                    expected.splitlines(keepends=True),
                                                    f"committed/{name}", f"generated/{name}")) or f"{name}: missing\n")
    return out


def write(rendered: dict[str, str], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in rendered.items():
        (directory / name).write_text(content, encoding="utf-8")


def main(argv: list[str] | None, doc: str | None, render: Callable[[], dict[str, str]], directory: Path,
         module: str) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = directory.relative_to(directory.parents[1])
    parser.add_argument("--check", action="store_true", help=f"fail with a diff if {where} is out of date")
    args = parser.parse_args(argv)
    if args.check:
        found = diffs(render(), directory)
        if found:
            sys.stdout.write("".join(found))
            print(f"{where} is out of date: run `python -m {module}`", file=sys.stderr)
            return 1
        return 0
    write(render(), directory)
    return 0
