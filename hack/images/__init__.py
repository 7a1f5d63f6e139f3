"""The images the test bed's real nodes run, built locally and cached by content (docs/images.md).

`archive(name)` returns the path of a docker archive (for `ctr images import`), building it first when its inputs
changed or it was never built:

- `pause`: registry.k8s.io/pause:3.10.1, the project's own sandbox program (pause.py);
- `ovirt-machine-controller`: the product image, from the unchanged Dockerfile, built by buildah on stand-in base
  images (product.py, bases.py);
- `csi-provisioner`, `csi-attacher`, `csi-resizer`: the CSI sidecars config/ names, built from their modules
  (go_programs.py).

`python -m hack.images [NAME...]` builds them and prints their paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import go_programs, pause, product
from .buildah import build_lock

BUILDERS: dict[str, Callable[[], Path]] = {"pause": pause.ensure, product.NAME: product.ensure,
                                           **{image.name: image.ensure for image in go_programs.IMAGES}}
NAMES = tuple(BUILDERS)


def archive(name: str) -> Path:
    """The docker archive of image `name`, built if missing (one build of it at a time on the machine)."""
    try:
        build = BUILDERS[name]
    except KeyError:
        raise ValueError(f"unknown image {name!r}: known are {', '.join(NAMES)}") from None
    with build_lock(name):
        return build()
