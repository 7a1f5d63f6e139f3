"""Build one command of a Go module at a pinned release, cached outside the repository: the test tools that are not
part of Kubernetes (csi_tools.py, promtool.py).

Each tool gets its own wrapper module, as the Kubernetes binaries do in build.py: it requires the tool's module at the
pinned version and carries the tool's own `replace` lines, read from the go.mod the proxy publishes (a dependency's
replaces are not inherited, and the CSI sidecars pin their k8s.io modules through them). The binaries land in
$OMC_CACHE_DIR/<group>/<tool>/<version>/, written atomically, so a machine builds them once.
"""

from __future__ import annotations

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
    group: str = "csi"  # the cache folder it lands in, beside its kind
    tags: tuple[str, ...] = ()  # Go build tags

    @property
    def root(self) -> Path:
        return cache_dir() / self.group / self.name / self.version

    @property
    def path(self) -> Path:
        return self.root / "bin" / self.name


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
    tags = ["-tags", ",".join(tool.tags)] if tool.tags else []
    run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", *tags, "-o", str(partial),
            f"{tool.module}/{tool.package}"], work)
    tool.path.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(tool.path)  # atomic: a half-built binary is never taken for a whole one
    log(f"built {tool.name} in {time.monotonic() - start:.0f}s")
    return tool.path
