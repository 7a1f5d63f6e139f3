"""The product image, `ovirt-machine-controller:latest` (the name config/ gives), built by buildah from the
repository's unchanged Dockerfile on the stand-in base images (bases.py), exported as a docker archive
(docs/images.md#the-product-image).

Its key covers the Dockerfile, the files its COPY lines take (keys.py) and the stand-ins' own keys; nothing else
rebuilds it. The build context is a copy of exactly those files, so what was hashed is what was built.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from . import cache
from .bases import BASES, KEY_LABEL, ensure_base
from .buildah import build_log, buildah, buildah_logged, images_dir, log, ulimit_flags
from .keys import context_files, copy_sources, digest, tree_key

NAME = "ovirt-machine-controller"
TAG = f"{NAME}:latest"
# What the short name means to buildah and containerd alike; built under it, the image has no other name to export
# (buildah would name it localhost/... otherwise, and the archive would carry both).
REFERENCE = f"docker.io/library/{TAG}"
REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = "Dockerfile"


def context(root: Path = REPO_ROOT) -> list[str]:
    """The build context's files: the Dockerfile and what its COPY lines take, relative to `root`."""
    return [DOCKERFILE, *context_files(root, copy_sources((root / DOCKERFILE).read_text()))]


def key(root: Path = REPO_ROOT) -> str:
    return digest(tree_key(root, context(root)), *(b.key() for b in BASES))


def ensure(root: Path = REPO_ROOT) -> Path:
    k = key(root)
    path = cache.archive_path(NAME, k)
    if path.is_file():
        return path
    # Working containers a killed build left behind, each a full vfs copy of its image. Only this function (under
    # its image's lock) builds in the project's storage, so none of them is another build's.
    buildah("rm", "--all", check=False)
    for base in BASES:
        ensure_base(base)
    start = time.monotonic()
    log_file = build_log(NAME)
    log_file.write_text("")
    log(f"building {TAG} from {root / DOCKERFILE} (several minutes; its output goes to {log_file})")
    images_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=images_dir(), prefix="context-") as tmp:
        for rel in context(root):
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, Path(tmp) / rel)
        buildah_logged("build", "--pull=never", "--isolation=chroot", "--network=host", *ulimit_flags(),
                       f"--label={KEY_LABEL}={k}", f"--tag={REFERENCE}", f"--file={Path(tmp) / DOCKERFILE}", tmp,
                       log=log_file)
    try:
        partial = path.with_name(path.name + ".partial")
        partial.unlink(missing_ok=True)
        buildah_logged("push", "--quiet", REFERENCE, f"docker-archive:{partial}:{REFERENCE}", log=log_file)
        partial.rename(path)
    finally:
        # The archive is what the nodes import; vfs keeps a full copy of every layer, so the image goes.
        buildah("rmi", REFERENCE, check=False)
    cache.prune(NAME, path)
    log(f"built {TAG} in {time.monotonic() - start:.0f}s: {path}")
    return path
