"""Build machine-api-operator's generic controllers (machineset, nodelink, machine-healthcheck) from its Go module,
pinned, cached outside the repository, so the end-to-end tests can run this project's actuator side beside them
as on an OpenShift cluster (docs/architecture.md#deployment-modes, docs/architecture.md#the-test-bed).

The wrapper module requires github.com/openshift/machine-api-operator at a pinned pseudo-version and nothing else:
MAO's own `replace` lines are not inherited (only a main module's replaces apply), which is what we want, since
their targets under github.com/openshift/kubernetes are refused by the module proxy and serve only MAO's test
binaries. The OpenShift CRDs the controllers read (Infrastructure, ...) come from the github.com/openshift/api
module MAO requires, downloaded into Go's module cache at build time and copied beside the binaries.

Everything lands in $OMC_CACHE_DIR/mao/<version>/ (see build.cache_dir), written atomically, so a machine builds
it once.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir, go_env, log, run_go

MAO_MODULE = "github.com/openshift/machine-api-operator"
MAO_VERSION = "v0.2.1-0.20260226113419-88465550a74b"
MAO_COMMANDS = ("machineset", "nodelink-controller", "machine-healthcheck")
OPENSHIFT_API_MODULE = "github.com/openshift/api"
# The config.openshift.io CRDs the controllers read, by their file in openshift/api (the Default feature set's
# variant where there is one): cmd/machineset reads the Infrastructure and DNS objects named `cluster` at start-up
# and exits without them (docs/compatibility.md#machine-api-operators-own-controllers).
OPENSHIFT_CRDS = (
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_dnses.crd.yaml",
)


@dataclass(frozen=True)
class MaoBinaries:
    """Where the MAO controllers and the OpenShift CRDs of one pinned MAO version live."""

    version: str = MAO_VERSION

    @property
    def root(self) -> Path:
        return cache_dir() / "mao" / self.version

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def crd_dir(self) -> Path:
        return self.root / "crds"

    def path(self, command: str) -> Path:
        return self.bin_dir / command

    def crds(self) -> list[Path]:
        return sorted(self.crd_dir.glob("*.yaml"))

    def missing(self) -> list[str]:
        absent = [c for c in MAO_COMMANDS if not self.path(c).is_file()]
        if {p.name for p in self.crds()} != {Path(rel).name for rel in OPENSHIFT_CRDS}:
            absent.append("crds")
        return absent


def _wrapper(b: MaoBinaries) -> Path:
    work = b.root / "src"
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(f"module omc.local/maobuild\n\ngo 1.25.0\n\nrequire {MAO_MODULE} {b.version}\n")
    return work


def _module_dir(work: Path, module: str) -> Path:
    """The module cache directory of `module` at the version the wrapper selects, downloaded if needed."""
    out = subprocess.run(["go", "mod", "download", "-json", module], cwd=work, env=go_env(), check=True,
                         capture_output=True, text=True).stdout
    return Path(json.loads(out)["Dir"])


def _publish(partial: Path, final: Path) -> None:
    """Put a finished directory in place by a rename: a half-built set is never taken for a whole one."""
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)


def build_commands(b: MaoBinaries, work: Path) -> None:
    # A directory of its own per build, so two builds at once (two checkouts on one machine) do not clobber each other.
    tmp_out = Path(tempfile.mkdtemp(dir=b.root, prefix="bin.partial-"))
    pkgs = [f"{MAO_MODULE}/cmd/{c}" for c in MAO_COMMANDS]
    run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp_out), *pkgs], work)
    _publish(tmp_out, b.bin_dir)


def copy_crds(b: MaoBinaries, work: Path) -> None:
    api_dir = _module_dir(work, OPENSHIFT_API_MODULE)
    tmp = Path(tempfile.mkdtemp(dir=b.root, prefix="crds.partial-"))
    for rel in OPENSHIFT_CRDS:
        shutil.copyfile(api_dir / rel, tmp / Path(rel).name)
    _publish(tmp, b.crd_dir)


def ensure_mao(b: MaoBinaries | None = None) -> MaoBinaries:
    b = b or MaoBinaries()
    missing = b.missing()
    if not missing:
        return b
    if not shutil.which("go"):
        raise RuntimeError("Go is needed to build machine-api-operator's controllers, and `go` is not on PATH")
    start = time.monotonic()
    log(f"building {', '.join(missing)} (machine-api-operator {b.version}) into {b.root}; the first build takes "
         "a few minutes, later runs reuse it")
    work = _wrapper(b)
    if any(c in missing for c in MAO_COMMANDS):
        build_commands(b, work)
    if "crds" in missing:
        copy_crds(b, work)
    log(f"built in {time.monotonic() - start:.0f}s")
    return b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.mao", description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the cache directory and exit")
    args = parser.parse_args(argv)
    b = MaoBinaries()
    if args.print_dir:
        print(b.root)
        return 0
    ensure_mao(b)
    for c in MAO_COMMANDS:
        print(b.path(c))
    for crd in b.crds():
        print(crd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
