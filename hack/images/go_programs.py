"""Images of the Go programs the manifests name beside the product image, built from their modules as the test bed
builds its own (hack/controlplane/csi_tools.py): one static program on an empty root each, tagged as
config/ names it (docs/images.md#go-programs). Each archive's key is its tag and the program's bytes, so a new
build of the program, and nothing else, makes a new archive."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hack.controlplane.csi_tools import CSI_ATTACHER, CSI_PROVISIONER, GoTool, build_tool

from . import cache, docker_archive
from .buildah import images_dir, log
from .keys import digest

# The registry the sidecars' manifests name (config/storage/csi/controller.yaml); the version is the module's.
SIG_STORAGE = "registry.k8s.io/sig-storage"
# The resizer runs in the CSI controller pod only, and no test drives it as a process, so csi_tools does not build
# it for the tests; it is built here, the same way, for its image.
CSI_RESIZER = GoTool("csi-resizer", "github.com/kubernetes-csi/external-resizer/v2", "v2.3.0", "cmd/csi-resizer")


@dataclass(frozen=True)
class GoProgramImage:
    tool: GoTool

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def tag(self) -> str:
        return f"{SIG_STORAGE}/{self.tool.name}:{self.tool.version}"

    def ensure(self) -> Path:
        program = build_tool(self.tool).read_bytes()  # builds the program only when its cache lacks it
        path = cache.archive_path(self.name, digest(self.tag, hashlib.sha256(program).digest()))
        if path.is_file():
            return path
        log(f"writing {self.tag}")
        images_dir().mkdir(parents=True, exist_ok=True)
        entry = f"/{self.tool.name}"
        docker_archive.write(docker_archive.ScratchImage(tag=self.tag, files=(docker_archive.File(entry, program),),
                                                         entrypoint=(entry,)), path)
        cache.prune(self.name, path)
        return path


IMAGES = (GoProgramImage(CSI_PROVISIONER), GoProgramImage(CSI_ATTACHER), GoProgramImage(CSI_RESIZER))
