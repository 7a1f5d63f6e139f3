"""Docker archives (the `docker save` layout that `ctr images import` and `buildah pull docker-archive:` read),
written directly for images of one static program on an empty root: no builder is needed, and the same program
gives the same archive byte for byte (docs/images.md#archives).

Layout: `manifest.json` names the image's tags, its config file and its layer; the config file is named by its
sha256 and lists the layer's sha256 as its diff_id; the layer is an uncompressed tar of the image's files.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

EPOCH = "1970-01-01T00:00:00Z"  # a fixed creation time: the archive depends on its content only


@dataclass(frozen=True)
class File:
    """One file of an image: its path inside the image, its content and mode."""

    path: str
    data: bytes
    mode: int = 0o755


@dataclass(frozen=True)
class ScratchImage:
    """An image of a few files on an empty root, and how it runs."""

    tag: str  # e.g. registry.k8s.io/pause:3.10.1
    files: tuple[File, ...]
    entrypoint: tuple[str, ...]
    user: str = ""
    env: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


def _tar_info(name: str, size: int, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type, info.mtime = size, mode, kind, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def layer_tar(files: tuple[File, ...]) -> bytes:
    """An uncompressed tar of `files`, owned by root, with their parent directories, in a fixed order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(p) for f in files for p in Path(f.path.lstrip("/")).parents if str(p) != "."})
        for d in dirs:
            tar.addfile(_tar_info(d + "/", 0, 0o755, tarfile.DIRTYPE))
        for f in sorted(files, key=lambda f: f.path):
            tar.addfile(_tar_info(f.path.lstrip("/"), len(f.data), f.mode), io.BytesIO(f.data))
    return buf.getvalue()


def image_config(image: ScratchImage, layer_digest: str) -> bytes:
    config: dict[str, object] = {"Entrypoint": list(image.entrypoint)}
    if image.user:
        config["User"] = image.user
    if image.env:
        config["Env"] = list(image.env)
    if image.labels:
        config["Labels"] = dict(sorted(image.labels.items()))
    doc = {
        "architecture": "amd64", "os": "linux", "created": EPOCH, "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created": EPOCH, "created_by": "hack/images/archive.py"}],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def write(image: ScratchImage, path: Path) -> None:
    """Write `image` as a docker archive at `path`, atomically (a half-written archive is never taken for one)."""
    layer = layer_tar(image.files)
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = image_config(image, layer_digest)
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = f"{layer_digest}/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [image.tag], "Layers": [layer_name]}]).encode()
    partial = path.with_name(path.name + f".partial-{os.getpid()}")
    with tarfile.open(partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tar_info(f"{layer_digest}/", 0, 0o755, tarfile.DIRTYPE))
        for name, data in ((layer_name, layer), (config_name, config), ("manifest.json", manifest)):
            tar.addfile(_tar_info(name, len(data), 0o644), io.BytesIO(data))
    partial.rename(path)
