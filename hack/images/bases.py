"""Stand-ins for the Dockerfile's base images, built here under the names the Dockerfile gives, because no
container registry is reachable from this machine (docs/images.md#stand-in-base-images).

- `python:3.11-slim-bookworm`: Debian bookworm's own packages, unpacked by debootstrap (bookworm's python3 is 3.11),
  arranged as the official image is: `python`, `python3`, `pip` and `pip3` on /usr/local/bin, the headers for C
  extensions, a Python that pip may install into, ca-certificates, tzdata and netbase, LANG=C.UTF-8.
- `golang:1.26-bookworm`: only /usr/local/go, the Go toolchain of this machine (which must be a 1.26): the
  Dockerfile takes nothing else from it.

Each is labelled with its recipe's key and rebuilt only when that key changes (or the image is gone).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .buildah import build_log, buildah, image_label, log, run_logged
from .keys import digest

KEY_LABEL = "org.ovirt-machine-controller.images.key"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# What the official slim image installs beside its own Python build, and Debian's Python parts that make it whole:
# venv (the Dockerfile's `python -m venv`), pip, and the headers the oVirt SDK's C extension is compiled against.
PYTHON_PACKAGES = ("python3", "python3-venv", "python3-pip", "python3-dev", "python-is-python3",
                   "ca-certificates", "tzdata", "netbase")
# The Debian sources the official images carry, so the Dockerfile's `apt-get update` sees security updates too.
DEBIAN_SOURCES = f"""Types: deb
URIs: {DEBIAN_MIRROR}
Suites: {DEBIAN_SUITE} {DEBIAN_SUITE}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: {DEBIAN_SUITE}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
# The official Debian-based images keep apt from leaving its caches in a layer: no package cache files, downloaded
# packages removed after each install, no translations. Without this, every `apt-get install` of the Dockerfile
# leaves its package lists and downloaded packages in its layer, which no later step can take out of the image.
APT_SLIM = """\
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
Acquire::Languages "none";
"""
# Certificates this machine trusts beyond Debian's set (Debian's place for local ones). Here that is the CA of the
# TLS-inspecting egress proxy: without it, pip and Go inside the build cannot reach PyPI or the module proxy.
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def local_cas() -> list[Path]:
    return sorted(LOCAL_CAS.glob("*.crt")) if LOCAL_CAS.is_dir() else []


@dataclass(frozen=True)
class Base:
    """One stand-in: the fully qualified name the Dockerfile's short name means, and its recipe."""

    name: str
    recipe: Callable[[], list[str | bytes]]  # everything the image is made from, for its key
    build: Callable[[str, Path, Path], None]  # fills the mounted root file system of a working container, logging

    def key(self) -> str:
        return digest(self.name, *self.recipe())


def _python_recipe() -> list[str | bytes]:
    return [DEBIAN_SUITE, DEBIAN_MIRROR, *PYTHON_PACKAGES, DEBIAN_SOURCES, APT_SLIM, PATH,
            *(part for ca in local_cas() for part in (ca.name, ca.read_bytes()))]


def _build_python(container: str, root: Path, log_file: Path) -> None:
    if not shutil.which("debootstrap"):
        raise RuntimeError("debootstrap is needed for the python stand-in image; `make system-deps` installs it")
    run_logged(["debootstrap", "--variant=minbase", f"--include={','.join(PYTHON_PACKAGES)}",
                DEBIAN_SUITE, str(root), DEBIAN_MIRROR], log_file)
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d/debian.sources").write_text(DEBIAN_SOURCES)
    (root / "etc/apt/apt.conf.d/90slim-image").write_text(APT_SLIM)
    for ca in local_cas():
        shutil.copyfile(ca, root / "usr/local/share/ca-certificates" / ca.name)
    run_logged(["chroot", str(root), "update-ca-certificates"], log_file, env={"PATH": PATH, "LANG": "C.UTF-8"})
    # The official image's Python is its own, and pip installs into it; Debian marks its Python as managed by
    # apt (PEP 668). This Python is the image's, as there.
    for marker in (root / "usr/lib").glob("python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for name, target in (("python", "python3"), ("python3", "python3"), ("pip", "pip3"), ("pip3", "pip3")):
        (root / "usr/local/bin" / name).symlink_to(f"/usr/bin/{target}")
    # What the run time provides, and what only the build needed.
    for leftover in ("etc/resolv.conf", "etc/hostname"):
        (root / leftover).unlink(missing_ok=True)
    for cache in ("var/lib/apt/lists", "var/cache/apt"):
        for f in (root / cache).glob("**/*"):
            if f.is_file() and f.name != "lock":
                f.unlink()
    python_version = "import platform; print(platform.python_version())"
    version = subprocess.run(["chroot", str(root), "python3", "-c", python_version],
                             check=True, capture_output=True, text=True, env={"PATH": PATH}).stdout.strip()
    buildah("config", f"--env=PATH={PATH}", "--env=LANG=C.UTF-8", f"--env=PYTHON_VERSION={version}",
            "--cmd=python3", container)


def _goroot() -> Path:
    if not shutil.which("go"):
        raise RuntimeError("Go is needed for the golang stand-in image, and `go` is not on PATH")
    return Path(subprocess.run(["go", "env", "GOROOT"], check=True, capture_output=True, text=True).stdout.strip())


def _go_version() -> str:
    return (_goroot() / "VERSION").read_text().splitlines()[0]


def _golang_recipe() -> list[str | bytes]:
    return [_go_version(), str(_goroot())]


def _build_golang(container: str, root: Path, log_file: Path) -> None:
    version = _go_version()
    if not version.startswith("go1.26"):
        raise RuntimeError(f"the Dockerfile copies Go from golang:1.26-bookworm, and this machine's Go is {version}")
    shutil.copytree(_goroot(), root / "usr/local/go", symlinks=True)
    buildah("config", f"--env=PATH=/usr/local/go/bin:{PATH}", f"--env=GOLANG_VERSION={version.removeprefix('go')}",
            "--env=GOPATH=/go", container)


PYTHON = Base("docker.io/library/python:3.11-slim-bookworm", _python_recipe, _build_python)
GOLANG = Base("docker.io/library/golang:1.26-bookworm", _golang_recipe, _build_golang)
BASES = (PYTHON, GOLANG)


def ensure_base(base: Base) -> str:
    """Build `base` into the project's image storage unless an image of its key is there; return the key."""
    key = base.key()
    found = image_label(base.name, KEY_LABEL)
    if found == key:
        return key
    if found is not None:  # an older recipe's: vfs would keep all of its copy for nothing
        buildah("rmi", base.name)
    log(f"building the stand-in {base.name}")
    start = time.monotonic()
    container = buildah("from", "--pull=never", "scratch").stdout.strip()
    try:
        root = Path(buildah("mount", container).stdout.strip())
        log_file = build_log("stand-in-" + base.name.rpartition("/")[2].partition(":")[0])
        log_file.write_text("")
        base.build(container, root, log_file)
        buildah("config", f"--label={KEY_LABEL}={key}",
                "--label=org.ovirt-machine-controller.images.stand-in=built locally, see docs/images.md",
                container)
        buildah("commit", "--rm", container, base.name)
    except BaseException:
        buildah("rm", container, check=False)
        raise
    log(f"built the stand-in {base.name} in {time.monotonic() - start:.0f}s")
    return key
