"""Every relative link of the README and docs/ reaches a file of the repository, and every `#anchor` a heading of
that file, as GitHub renders them; and every `docs/<page>.md#anchor` the code, the tests or the build files cite names a
heading there (they cite docs/ for their reasons: a renamed heading must not leave them pointing nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CITED = re.compile(r"docs/([\w/-]+\.md)#([\w-]+)")
_FENCE = re.compile(r"^(```|~~~)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to
    hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    fenced = False
    for line in page.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            slug = _slug(line.lstrip("#"))
            n = 1
            unique = slug
            while unique in anchors:  # GitHub numbers repeated headings: -1, -2...
                unique = f"{slug}-{n}"
                n += 1
            anchors.add(unique)
    return anchors


def _links(page: Path) -> list[str]:
    text = re.sub(r"^(```|~~~).*?^\1", "", page.read_text(), flags=re.S | re.M)  # links in code blocks are code
    return [m.group(1) for m in _LINK.finditer(text)]


def _target(page: Path, link: str) -> tuple[Path, str]:
    path, _, anchor = link.partition("#")
    return ((page.parent / path).resolve() if path else page), anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z]+:", link):
            continue  # an absolute URL: not this repository's to check
        target, anchor = _target(page, link)
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_anchor_cited_in_code_names_a_heading() -> None:
    broken = set()
    for source in [*ROOT.glob("machine_controller/**/*.py"), *ROOT.glob("api/**/*.py"), *ROOT.glob("hack/**/*.py"),
                   *ROOT.glob("test/**/*.py"), *ROOT.glob("config/**/*.yaml"), *ROOT.glob("Makefile"),
                   *ROOT.glob("Dockerfile"), *ROOT.glob("pyproject.toml")]:
        for page, anchor in _CITED.findall(source.read_text()):
            target = ROOT / "docs" / page
            if not target.exists() or anchor not in _anchors(target):
                broken.add(f"{source.relative_to(ROOT)}: docs/{page}#{anchor}")
    assert not broken, "\n".join(sorted(broken))


def test_slugs_follow_github() -> None:
    assert _slug("On OpenShift, in place of the Go provider") == "on-openshift-in-place-of-the-go-provider"
    assert _slug("In `make demo`") == "in-make-demo"
    assert _slug("The operator itself: not run here (the module proxy refuses)") == \
        "the-operator-itself-not-run-here-the-module-proxy-refuses"
