"""The host side a FlexVolume driver needs on the test bed's machine (docs/architecture.md#real-nodes).

kube-controller-manager runs a FlexVolume driver's attach and detach, and a node's kubelet runs the rest, each from
the plugin directory of the host it runs on, where the driver's DaemonSet installs it through a hostPath. Here the
controller-manager and every real node of one control plane run on this machine, so they share one directory,
`<plane>/volume-plugins`, as every host of a cluster has the same path: the DaemonSet's pod on each node writes
the same files into it. The machine's own `/usr/libexec/kubernetes/...` is never touched, so two planes' drivers
never meet.

The installed driver runs the host's `python3`, which must bring the driver's third-party packages
(docs/compatibility.md#storage): here that is this virtualenv's interpreter, first on the PATH of the processes
that run the driver.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def volume_plugin_dir(plane_dir: Path) -> Path:
    """The FlexVolume plugin directory of the plane's controller-manager and real nodes (made when missing)."""
    directory = plane_dir / "volume-plugins"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def host_python_path(bin_dir: Path, path: str | None = None) -> str:
    """A PATH whose `python3` is this interpreter: `bin_dir` (made when missing) with a `python3` in it, then
    `path` (default: this process's PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    python3 = bin_dir / "python3"
    if not python3.exists():
        # A script, not a symlink: a virtualenv's interpreter finds its site-packages from the path it is started
        # by, which a symlink elsewhere would hide.
        tmp = bin_dir / ".python3.tmp"
        tmp.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        tmp.chmod(0o755)
        os.replace(tmp, python3)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '') if path is None else path}"


def driver_host_env(plane_dir: Path) -> dict[str, str]:
    """The environment of a process that runs FlexVolume drivers for the plane: this one's, with the host's
    python3 first on PATH."""
    return {**os.environ, "PATH": host_python_path(plane_dir / "host-bin")}
