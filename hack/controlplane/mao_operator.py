"""Build machine-api-operator's own operator, and the controllers its image carries, at release-4.13: the last release
that knows the oVirt platform (docs/compatibility.md#the-operator-at-release-413), so the end-to-end tests can let
MAO itself render `machine-api-controllers` with this project's image as its oVirt provider.

mao.py builds MAO's controllers from the pinned module the proxy serves; that version maps the oVirt platform to
"no-op" and renders nothing for it. No release-4.13 version is served by the module proxy (it answers 403 "This
module version is not available" for the commit, its pseudo-version and the branch name), so the source comes from
Git: the pinned commit is fetched alone from $OMC_MAO_GIT (default GitHub; a local clone works too), which checks it
by its hash, and built with the `vendor/` directory the commit carries (`-mod=vendor`, as MAO's own Makefile does),
so nothing else is downloaded. The commit's `install/` manifests (what the cluster-version operator applies) and the
config.openshift.io CRDs the operator watches (from its vendored openshift/api) are kept beside the binaries.

Everything lands in $OMC_CACHE_DIR/mao-operator/<commit>/ (see build.cache_dir), written atomically; once built, no
source is needed again.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir, log, run_go
from .mao import publish

MAO_REPO = "https://github.com/openshift/machine-api-operator"
# The head of release-4.13 when it was pinned (2026-03-30).
MAO_413_COMMIT = "b3b92854d3f8b19ba72c3800e3f0d485c4ebd0b7"
MAO_PACKAGE = "github.com/openshift/machine-api-operator"
# Each command and the name MAO's Dockerfile gives it in the image (the name the rendered Deployment runs).
COMMANDS = {"machine-api-operator": "machine-api-operator", "machineset": "machineset-controller",
            "nodelink-controller": "nodelink-controller", "machine-healthcheck": "machine-healthcheck"}
# The config.openshift.io CRDs the operator lists and watches beside the Infrastructure (vendored openshift/api):
# without them its informers never sync.
CONFIG_CRDS = ("0000_00_cluster-version-operator_01_clusteroperator.crd.yaml",
               "0000_03_config-operator_01_proxy.crd.yaml",
               "0000_10_config-operator_01_featuregate.crd.yaml")
_CRD_DIR = "vendor/github.com/openshift/api/config/v1"


class SourceUnavailable(RuntimeError):
    """The pinned commit could not be fetched: the machine reaches no Git remote that has it."""


def source_repo() -> str:
    return os.environ.get("OMC_MAO_GIT") or MAO_REPO


@dataclass(frozen=True)
class MaoOperator:
    """Where the release-4.13 operator, its controllers, its install manifests and CRDs of one commit live."""

    commit: str = MAO_413_COMMIT

    @property
    def root(self) -> Path:
        return cache_dir() / "mao-operator" / self.commit

    def path(self, command: str) -> Path:
        return self.root / "bin" / command

    @property
    def install_dir(self) -> Path:
        return self.root / "install"

    @property
    def crd_dir(self) -> Path:
        return self.root / "crds"

    def crds(self) -> list[Path]:
        return sorted(self.crd_dir.glob("*.yaml"))

    def complete(self) -> bool:
        return (all(self.path(c).is_file() for c in COMMANDS) and self.install_dir.is_dir()
                and {p.name for p in self.crds()} == set(CONFIG_CRDS))


def _fetch_source(m: MaoOperator, into: Path) -> None:
    """The commit's tree, fetched alone (`--depth 1`) into a bare repository in the cache and unpacked into `into`.
    Git names the commit by the hash of its content, so what is built is exactly the pinned tree."""
    bare = m.root / "src.git"
    if not bare.is_dir():
        subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    repo = source_repo()
    # A local clone serves a commit no branch tip names only when asked to; GitHub does anyway.
    r = subprocess.run(["git", "-C", str(bare), "-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "--quiet",
                        "--depth", "1", repo, m.commit], capture_output=True, text=True)
    if r.returncode != 0:
        raise SourceUnavailable(f"machine-api-operator {m.commit} could not be fetched from {repo} "
                           f"(set OMC_MAO_GIT to a clone that has it): {r.stderr.strip()}")
    tree = subprocess.run(["git", "-C", str(bare), "archive", m.commit], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tree)) as tar:
        tar.extractall(into, filter="data")


def ensure_operator(m: MaoOperator | None = None) -> MaoOperator:
    m = m or MaoOperator()
    if m.complete():
        return m
    if not shutil.which("go"):
        raise RuntimeError("Go is needed to build machine-api-operator, and `go` is not on PATH")
    start = time.monotonic()
    log(f"building machine-api-operator {m.commit} (release-4.13) into {m.root}; the first build takes minutes")
    m.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=m.root, prefix="src.") as tmp:
        src = Path(tmp)
        _fetch_source(m, src)
        bin_partial = Path(tempfile.mkdtemp(dir=m.root, prefix="bin.partial-"))
        # -mod=vendor on the command line overrides go_env's GOFLAGS: the commit's vendor/ is the whole input.
        # The version must be semver: pkg/version parses it when the program starts, and panics otherwise.
        run_go(["go", "build", "-mod=vendor", "-trimpath", "-ldflags",
                f"-s -w -X {MAO_PACKAGE}/pkg/version.Raw=v4.13.0-{m.commit[:12]}",
                "-o", str(bin_partial), *(f"./cmd/{command}" for command in COMMANDS)], src)
        crd_partial = Path(tempfile.mkdtemp(dir=m.root, prefix="crds.partial-"))
        for name in CONFIG_CRDS:
            shutil.copyfile(src / _CRD_DIR / name, crd_partial / name)
        install_partial = Path(tempfile.mkdtemp(dir=m.root, prefix="install.partial-"))
        shutil.copytree(src / "install", install_partial, dirs_exist_ok=True)
    publish(bin_partial, m.root / "bin")
    publish(crd_partial, m.crd_dir)
    publish(install_partial, m.install_dir)
    log(f"built machine-api-operator in {time.monotonic() - start:.0f}s")
    return m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.mao_operator",
                                     description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    m = ensure_operator()
    for command in COMMANDS:
        print(m.path(command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
