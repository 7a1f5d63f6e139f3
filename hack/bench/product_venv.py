"""A virtualenv with the product's dependencies only, as the image installs them (Dockerfile: `pip install -c
constraints.txt .`), for the benchmark's controller process: its memory is the product's, not the development
virtualenv's (import-linter brings `rich`, which structlog imports when it finds it: 3.7 MiB of the controller's
peak at N=1000 that the image does not have). The controller still runs from this source tree (`python -m` puts the
working directory first); only its dependencies come from here. Made once per pyproject.toml and constraints.txt,
under the cache directory, from the same package index `make venv` uses."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tomllib
from pathlib import Path

from machine_controller.runtime.cache_dir import cache_dir

REPO = Path(__file__).resolve().parents[2]


def dependencies() -> list[str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


def product_python() -> Path:
    """The Python of the product's virtualenv, made if it is not there yet."""
    inputs = (REPO / "pyproject.toml").read_bytes() + (REPO / "constraints.txt").read_bytes()
    venv = cache_dir() / "bench-product-venv" / hashlib.sha256(inputs).hexdigest()[:12]
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    print(f"making the product's virtualenv for the controller in {venv}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"),
                    *dependencies()], check=True)
    (venv / ".complete").touch()
    return python


if __name__ == "__main__":
    print(product_python())
