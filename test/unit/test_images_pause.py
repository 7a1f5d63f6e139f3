"""The project's own pause program (hack/images/pause.c), compiled as the image builds it: it prints its version,
waits until SIGTERM or SIGINT and exits 0, and as PID 1 of a PID namespace reaps the orphans it inherits."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hack.images import pause


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pause") / "pause"
    pause.compile_pause(out)
    return out


def test_it_prints_its_version(program: Path):
    r = subprocess.run([program, "-v"], capture_output=True, text=True, timeout=10)
    assert (r.returncode, r.stdout) == (0, "omc-pause 3.10.1\n")


def test_unknown_arguments_are_refused(program: Path):
    r = subprocess.run([program, "--forever"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "usage" in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_it_waits_until_told_to_stop(program: Path, sig: signal.Signals):
    proc = subprocess.Popen([program])
    time.sleep(0.3)
    assert proc.poll() is None
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == 0


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"),
                    reason="a PID namespace needs root and util-linux's unshare and nsenter")
def test_as_pid_1_it_reaps_the_orphans_it_inherits(program: Path):
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(program)])
    try:
        deadline = time.monotonic() + 10
        while not _children(outer.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        [init] = _children(outer.pid)
        # sh starts a short sleep and exits at once: the sleep is orphaned, and the namespace's PID 1 inherits it.
        subprocess.run(["nsenter", f"--target={init}", "--pid", "--", "sh", "-c", "sleep 0.5 & exit 0"],
                       check=True, timeout=10)
        orphans = _children(init)
        assert len(orphans) == 1
        deadline = time.monotonic() + 10
        while _children(init):
            # A zombie that stays would be an orphan pause failed to reap.
            assert time.monotonic() < deadline, [_state(p) for p in _children(init)]
            time.sleep(0.05)
        assert _state(init) in "SR"
        os.kill(init, signal.SIGTERM)  # from outside its namespace too: unshare itself ignores SIGTERM
        assert outer.wait(timeout=10) == 0
    finally:
        outer.kill()
        outer.wait(timeout=10)
