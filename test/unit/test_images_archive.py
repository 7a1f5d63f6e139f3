"""Docker archives written by hack/images/docker_archive.py, and the pause image's: the layout `ctr images import` reads
(manifest, config named by its digest, layer named by its diff_id), the files and how the image runs, and the
same archive byte for byte from the same program."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from hack.controlplane.nodes import PAUSE_IMAGE
from hack.images import docker_archive as archive
from hack.images import pause

REPO = Path(__file__).resolve().parents[2]


def _read(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_the_pause_image_archive_layout(tmp_path: Path):
    path = tmp_path / "pause.tar"
    archive.write(pause.image(b"\x7fELF-program"), path)
    members = _read(path)

    [manifest] = json.loads(members["manifest.json"])
    assert manifest["RepoTags"] == [PAUSE_IMAGE] == ["registry.k8s.io/pause:3.10.1"]
    config_bytes = members[manifest["Config"]]
    assert manifest["Config"] == hashlib.sha256(config_bytes).hexdigest() + ".json"
    [layer_name] = manifest["Layers"]
    layer = members[layer_name]
    assert layer_name == f"{hashlib.sha256(layer).hexdigest()}/layer.tar"

    config = json.loads(config_bytes)
    assert config["rootfs"] == {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]}
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert config["config"]["User"] == "65535:65535"

    (tmp_path / "layer.tar").write_bytes(layer)
    with tarfile.open(tmp_path / "layer.tar") as tar:
        [program] = tar.getmembers()
        assert (program.name, program.mode, program.uid, program.gid) == ("pause", 0o755, 0, 0)
        assert tar.extractfile(program).read() == b"\x7fELF-program"  # type: ignore[union-attr]


def test_files_in_directories_get_their_parents(tmp_path: Path):
    image = archive.ScratchImage(tag="example.org/tool:v1", entrypoint=("/bin/tool",),
                                 files=(archive.File("/bin/tool", b"x"), archive.File("/etc/tool/conf", b"y", 0o644)))
    archive.write(image, tmp_path / "a.tar")
    members = _read(tmp_path / "a.tar")
    [manifest] = json.loads(members["manifest.json"])
    (tmp_path / "layer.tar").write_bytes(members[manifest["Layers"][0]])
    with tarfile.open(tmp_path / "layer.tar") as tar:
        assert [(m.name, m.isdir()) for m in tar.getmembers()] == [
            ("bin", True), ("etc", True), ("etc/tool", True), ("bin/tool", False), ("etc/tool/conf", False)]


def test_the_same_program_gives_the_same_archive(tmp_path: Path):
    archive.write(pause.image(b"program"), tmp_path / "a.tar")
    archive.write(pause.image(b"program"), tmp_path / "b.tar")
    archive.write(pause.image(b"other"), tmp_path / "c.tar")
    a, b, c = ((tmp_path / n).read_bytes() for n in ("a.tar", "b.tar", "c.tar"))
    assert a == b != c
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar", "b.tar", "c.tar"]  # no partial file left


def test_pause_archives_are_cached_by_their_key(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OMC_CACHE_DIR", str(tmp_path))
    first = pause.ensure()
    assert first.name == f"pause-{pause.key()[:24]}.tar"
    stamp = first.stat().st_mtime_ns
    assert pause.ensure() == first and first.stat().st_mtime_ns == stamp  # a hit builds nothing
    stale = first.with_name("pause-" + "0" * 24 + ".tar")
    stale.write_bytes(b"")
    monkeypatch.setattr(pause, "key", lambda: "f" * 64)
    second = pause.ensure()
    assert second != first and second.is_file()
    assert not first.exists() and not stale.exists()  # older archives of the image go


def test_the_images_are_tagged_as_the_manifests_name_them():
    """A node finds an image by the name a pod gives: each tag built here is one config/ names."""
    from hack.images import go_programs, product

    named = {line.split("image:", 1)[1].strip() for manifest in (REPO / "config").rglob("*.yaml")
             for line in manifest.read_text().splitlines() if line.strip().startswith("image:")}
    assert product.TAG in named
    for image in go_programs.IMAGES:
        assert image.tag in named, image.tag


def test_a_failed_build_step_quotes_the_end_of_its_log(tmp_path: Path):
    from hack.images.buildah import run_logged

    log = tmp_path / "x.build.log"
    run_logged(["sh", "-c", "echo fine"], log)
    with pytest.raises(RuntimeError) as err:
        run_logged(["sh", "-c", "for i in $(seq 1 100); do echo line $i; done; exit 3"], log)
    message = str(err.value)
    assert "exit 3" in message and str(log) in message
    assert "line 100" in message and "line 1\n" not in message  # the end, not all of it
    assert "fine" in log.read_text()  # appended, not replaced
