"""The CSI spec's Python stubs, generated from its `csi.proto` with grpcio-tools, never committed.

Where the proto comes from (docs/storage.md#csi-driver): the spec is published as the Go module
`github.com/container-storage-interface/spec` (csi.proto at its root, Apache-2.0). We pin `SPEC_VERSION`, the
version the pinned CSI sidecars and csi-sanity require, and take the file from Go's module cache
(`go mod download -json`, through the module proxy), or from `$OVIRT_CSI_PROTO` where there is no Go (an image
build copies the file there). `python -m grpc_tools.protoc` turns it into `csi_pb2.py`/`csi_pb2_grpc.py` under
`$OMC_CACHE_DIR/csi/spec/<version>-grpcio-tools-<its version>/` (or `$OVIRT_CSI_STUBS`), atomically, once per machine;
`load()` imports them from there. grpcio-tools carries protoc and the well-known types csi.proto imports.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

from machine_controller.runtime.cache_dir import cache_dir

SPEC_MODULE = "github.com/container-storage-interface/spec"
SPEC_VERSION = "v1.13.0"
PROTO_ENV = "OVIRT_CSI_PROTO"
STUBS_ENV = "OVIRT_CSI_STUBS"


class SpecUnavailable(RuntimeError):
    pass


def stubs_dir() -> Path:
    # Keyed by the grpcio-tools version too: generated code demands grpcio and protobuf at least as new as the
    # generator, so stubs of a newer grpcio-tools must never be imported by an older installation.
    try:
        tools = version("grpcio-tools")
    except PackageNotFoundError:
        tools = "unknown"
    return Path(os.environ.get(STUBS_ENV) or cache_dir() / "csi" / "spec" / f"{SPEC_VERSION}-grpcio-tools-{tools}")


def proto_file() -> Path:
    explicit = os.environ.get(PROTO_ENV)
    if explicit:
        return Path(explicit)
    if not shutil.which("go"):
        raise SpecUnavailable(f"csi.proto: set ${PROTO_ENV}, or install Go to fetch {SPEC_MODULE}@{SPEC_VERSION}")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "local")}
    with tempfile.TemporaryDirectory() as work:
        # Outside any module, `go mod download` of an explicit module@version just fills the module cache.
        out = subprocess.run(["go", "mod", "download", "-json", f"{SPEC_MODULE}@{SPEC_VERSION}"], cwd=work, env=env,
                             capture_output=True, text=True)
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise SpecUnavailable(f"{SPEC_MODULE}@{SPEC_VERSION}: {info.get('Error') or out.stderr.strip()}")
    return Path(info["Dir"]) / "csi.proto"


def generate(target: Path) -> None:
    proto = proto_file()
    if not proto.is_file():
        raise SpecUnavailable(f"{proto} does not exist")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=target.parent))
    try:
        shutil.copy(proto, tmp / "csi.proto")
        proc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"--python_out={tmp}",
                               f"--grpc_python_out={tmp}", str(tmp / "csi.proto")], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SpecUnavailable(f"protoc failed on {proto}: {proc.stderr.strip()}")
        try:
            tmp.rename(target)  # atomic: a half-written set is never imported
        except OSError:
            if not (target / "csi_pb2_grpc.py").is_file():  # lost a race with another process: theirs is whole
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load() -> tuple[ModuleType, ModuleType]:
    """(csi_pb2, csi_pb2_grpc), generating them first if this machine has none yet."""
    target = stubs_dir()
    if not (target / "csi_pb2_grpc.py").is_file():
        generate(target)
    if str(target) not in sys.path:
        sys.path.insert(0, str(target))
    return importlib.import_module("csi_pb2"), importlib.import_module("csi_pb2_grpc")


def main() -> int:
    """`python -m machine_controller.storage.csi.spec`: generate the stubs now (an image build step) and say where."""
    load()
    print(stubs_dir())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
