"""Build the Java SDK client of the simulator (`hack/javaclient`) with Maven, cached outside the repository.

Maven's local repository is `<cache>/m2` (the cache of hack/controlplane/build.py, `$OMC_CACHE_DIR`), so only the
first build on a machine downloads the SDK and the plugins. The compiled classes and the dependency classpath land
in `<cache>/javaclient/<hash of pom and sources>/`; a later run with the same sources does not start Maven at all,
and running the client costs one JVM start.

    python -m hack.javaclient.build        # prints the java command prefix (classpath and main class)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hack.controlplane.build import cache_dir

PROJECT = Path(__file__).resolve().parent
MAIN_CLASS = "javaclient.SimulatorStory"
# A client that lives seconds: the C1 compiler only and the serial collector, so no optimising compiler or GC
# threads compete with the simulator and the tests for the machine's two cores.
# The SDK's complaints about what it read go to stderr, one line each (slf4j-simple).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=false")


def _sources() -> list[Path]:
    return [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*.java"))]


def _digest() -> str:
    h = hashlib.sha256()
    for path in _sources():
        h.update(str(path.relative_to(PROJECT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def maven_repository() -> Path:
    return cache_dir() / "m2"


def output_dir() -> Path:
    return cache_dir() / "javaclient" / _digest()


def build() -> list[str]:
    """The `java` command prefix that runs the client (`[java, -cp, ..., main class]`), building it if needed."""
    out = output_dir()
    classpath_file = out / "classpath.txt"
    if not classpath_file.exists():
        _maven(out)
    classpath = os.pathsep.join([str(out / "classes"), classpath_file.read_text().strip()])
    return [_tool("java"), *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found: hack/install-system-deps.sh installs a JDK and Maven")
    return path


def _maven(out: Path) -> None:
    staging = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    started = time.monotonic()
    cmd = [_tool("mvn"), "-B", "-q", "-f", str(PROJECT / "pom.xml"), f"-Dmaven.repo.local={maven_repository()}",
           f"-DbuildDir={staging}", "compile", "dependency:build-classpath",
           f"-Dmdep.outputFile={staging / 'classpath.txt'}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"maven build of {PROJECT} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    # Atomic publish: a concurrent or killed build never leaves a half-built directory behind the hash.
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(out)
    except OSError:  # another build won the race; its output is the same
        shutil.rmtree(staging, ignore_errors=True)
    print(f"[javaclient] built in {time.monotonic() - started:.1f}s into {out}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    print(" ".join(build()))
