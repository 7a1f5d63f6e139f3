"""The product image's content key (hack/images/keys.py, product.py): it changes when the Dockerfile or a file its
COPY lines take changes, and for nothing else a checkout accumulates (docs/images.md#cache)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hack.images import product
from hack.images.keys import context_files, copy_sources, digest

REPO = Path(__file__).resolve().parents[2]

MINI_DOCKERFILE = """\
FROM python:3.11-slim-bookworm AS build
COPY pyproject.toml constraints.txt ./
COPY machine_controller ./machine_controller
COPY --from=golang:1.26-bookworm /usr/local/go /usr/local/go
FROM python:3.11-slim-bookworm
COPY --from=build /opt/venv /opt/venv
"""


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A small build context: a Dockerfile copying two files and a package, beside files it never copies."""
    (tmp_path / "Dockerfile").write_text(MINI_DOCKERFILE)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "constraints.txt").write_text("kubernetes==1.0\n")
    pkg = tmp_path / "machine_controller"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "app.py").write_text("print('hello')\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("notes\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_x.py").write_text("def test(): pass\n")
    return tmp_path


def test_the_key_covers_what_the_repository_dockerfile_copies():
    assert copy_sources((REPO / "Dockerfile").read_text()) == [
        "pyproject.toml", "constraints.txt", "README.md", "api", "machine_controller"]
    files = product.context(REPO)
    assert files[0] == "Dockerfile"
    assert "machine_controller/app.py" in files and "api/machine.py" in files
    assert not [f for f in files if f.startswith(("test/", "docs/", "hack/", "config/")) or "__pycache__" in f]


def test_copy_sources_reads_continuations_json_form_and_add_and_skips_other_stages():
    dockerfile = """\
# syntax=docker/dockerfile:1
FROM scratch
COPY --chown=1:1 a.txt \\
    # a comment inside the instruction
     b.txt /dst/
ADD ["c dir", "/c"]
copy --from=build /x /y
COPY --link d ./
"""
    assert copy_sources(dockerfile) == ["a.txt", "b.txt", "c dir", "d"]


def test_a_copy_without_a_destination_is_refused():
    with pytest.raises(ValueError, match="needs a source and a destination"):
        copy_sources("FROM scratch\nCOPY onlyone\n")


def test_a_missing_or_outside_source_is_an_error(context: Path):
    with pytest.raises(FileNotFoundError, match="nothere"):
        context_files(context, ["nothere"])
    with pytest.raises(ValueError, match="outside the build context"):
        context_files(context, ["../etc"])
    with pytest.raises(ValueError, match="wildcard"):
        context_files(context, ["*.txt"])


def test_a_copied_file_changes_the_key(context: Path):
    before = product.key(context)
    (context / "machine_controller" / "app.py").write_text("print('bye')\n")
    assert product.key(context) != before


def test_a_new_file_in_a_copied_package_changes_the_key(context: Path):
    before = product.key(context)
    (context / "machine_controller" / "new.py").write_text("")
    assert product.key(context) != before


def test_the_dockerfile_changes_the_key(context: Path):
    before = product.key(context)
    (context / "Dockerfile").write_text(MINI_DOCKERFILE + "USER 65532\n")
    assert product.key(context) != before


def test_the_executable_bit_of_a_copied_file_changes_the_key(context: Path):
    before = product.key(context)
    (context / "pyproject.toml").chmod(0o755)
    assert product.key(context) != before


def test_nothing_else_changes_the_key(context: Path):
    before = product.key(context)
    # Files the Dockerfile does not copy, caches a test run writes, a touched file, a copy elsewhere.
    (context / "docs" / "notes.md").write_text("other notes\n")
    (context / "test" / "test_y.py").write_text("")
    cache = context / "machine_controller" / "__pycache__"
    cache.mkdir()
    (cache / "app.cpython-311.pyc").write_bytes(b"\0")
    (context / "machine_controller" / "stray.pyc").write_bytes(b"\0")
    (context / "constraints.txt").touch()
    assert product.key(context) == before
    moved = context.parent / "moved"
    shutil.copytree(context, moved)
    assert product.key(moved) == before


def test_digest_separates_its_parts():
    assert digest("ab", "c") != digest("a", "bc")
    assert digest(b"x") == digest("x")
