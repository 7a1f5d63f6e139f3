"""Build the CSI test tools from their Go modules at pinned releases, cached outside the repository: csi-sanity
(the CSI conformance suite) and the external-provisioner and external-attacher sidecars, so the tests can run the
real Kubernetes side of CSI against ovirt-csi-driver (docs/storage.md#csi-driver).

Each tool gets its own wrapper module, as the Kubernetes binaries do in build.py: it requires the tool's module at the
pinned version and carries the tool's own `replace` lines, read from the go.mod the proxy publishes (a dependency's
replaces are not inherited, and the sidecars pin their k8s.io modules through them). The binaries land in
$OMC_CACHE_DIR/csi/<tool>/<version>/, written atomically, so a machine builds them once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir, go_env, log, run_go


@dataclass(frozen=True)
class GoTool:
    """One command of one Go module at a pinned version."""

    name: str
    module: str
    version: str
    package: str  # the command's package path inside the module

    @property
    def root(self) -> Path:
        return cache_dir() / "csi" / self.name / self.version

    @property
    def path(self) -> Path:
        return self.root / "bin" / self.name


# The versions the module proxy listed on 2026-11-23 (the newest of each major).
CSI_SANITY = GoTool("csi-sanity", "github.com/kubernetes-csi/csi-test/v5", "v5.6.0", "cmd/csi-sanity")
CSI_PROVISIONER = GoTool("csi-provisioner", "github.com/kubernetes-csi/external-provisioner/v6", "v6.4.0",
                         "cmd/csi-provisioner")
CSI_ATTACHER = GoTool("csi-attacher", "github.com/kubernetes-csi/external-attacher/v4", "v4.13.0",
                      "cmd/csi-attacher")
TOOLS = (CSI_SANITY, CSI_PROVISIONER, CSI_ATTACHER)

_REPLACE_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+(v\S+))?\s+=>\s+(\S+)\s+(v\S+)\s*$")


def published_replaces(module: str, version: str, cwd: Path) -> list[str]:
    """The module's own `replace` lines (module-version targets only), from its go.mod in Go's module cache."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=cwd, env=go_env(),
                         capture_output=True, text=True)
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "GoMod" not in info:
        raise RuntimeError(f"the module proxy did not serve {module}@{version}: {info.get('Error') or out.stderr}")
    lines = []
    in_block = False
    for raw in Path(info["GoMod"]).read_text().splitlines():
        line = raw.split("//")[0].strip()
        if line.startswith("replace ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        if not (in_block or line.startswith("replace ")):
            continue
        m = _REPLACE_LINE.match(line)
        if m is None:
            # A filesystem replace (`=> ./x`) only serves the tool's own repository checkout: nothing to carry.
            continue
        old, old_version, new, new_version = m.groups()
        lines.append(f"\t{old}{' ' + old_version if old_version else ''} => {new} {new_version}")
    return lines


def build_tool(tool: GoTool) -> Path:
    if os.access(tool.path, os.X_OK):
        return tool.path
    if not shutil.which("go"):
        raise RuntimeError(f"Go is needed to build {tool.name}, and `go` is not on PATH")
    start = time.monotonic()
    log(f"building {tool.name} ({tool.module} {tool.version}) into {tool.root}")
    work = tool.root / "src"
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(f"module omc.local/{tool.name}build\n\ngo 1.25.0\n")
    replaces = "\n".join(published_replaces(tool.module, tool.version, work))
    (work / "go.mod").write_text(
        f"module omc.local/{tool.name}build\n\ngo 1.25.0\n\nrequire {tool.module} {tool.version}\n"
        + (f"\nreplace (\n{replaces}\n)\n" if replaces else "")
    )
    partial = tool.root / f"{tool.name}.partial"
    run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), f"{tool.module}/{tool.package}"],
           work)
    tool.path.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(tool.path)  # atomic: a half-built binary is never taken for a whole one
    log(f"built {tool.name} in {time.monotonic() - start:.0f}s")
    return tool.path


def ensure_tools(tools: tuple[GoTool, ...] = TOOLS) -> dict[str, Path]:
    return {t.name: build_tool(t) for t in tools}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.csi_tools", description=__doc__.splitlines()[0])
    parser.add_argument("tools", nargs="*", help=f"which of {', '.join(t.name for t in TOOLS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.tools) - {t.name for t in TOOLS}
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    chosen = tuple(t for t in TOOLS if not args.tools or t.name in args.tools)
    for path in ensure_tools(chosen).values():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
