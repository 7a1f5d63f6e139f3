"""Build Cluster API's core manager and clusterctl from the sigs.k8s.io/cluster-api Go module, pinned, cached
outside the repository, so the end-to-end tests can run upstream Cluster API's own controllers against the local
control plane (docs/architecture.md#the-test-bed).

The wrapper module requires sigs.k8s.io/cluster-api and its API submodule sigs.k8s.io/cluster-api/api at the same
pinned release: the main module replaces the submodule with its own ./api directory, and a dependency's `replace`
lines never apply, so the wrapper names the published twin itself. The CRDs and the webhook configuration the
manager serves come from the module's directory (core/config/crd/bases, core/config/webhook), copied beside the
binaries, so the bed installs exactly what a release installs.

Everything lands in $OMC_CACHE_DIR/capi/<version>/ (see build.cache_dir), written atomically, so a machine builds
it once.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir, log, run_go
from .mao import _module_dir, _publish

CAPI_MODULE = "sigs.k8s.io/cluster-api"
CAPI_API_MODULE = "sigs.k8s.io/cluster-api/api"
CAPI_VERSION = "v1.14.2"
# Binary name -> package. The core manager is what the bed runs; clusterctl is kept for the provider's clusterctl
# contract (issue 40), built now so both share one download and one build.
CAPI_COMMANDS = {"capi-manager": f"{CAPI_MODULE}/core", "clusterctl": f"{CAPI_MODULE}/cmd/clusterctl"}
_CRD_SOURCE = "core/config/crd/bases"
_WEBHOOK_SOURCE = "core/config/webhook/manifests.yaml"
WEBHOOK_MANIFEST = "webhooks.yaml"


@dataclass(frozen=True)
class CapiBinaries:
    """Where the Cluster API binaries, CRDs and webhook manifest of one pinned release live."""

    version: str = CAPI_VERSION

    @property
    def root(self) -> Path:
        return cache_dir() / "capi" / self.version

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    def path(self, command: str) -> Path:
        return self.bin_dir / command

    def crds(self) -> list[Path]:
        return sorted((self.config_dir / "crds").glob("*.yaml"))

    @property
    def webhooks(self) -> Path:
        return self.config_dir / WEBHOOK_MANIFEST

    def missing(self) -> list[str]:
        absent = [c for c in CAPI_COMMANDS if not self.path(c).is_file()]
        if not self.crds() or not self.webhooks.is_file():
            absent.append("config")
        return absent


def _wrapper(b: CapiBinaries) -> Path:
    work = b.root / "src"
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(f"module omc.local/capibuild\n\ngo 1.26.0\n\n"
                                 f"require (\n\t{CAPI_MODULE} {b.version}\n\t{CAPI_API_MODULE} {b.version}\n)\n")
    return work


def build_commands(b: CapiBinaries, work: Path) -> None:
    # A directory of its own per build, so two builds at once (two checkouts on one machine) do not clobber each other.
    tmp_out = Path(tempfile.mkdtemp(dir=b.root, prefix="bin.partial-"))
    for name, pkg in CAPI_COMMANDS.items():  # one `go build` each: `-o dir` would name the core manager `core`
        run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp_out / name), pkg], work)
    _publish(tmp_out, b.bin_dir)


def copy_config(b: CapiBinaries, work: Path) -> None:
    module_dir = _module_dir(work, CAPI_MODULE)
    tmp = Path(tempfile.mkdtemp(dir=b.root, prefix="config.partial-"))
    (tmp / "crds").mkdir()
    for crd in sorted((module_dir / _CRD_SOURCE).glob("*.yaml")):
        shutil.copyfile(crd, tmp / "crds" / crd.name)
    shutil.copyfile(module_dir / _WEBHOOK_SOURCE, tmp / WEBHOOK_MANIFEST)
    _publish(tmp, b.config_dir)


def ensure_capi(b: CapiBinaries | None = None) -> CapiBinaries:
    b = b or CapiBinaries()
    missing = b.missing()
    if not missing:
        return b
    if not shutil.which("go"):
        raise RuntimeError("Go is needed to build Cluster API's core manager, and `go` is not on PATH")
    start = time.monotonic()
    log(f"building {', '.join(missing)} (Cluster API {b.version}) into {b.root}; the first build takes a few "
        "minutes, later runs reuse it")
    work = _wrapper(b)
    if any(c in missing for c in CAPI_COMMANDS):
        build_commands(b, work)
    if "config" in missing:
        copy_config(b, work)
    log(f"built in {time.monotonic() - start:.0f}s")
    return b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.capi", description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the cache directory and exit")
    args = parser.parse_args(argv)
    b = CapiBinaries()
    if args.print_dir:
        print(b.root)
        return 0
    ensure_capi(b)
    for c in CAPI_COMMANDS:
        print(b.path(c))
    for crd in b.crds():
        print(crd)
    print(b.webhooks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
