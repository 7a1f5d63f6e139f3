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


def build_log(name: str) -> Path:
    """Where the output of `name`'s last build goes: a build prints thousands of lines, which `make test` should
    not drown in; a failure quotes the end of it."""
    images_dir().mkdir(parents=True, exist_ok=True)
    return images_dir() / f"{name}.build.log"


def run_logged(argv: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    """Run `argv` with its output appended to `log`; if it fails, raise with the log's last lines."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        r = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"{Path(argv[0]).name} {' '.join(argv[1:2])} failed (exit {r.returncode}); "
                           f"the end of {log}:\n{tail}")


def _argv(args: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    exe = shutil.which("buildah")
    if exe is None:
        raise RuntimeError("buildah is needed to build the images; `make system-deps` installs it "
                           "(hack/install-system-deps.sh)")
    store = images_dir() / "storage"
    env = {**os.environ, "BUILDAH_ISOLATION": "chroot", "STORAGE_DRIVER": "vfs"}
    return [exe, f"--root={store}", f"--runroot={store}-run", "--storage-driver=vfs", *args], env


def buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a short buildah command on the project's storage and return its output."""
    argv, env = _argv(args)
    r = subprocess.run(argv, env=env, text=True, stdin=subprocess.DEVNULL, capture_output=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"buildah {' '.join(args[:2])} failed: {r.stderr.strip()}")
    return r


def buildah_logged(*args: str, log: Path) -> None:
    """Run a long buildah command (a build, a push) on the project's storage, its output going to `log`."""
    argv, env = _argv(args)
    run_logged(argv, log, env)


def image_label(image: str, label: str) -> str | None:
    """The value of `label` on `image` in the project's storage, None when there is no such image."""
    r = buildah("inspect", "--type=image", f'--format={{{{index .OCIv1.Config.Labels "{label}"}}}}', image,
                check=False)
    return r.stdout.strip() if r.returncode == 0 else None
