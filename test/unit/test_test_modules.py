"""pytest imports a test module outside a package by its bare name (rootdir-relative `pythonpath`, no
`__init__.py`), so two such modules of one name make the whole run fail at collection ("import file mismatch"),
whichever subset a developer ran before."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TEST_ROOT = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_outside_a_package_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TEST_ROOT.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            by_name[path.name].append(path.relative_to(TEST_ROOT).as_posix())
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
