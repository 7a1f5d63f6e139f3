"""Every number a flag takes is range-checked where it enters (issue 17, item 6): a bad value stops the process at
start-up with exit code 2 and one line naming the flag, never a traceback, a busy loop or a silent hang (a negative
resync period spun a core; 0 engine connections hung every Machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from machine_controller.config import from_mao_args, parse
from machine_controller.storage import app as provisioner_app
from machine_controller.storage.csi import server as csi_server


def _refused(parse_fn, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        parse_fn(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("argv, flag, why", [
    (["--workers=0"], "--workers", "at least 1"),
    (["--workers=-3"], "--workers", "at least 1"),
    (["--workers=many"], "--workers", "not an integer"),
    (["--workers=2.5"], "--workers", "not an integer"),
    (["--workers=100000"], "--workers", "at most"),
    (["--resync-period=-1"], "--resync-period", "at least"),
    (["--resync-period=0"], "--resync-period", "at least"),
    (["--resync-period=nan"], "--resync-period", "not a finite number"),
    (["--resync-period=inf"], "--resync-period", "not a finite number"),
    (["--ovirt-connections=0"], "--ovirt-connections", "at least 1"),
    (["--max-concurrent-power-cycles=0"], "--max-concurrent-power-cycles", "at least 1"),
    (["--backoff-base=0"], "--backoff-base", "at least"),
    (["--backoff-cap=-1"], "--backoff-cap", "at least"),
    (["--backoff-base=10", "--backoff-cap=5"], "--backoff-cap", "--backoff-base"),
    (["--leader-elect-lease-duration=0"], "--leader-elect-lease-duration", "at least"),
    (["--leader-elect-retry-period=-2"], "--leader-elect-retry-period", "at least"),
    (["--leader-elect-lease-duration=10", "--leader-elect-renew-deadline=20"], "--leader-elect-renew-deadline",
     "--leader-elect-lease-duration"),
    (["--leader-elect-renew-deadline=5", "--leader-elect-retry-period=5"], "--leader-elect-retry-period",
     "--leader-elect-renew-deadline"),
    (["--health-port=70000"], "--health-port", "at most 65535"),
    (["--metrics-port=-1"], "--metrics-port", "at least 0"),
])
def test_a_bad_number_stops_the_controller_with_one_line_naming_the_flag(argv, flag, why, capsys):
    line = _refused(parse, argv, capsys)
    assert flag in line and why in line, line
    assert line.startswith("ovirt-machine-controller: error:"), line


def test_the_bounds_themselves_are_accepted():
    config = parse(["--workers=1", "--ovirt-connections=1", "--max-concurrent-power-cycles=1", "--resync-period=1",
                    "--health-port=0", "--metrics-port=65535", "--backoff-base=5", "--backoff-cap=5"])
    assert (config.workers, config.ovirt_connections, config.resync_s, config.health_port) == (1, 1, 1.0, 0)
    assert parse([]).resync_s == 600.0  # the defaults are inside the bounds


def test_maos_durations_are_checked_like_ours(capsys):
    line = _refused(parse, from_mao_args(["--leader-elect-lease-duration=0s"]), capsys)
    assert "--leader-elect-lease-duration" in line and "at least" in line, line


@pytest.mark.parametrize("argv, flag", [
    (["--workers=0"], "--workers"),
    (["--metrics-port=65536"], "--metrics-port"),
    (["--health-port=x"], "--health-port"),
])
def test_the_provisioners_numbers_are_checked(argv, flag, capsys):
    line = _refused(provisioner_app.parse, argv, capsys)
    assert flag in line, line


@pytest.mark.parametrize("argv, flag", [
    (["--workers=0"], "--workers"),
    (["--device-wait=-1"], "--device-wait"),
    (["--device-wait=nan"], "--device-wait"),
])
def test_the_csi_drivers_numbers_are_checked(argv, flag, capsys):
    line = _refused(csi_server.parse, argv, capsys)
    assert flag in line, line


@pytest.mark.parametrize("module, argv, flag", [
    ("machine_controller", ["--resync-period=-5"], "--resync-period"),
    ("machine_controller", ["--ovirt-connections=0"], "--ovirt-connections"),
    ("machine_controller", ["--leader-elect-lease-duration=1", "--leader-elect-renew-deadline=5"],
     "--leader-elect-renew-deadline"),
    ("machine_controller.storage.app", ["--workers=-1"], "--workers"),
])
def test_the_process_exits_2_with_one_line_and_no_traceback(module, argv, flag):
    run = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "KUBECONFIG": "/nonexistent"})
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], run.stderr
