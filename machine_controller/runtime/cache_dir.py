"""Where the project keeps what it builds once per machine: the test bed's Go binaries (hack/controlplane) and the
CSI driver's generated stubs (storage/csi/spec.py). $OMC_CACHE_DIR, else
${XDG_CACHE_HOME:-~/.cache}/ovirt-machine-controller."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("OMC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ovirt-machine-controller"
