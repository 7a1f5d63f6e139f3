"""Build several commands of one Go module at a pinned release, with files the tests need from modules of the same
build (CRDs, webhook manifests), cached outside the repository: machine-api-operator's controllers (mao.py) and
Cluster API's core manager and clusterctl (capi.py).

The wrapper module requires the module (and any sibling module to be taken at the same release) and nothing else:
a dependency's `replace` lines never apply, which is what these modules need (their replaces serve only their own
repository checkout). The files are copied from Go's module cache, from the module directory the wrapper selects,
so the bed installs exactly what a release ships. Everything lands in $OMC_CACHE_DIR/<cache>/<version>/ (see
build.cache_dir): binaries in bin/, each file set in its own folder; each is put in place by a rename, so a
half-built set is never taken for a whole one and a machine builds it once (docs/architecture.md#the-test-bed).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir, go_env, log, run_go


@dataclass(frozen=True)
class CopiedFile:
    source: str  # a path or glob inside the module's directory
    into: str = ""  # the folder inside the file set it goes to
    name: str = ""  # the copy's name; empty: the source's own (a glob keeps every match's own)


@dataclass(frozen=True)
class FileSet:
    """Files copied from one module of the build into the folder `folder` of the bundle's cache root."""

    folder: str
    module: str
    files: tuple[CopiedFile, ...]


@dataclass(frozen=True)
class GoBundle:
    """Commands of one Go module at a pinned version, and the files that go with them."""

    title: str  # for messages: "Cluster API"
    cache: str  # the cache folder: capi
    module: str
    version: str
    commands: tuple[tuple[str, str], ...]  # (binary name, package path)
    go: str = "1.25.0"  # the wrapper's `go` line: at least what the module's go.mod says
    siblings: tuple[str, ...] = ()  # modules required at the same version
    file_sets: tuple[FileSet, ...] = ()

    @property
    def root(self) -> Path:
        return cache_dir() / self.cache / self.version

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    def path(self, command: str) -> Path:
        return self.bin_dir / command

    def folder(self, name: str) -> Path:
        return self.root / name

    def missing(self) -> list[str]:
        """The commands and file sets not built yet (a file set's folder exists only once it is whole)."""
        absent = [name for name, _ in self.commands if not self.path(name).is_file()]
        absent += [s.folder for s in self.file_sets if not self.folder(s.folder).is_dir()]
        return absent

    def ensure(self) -> GoBundle:
        missing = self.missing()
        if not missing:
            return self
        if not shutil.which("go"):
            raise RuntimeError(f"Go is needed to build {self.title}'s programs, and `go` is not on PATH")
        start = time.monotonic()
        log(f"building {', '.join(missing)} ({self.title} {self.version}) into {self.root}; the first build takes "
            "a few minutes, later runs reuse it")
        work = self._wrapper()
        if any(name in missing for name, _ in self.commands):
            self._build_commands(work)
        for file_set in self.file_sets:
            if file_set.folder in missing:
                self._copy(file_set, work)
        log(f"built in {time.monotonic() - start:.0f}s")
        return self

    def _wrapper(self) -> Path:
        work = self.root / "src"
        work.mkdir(parents=True, exist_ok=True)
        required = "".join(f"\t{m} {self.version}\n" for m in (self.module, *self.siblings))
        (work / "go.mod").write_text(f"module omc.local/{self.cache}build\n\ngo {self.go}\n\nrequire (\n{required})\n")
        return work

    def _build_commands(self, work: Path) -> None:
        # A directory of its own per build, so two builds at once (two checkouts on one machine) do not clobber
        # each other; one `go build` per command, since `-o dir` names a binary after its package's last element.
        partial = Path(tempfile.mkdtemp(dir=self.root, prefix="bin.partial-"))
        for name, package in self.commands:
            run_go(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial / name), package], work)
        _publish(partial, self.bin_dir)

    def _copy(self, file_set: FileSet, work: Path) -> None:
        source_dir = module_dir(work, file_set.module)
        partial = Path(tempfile.mkdtemp(dir=self.root, prefix=f"{file_set.folder}.partial-"))
        for f in file_set.files:
            sources = sorted(source_dir.glob(f.source))
            if not sources:
                raise RuntimeError(f"{file_set.module} has no {f.source}: the pinned release changed its layout")
            for source in sources:
                target = partial / f.into / (f.name or source.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
        _publish(partial, self.folder(file_set.folder))


def module_dir(work: Path, module: str) -> Path:
    """The module cache directory of `module` at the version the wrapper selects, downloaded if needed."""
    out = subprocess.run(["go", "mod", "download", "-json", module], cwd=work, env=go_env(), check=True,
                         capture_output=True, text=True).stdout
    return Path(json.loads(out)["Dir"])


def _publish(partial: Path, final: Path) -> None:
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)


def print_bundle(bundle: GoBundle, print_dir: bool) -> int:
    """The body of each bundle's `python -m`: build what is missing and print where everything is."""
    if print_dir:
        print(bundle.root)
        return 0
    bundle.ensure()
    for name, _ in bundle.commands:
        print(bundle.path(name))
    for file_set in bundle.file_sets:
        for path in sorted(p for p in bundle.folder(file_set.folder).rglob("*") if p.is_file()):
            print(path)
    return 0
