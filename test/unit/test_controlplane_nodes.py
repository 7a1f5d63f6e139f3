"""The test bed's real nodes, the parts that need no kubelet: which binaries a cache lacks is all that is built
(kubelet joined a list whose other commands machines have cached for long), and a node's taints are checked."""

from __future__ import annotations

import pytest

from hack.controlplane import build
from hack.controlplane.nodes import _taint


def test_a_cache_without_the_node_programs_builds_them_alone(tmp_path, monkeypatch):
    """A cache made before the test bed had real nodes holds the control plane only: kubelet and kube-proxy are
    built, in one go build, and nothing else."""
    monkeypatch.setenv("OMC_CACHE_DIR", str(tmp_path))
    b = build.Binaries()
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd"):
        b.path(name).parent.mkdir(parents=True, exist_ok=True)
        b.path(name).write_text("#!/bin/sh\n")
        b.path(name).chmod(0o755)
    built: list[list[str]] = []
    monkeypatch.setattr(build, "build_kube", lambda _b, commands: built.append(commands))
    monkeypatch.setattr(build, "build_etcd", lambda _b: built.append(["etcd"]))
    monkeypatch.setattr(build.shutil, "which", lambda _name: "/usr/bin/go")

    assert b.missing() == ["kubelet", "kube-proxy"]
    build.ensure_binaries(b)
    assert built == [["kubelet", "kube-proxy"]]


def test_a_complete_cache_builds_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("OMC_CACHE_DIR", str(tmp_path))
    b = build.Binaries()
    for name in (*build.KUBE_COMMANDS, "etcd"):
        b.path(name).parent.mkdir(parents=True, exist_ok=True)
        b.path(name).write_text("#!/bin/sh\n")
        b.path(name).chmod(0o755)
    monkeypatch.setattr(build, "build_kube", lambda *_: pytest.fail("nothing is missing"))
    monkeypatch.setattr(build, "build_etcd", lambda *_: pytest.fail("nothing is missing"))
    build.ensure_binaries(b)


@pytest.mark.parametrize("spec,expected", [
    ("omc.test/real-node=true:NoSchedule", {"key": "omc.test/real-node", "value": "true", "effect": "NoSchedule"}),
    ("dedicated:NoExecute", {"key": "dedicated", "value": "", "effect": "NoExecute"}),
])
def test_taints_are_parsed(spec, expected):
    assert _taint(spec) == expected


@pytest.mark.parametrize("spec", ["key=value", "key=value:Sometimes", "=value:NoSchedule", ""])
def test_a_bad_taint_is_refused_with_its_text(spec):
    with pytest.raises(ValueError, match="taint") as err:
        _taint(spec)
    assert repr(spec) in str(err.value)
