"""Build the control-plane binaries from their Go modules at a pinned release, cached outside the repository.

`go install k8s.io/kubernetes/cmd/kube-apiserver@vX` cannot work: k8s.io/kubernetes requires its staging
modules at v0.0.0 through `replace ... => ./staging/...` lines, which only the main module may carry
(kubernetes/kubernetes#79384). So we write a small wrapper module that requires k8s.io/kubernetes and replaces
every staging module with its published v0.<minor>.<patch> twin, then `go build` the commands from it
(docs/architecture.md#the-test-bed). etcd is built the same way from go.etcd.io/etcd/server/v3,
with a one-line main that calls its etcdmain package.

The binaries land in $OMC_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/ovirt-machine-controller), keyed by
version, so a machine builds them once; Go's own module and build caches make a rebuild cheap too.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from machine_controller.runtime.cache_dir import cache_dir

KUBE_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.8"
# kubelet runs the test bed's real nodes (hack/controlplane/nodes.py), kube-proxy their Services (proxy.py); both
# come from the same module and go.mod.
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy")
_GOPROXY_DEFAULT = "https://proxy.golang.org"


@dataclass(frozen=True)
class Binaries:
    """Where the pinned binaries of one release live."""

    kube_version: str = KUBE_VERSION
    etcd_version: str = ETCD_VERSION

    @property
    def kube_dir(self) -> Path:
        return cache_dir() / "kube" / self.kube_version / "bin"

    @property
    def etcd_dir(self) -> Path:
        return cache_dir() / "etcd" / self.etcd_version / "bin"

    def path(self, name: str) -> Path:
        return (self.etcd_dir if name == "etcd" else self.kube_dir) / name

    def missing(self) -> list[str]:
        return [n for n in (*KUBE_COMMANDS, "etcd") if not os.access(self.path(n), os.X_OK)]


def log(msg: str) -> None:
    print(f"[build] {msg}", file=sys.stderr, flush=True)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never let a go.mod `toolchain` line download another Go: the proxy serves modules, not toolchains.
    env.setdefault("GOTOOLCHAIN", "local")
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = "-mod=mod -buildvcs=false"
    return env


def _goproxy() -> str:
    proxy = os.environ.get("GOPROXY") or subprocess.run(
        ["go", "env", "GOPROXY"], capture_output=True, text=True, check=True
    ).stdout.strip()
    first = proxy.split(",")[0].split("|")[0]
    return first if first.startswith("http") else _GOPROXY_DEFAULT


def staging_modules(kube_version: str) -> list[str]:
    """The staging modules k8s.io/kubernetes replaces with ./staging paths, read from its published go.mod,
    so the list is always the one of the pinned release (it changes between minors)."""
    url = f"{_goproxy()}/k8s.io/kubernetes/@v/{kube_version}.mod"
    with urllib.request.urlopen(url, timeout=60) as resp:
        gomod = resp.read().decode()
    return re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod, re.MULTILINE)


def run_go(cmd: list[str], cwd: Path) -> None:
    log(" ".join(cmd))
    subprocess.run(cmd, cwd=cwd, env=go_env(), check=True)


def _version_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    # kubectl reads client-go's copy of the version; the servers read component-base's.
    pkgs = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    return " ".join(f"-X {p}.{k}={v}" for p in pkgs for k, v in stamp.items()) + " -s -w"


def build_kube(b: Binaries, commands: list[str]) -> None:
    """Build `commands` only: a cache that lacks one command (say, kubelet after it joined the list) must not
    rebuild the others."""
    work = b.kube_dir.parent / "src"
    work.mkdir(parents=True, exist_ok=True)
    staging_version = "v0." + b.kube_version.lstrip("v").split(".", 1)[1]
    replaces = "\n".join(f"\t{m} => {m} {staging_version}" for m in staging_modules(b.kube_version))
    (work / "go.mod").write_text(
        "module omc.local/kubebuild\n\ngo 1.25.0\n\n"
        f"require k8s.io/kubernetes {b.kube_version}\n\nreplace (\n{replaces}\n)\n"
    )
    run_go(["go", "mod", "download", "k8s.io/kubernetes"], work)
    tmp_out = b.kube_dir.with_name("bin.partial")
    shutil.rmtree(tmp_out, ignore_errors=True)
    tmp_out.mkdir(parents=True)
    pkgs = [f"k8s.io/kubernetes/cmd/{c}" for c in commands]
    run_go(["go", "build", "-trimpath", "-ldflags", _version_ldflags(b.kube_version), "-o", str(tmp_out), *pkgs], work)
    b.kube_dir.mkdir(parents=True, exist_ok=True)
    for c in commands:  # each rename is atomic: a half-built binary is never taken for a whole one
        (tmp_out / c).rename(b.kube_dir / c)
    tmp_out.rmdir()


def build_etcd(b: Binaries) -> None:
    work = b.etcd_dir.parent / "src"
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(
        f"module omc.local/etcdbuild\n\ngo 1.24.0\n\nrequire go.etcd.io/etcd/server/v3 {b.etcd_version}\n"
    )
    # etcd's own main.go is exactly this call; its root module carries replaces, so we cannot build it directly.
    (work / "main.go").write_text(
        'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\n'
        "func main() { etcdmain.Main(os.Args) }\n"
    )
    b.etcd_dir.mkdir(parents=True, exist_ok=True)
    run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(b.etcd_dir / "etcd.partial"), "."], work)
    (b.etcd_dir / "etcd.partial").rename(b.etcd_dir / "etcd")


def ensure_binaries(b: Binaries | None = None) -> Binaries:
    b = b or Binaries()
    missing = b.missing()
    if not missing:
        return b
    if not shutil.which("go"):
        raise RuntimeError("Go is needed to build the control plane binaries, and `go` is not on PATH")
    start = time.monotonic()
    log(f"building {', '.join(missing)} (Kubernetes {b.kube_version}, etcd {b.etcd_version}) into {cache_dir()};"
         " the first build takes several minutes, later runs reuse it")
    if "etcd" in missing:
        build_etcd(b)
    kube_missing = [n for n in missing if n in KUBE_COMMANDS]
    if kube_missing:
        build_kube(b, kube_missing)
    log(f"built in {time.monotonic() - start:.0f}s")
    return b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.build", description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the binary directories and exit")
    args = parser.parse_args(argv)
    b = Binaries()
    if args.print_dir:
        print(b.kube_dir)
        print(b.etcd_dir)
        return 0
    ensure_binaries(b)
    for n in (*KUBE_COMMANDS, "etcd"):
        print(b.path(n))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
