"""The pause image `registry.k8s.io/pause:3.10.1` (the sandbox image nodes.PAUSE_IMAGE names), holding the
project's own pause program (pause.c beside this file) compiled static: one file on an empty root
(docs/images.md#the-pause-image). No registry is reachable, and the kubelet's containerd starts every pod with it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from hack.controlplane.nodes import PAUSE_IMAGE

from . import cache, docker_archive
from .buildah import images_dir, log
from .keys import digest

SOURCE = Path(__file__).with_name("pause.c")
VERSION = PAUSE_IMAGE.rpartition(":")[2]
CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror", f'-DOMC_PAUSE_VERSION="{VERSION}"')
# As the upstream sandbox image runs: not as root, since it needs no privilege.
USER = "65535:65535"


def _compiler() -> str:
    cc = shutil.which("gcc")
    if cc is None:
        raise RuntimeError("gcc is needed to compile the pause program; `make system-deps` installs it")
    return cc


def key() -> str:
    cc_version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True, check=True).stdout
    return digest(PAUSE_IMAGE, SOURCE.read_bytes(), *CFLAGS, cc_version.splitlines()[0], USER)


def compile_pause(out: Path) -> None:
    subprocess.run([_compiler(), *CFLAGS, "-o", str(out), str(SOURCE)], check=True)


def image(program: bytes) -> docker_archive.ScratchImage:
    return docker_archive.ScratchImage(tag=PAUSE_IMAGE, files=(docker_archive.File("/pause", program),),
                                entrypoint=("/pause",), user=USER)


def ensure() -> Path:
    path = cache.archive_path("pause", key())
    if path.is_file():
        return path
    log(f"building {PAUSE_IMAGE} from {SOURCE.name}")
    images_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=images_dir()) as tmp:
        program = Path(tmp) / "pause"
        compile_pause(program)
        docker_archive.write(image(program.read_bytes()), path)
    cache.prune("pause", path)
    return path
