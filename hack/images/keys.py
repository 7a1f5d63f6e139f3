"""Content keys: an image is rebuilt when, and only when, what goes into it changes (docs/images.md#cache).

The product image's key covers the Dockerfile and exactly the files its `COPY` lines take from the build context,
read off the Dockerfile itself, so a new `COPY` line enters the key without anyone editing this module. Files the
build never reads (Python's bytecode caches, tools' caches) are left out, and the build context is made of
the same file list, so what was hashed is what was built.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Iterable

# Files a checkout accumulates that no image needs: a test run must not make the image look changed.
IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")


def digest(*parts: str | bytes) -> str:
    """sha256 over `parts`, each length-prefixed, so that ("ab", "c") and ("a", "bc") differ."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def _instructions(dockerfile: str) -> Iterable[str]:
    """The Dockerfile's instructions, with continuation lines joined and comments dropped."""
    current = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):  # comments and blank lines, inside a continued instruction too
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        yield current + line
        current = ""
    if current.strip():
        yield current


def copy_sources(dockerfile: str) -> list[str]:
    """The build-context paths the Dockerfile's COPY and ADD instructions take (those with `--from` copy from
    another stage or image, not from the context)."""
    sources: list[str] = []
    for instruction in _instructions(dockerfile):
        word, _, rest = instruction.partition(" ")
        if word.upper() not in ("COPY", "ADD"):
            continue
        rest = rest.strip()
        if rest.startswith("["):
            args = json.loads(rest)
        else:
            args = shlex.split(rest)
        flags = [a for a in args if a.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            continue
        paths = [a for a in args if not a.startswith("--")]
        if len(paths) < 2:
            raise ValueError(f"Dockerfile: {word} needs a source and a destination: {instruction!r}")
        sources.extend(paths[:-1])
    return sources


def context_files(root: Path, sources: Iterable[str]) -> list[str]:
    """Every file under `root` the `sources` name (a file, or a directory taken whole), as sorted relative paths,
    without the ignored caches. A source that does not exist is an error, as it is for the build."""
    found: set[str] = set()
    for source in sources:
        if any(c in source for c in "*?["):
            raise ValueError(f"Dockerfile: wildcard sources are not supported by the image key: {source!r}")
        path = (root / source).resolve()
        if root.resolve() not in (path, *path.parents):
            raise ValueError(f"Dockerfile: {source!r} is outside the build context {root}")
        if path.is_file():
            found.add(path.relative_to(root.resolve()).as_posix())
        elif path.is_dir():
            for f in path.rglob("*"):
                rel = f.relative_to(root.resolve())
                if f.is_file() and not _ignored(rel):
                    found.add(rel.as_posix())
        else:
            raise FileNotFoundError(f"Dockerfile: COPY source {source!r} does not exist under {root}")
    return sorted(found)


def _ignored(rel: Path) -> bool:
    return any(p in IGNORED_DIRS for p in rel.parts) or rel.name.endswith(IGNORED_SUFFIXES)


def tree_key(root: Path, files: Iterable[str]) -> str:
    """The key of these files under `root`: their paths, contents and executable bits (COPY keeps the mode)."""
    parts: list[str | bytes] = []
    for rel in files:
        path = root / rel
        parts += [rel, "x" if path.stat().st_mode & 0o111 else "-", path.read_bytes()]
    return digest(*parts)
