"""Images of the Go programs the manifests name beside the product image, built from their modules as the test bed
builds its own (hack/controlplane/csi_tools.py): static programs on an empty root, tagged as config/ names them
(docs/images.md#go-programs); and the two images machine-api-operator's Deployments name, its own (the operator and
its controllers, hack/controlplane/mao_operator.py) and kube-rbac-proxy. Each archive's key is its tag and the
programs' names and bytes, so a new build of a program, and nothing else, makes a new archive."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hack.controlplane.csi_tools import CSI_ATTACHER, CSI_PROVISIONER, GoTool, build_tool
from hack.controlplane.mao_operator import COMMANDS, ensure_operator

from . import cache, docker_archive
from .buildah import images_dir, log
from .keys import digest

# The registry the sidecars' manifests name (config/storage/csi/controller.yaml); the version is the module's.
SIG_STORAGE = "registry.k8s.io/sig-storage"
# The resizer runs in the CSI controller pod only, and no test drives it as a process, so csi_tools does not build
# it for the tests; it is built here, the same way, for its image.
CSI_RESIZER = GoTool("csi-resizer", "github.com/kubernetes-csi/external-resizer/v2", "v2.3.0", "cmd/csi-resizer")


# kube-rbac-proxy, which MAO puts before every metrics port of its pods. v0.19.1 is the newest release the module
# proxy serves (v0.21.0 and v0.20.2 are refused, docs/images.md#not-built-yet); it still takes the klog flags MAO
# passes (`--logtostderr`), as deprecated no-ops. Tagged as its upstream publishes it.
KUBE_RBAC_PROXY = GoTool("kube-rbac-proxy", "github.com/brancz/kube-rbac-proxy", "v0.19.1", "cmd/kube-rbac-proxy",
                         group="kube-rbac-proxy")
# machine-api-operator's image at release-4.13, under the name OKD publishes it with; not `latest`, so a pod that
# names it gets IfNotPresent and never tries to pull it (MAO sets no imagePullPolicy).
MAO_TAG = "quay.io/openshift/origin-machine-api-operator:4.13"


def _ensure_archive(name: str, tag: str, programs: dict[str, Path], entrypoint: str) -> Path:
    """The archive of `programs` (path in the image -> program) on an empty root, written if its key is new."""
    files = tuple(docker_archive.File(path, program.read_bytes()) for path, program in sorted(programs.items()))
    path = cache.archive_path(name, digest(tag, *(f.path + ":" + hashlib.sha256(f.data).hexdigest() for f in files)))
    if path.is_file():
        return path
    log(f"writing {tag}")
    images_dir().mkdir(parents=True, exist_ok=True)
    docker_archive.write(docker_archive.ScratchImage(tag=tag, files=files, entrypoint=(entrypoint,)), path)
    cache.prune(name, path)
    return path


@dataclass(frozen=True)
class GoProgramImage:
    """One program of a Go module, alone, with itself as entry point."""

    tool: GoTool
    registry: str = SIG_STORAGE

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def tag(self) -> str:
        return f"{self.registry}/{self.tool.name}:{self.tool.version}"

    def ensure(self) -> Path:
        entry = f"/{self.tool.name}"
        return _ensure_archive(self.name, self.tag, {entry: build_tool(self.tool)}, entry)  # builds it if missing


@dataclass(frozen=True)
class MaoImage:
    """machine-api-operator's image: the operator and the controllers, each under the name MAO's Dockerfile gives
    it, which is the command the rendered machine-api-controllers runs (`/machineset-controller`, ...)."""

    name: str = "machine-api-operator"
    tag: str = MAO_TAG

    def ensure(self) -> Path:
        m = ensure_operator()  # builds them if missing
        return _ensure_archive(self.name, self.tag, {f"/{image_name}": m.path(command)
                                                     for command, image_name in COMMANDS.items()},
                               "/machine-api-operator")


IMAGES = (GoProgramImage(CSI_PROVISIONER), GoProgramImage(CSI_ATTACHER), GoProgramImage(CSI_RESIZER))
# The images machine-api-operator's Deployments name; not built by `make images`, since MAO's source comes from Git,
# which a machine may not reach (hack/controlplane/mao_operator.py): the test that runs them builds them.
OPENSHIFT_IMAGES = (GoProgramImage(KUBE_RBAC_PROXY, registry="quay.io/brancz"), MaoImage())
