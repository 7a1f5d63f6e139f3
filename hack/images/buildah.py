"""buildah as the image modules run it: the project's own image storage in the cache, the vfs driver, chroot
isolation, and rlimits no higher than this process's own (docs/images.md#how-buildah-runs-here).

Without CAP_SYS_RESOURCE (docs/architecture.md#real-nodes) nothing may raise a hard rlimit, so a RUN step asking
for more than the building process has fails: the hard open-files limit here is 20000, under the 1048576 an OCI
runtime commonly sets. RUN steps are given limits no higher than ours (`ulimit_flags`).
"""

from __future__ import annotations

import fcntl
import os
import resource
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from machine_controller.runtime.cache_dir import cache_dir


def images_dir() -> Path:
    """Where the archives and buildah's storage live: built once per machine, like the Go binaries."""
    return cache_dir() / "images"


def log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


@contextmanager
def build_lock(name: str) -> Iterator[None]:
    """One build of image `name` at a time on the machine: the two pytest workers may both ask for the same missing
    archive, and the second must find the first one's instead of building it again."""
    images_dir().mkdir(parents=True, exist_ok=True)
    with open(images_dir() / f".lock-{name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# buildah's own defaults for RUN steps; it also lowers its own process to them before a RUN step starts, so a
# limit asked above them fails as surely as one above the host's.
_BUILDAH_ULIMITS = {"nofile": (resource.RLIMIT_NOFILE, 1048576), "nproc": (resource.RLIMIT_NPROC, 32768)}


def ulimit_flags() -> list[str]:
    """`--ulimit` flags holding every RUN step at or under this process's own limits and buildah's defaults (see
    the module's docstring)."""
    flags = []
    for name, (limit, default) in _BUILDAH_ULIMITS.items():
        soft, hard = resource.getrlimit(limit)
        hard = default if hard == resource.RLIM_INFINITY else min(hard, default)
        soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        flags.append(f"--ulimit={name}={soft}:{hard}")
    return flags


def buildah(*args: str, capture: bool = False, check: bool = True,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run buildah on the project's storage. Its output goes to our stderr (a build's progress), or is returned
    when `capture`."""
    exe = shutil.which("buildah")
    if exe is None:
        raise RuntimeError("buildah is needed to build the images; `make system-deps` installs it "
                           "(hack/install-system-deps.sh)")
    store = images_dir() / "storage"
    argv = [exe, f"--root={store}", f"--runroot={store}-run", "--storage-driver=vfs", *args]
    env = {**os.environ, "BUILDAH_ISOLATION": "chroot", "STORAGE_DRIVER": "vfs"}
    r = subprocess.run(argv, cwd=cwd, env=env, text=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE if capture else sys.stderr,
                       stderr=subprocess.PIPE if capture else None)
    if check and r.returncode != 0:
        detail = f": {r.stderr.strip()}" if capture else " (its output is above)"
        raise RuntimeError(f"buildah {' '.join(args[:2])} failed{detail}")
    return r


def image_label(image: str, label: str) -> str | None:
    """The value of `label` on `image` in the project's storage, None when there is no such image."""
    r = buildah("inspect", "--type=image", f'--format={{{{index .OCIv1.Config.Labels "{label}"}}}}', image,
                capture=True, check=False)
    return r.stdout.strip() if r.returncode == 0 else None
