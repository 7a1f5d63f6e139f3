"""The benchmark runs the controller with the image's malloc settings, so its peak RSS is the image's."""

import re
import shlex
from pathlib import Path

from hack.bench.machines import IMAGE_MALLOC

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_sets_the_malloc_variables_the_image_sets():
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(item.split("=", 1) for item in shlex.split(line[4:]) if "=" in item)
    image_malloc = {k: v for k, v in env.items() if re.match(r"MALLOC_", k)}
    assert image_malloc and image_malloc == IMAGE_MALLOC
