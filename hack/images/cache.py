"""Where each image's archive lives: `<cache>/images/<name>-<key>.tar`, so an archive is found by its content key
and a changed input is a miss (docs/images.md#cache). Publishing one removes the same image's older archives."""

from __future__ import annotations

from pathlib import Path

from .buildah import images_dir

KEY_CHARS = 24  # 96 bits of the sha256: enough to tell versions of one image apart


def archive_path(name: str, key: str) -> Path:
    return images_dir() / f"{name}-{key[:KEY_CHARS]}.tar"


def prune(name: str, keep: Path) -> None:
    """Remove the archives of `name` other than `keep`: older keys are never asked for again."""
    for old in images_dir().glob(f"{name}-*.tar"):
        if old != keep and len(old.stem) == len(name) + 1 + KEY_CHARS:
            old.unlink(missing_ok=True)
