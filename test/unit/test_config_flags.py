"""Every number a flag takes is range-checked where it enters: a bad value stops the process at
start-up with exit code 2 and one line naming the flag, never a traceback, a busy loop or a silent hang (a negative
resync period spun a core; 0 engine connections hung every Machine)."""

from __future__ import annotations

import os
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
    (["--resync-period=nan"], "--resync-period", "a finite number, got nan"),
    (["--resync-period=inf"], "--resync-period", "a finite number, got inf"),
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


@pytest.mark.parametrize("value", [" 5", "5 ", "5\r", "1_0", "\u0665", "0x10"])
def test_a_number_is_plain_digits_as_go_reads_them(value, capsys):
    """Python's int() takes spaces, underscores and other scripts' digits; Go's strconv, and so every other tool of
    the cluster, does not."""
    line = _refused(parse, [f"--workers={value}"], capsys)
    assert "--workers" in line and "is not an integer" in line, line


@pytest.mark.parametrize("value", ["1 ", "1_0.5", "\u0665"])
def test_a_decimal_is_plain_digits_too(value, capsys):
    line = _refused(parse, [f"--resync-period={value}"], capsys)
    assert "--resync-period" in line and "is not a number" in line, line


@pytest.mark.parametrize("parse_fn", [parse, csi_server.parse], ids=["controller", "csi-driver"])
def test_a_log_level_is_one_of_the_levels(parse_fn, capsys):
    """The CSI driver took any --log-level and died later on a traceback from the logging set-up."""
    line = _refused(parse_fn, ["--log-level=verbose"], capsys)
    assert "--log-level" in line and "debug" in line, line


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
    _exits_2_with_one_line_naming(module, argv, flag, env={})


def _exits_2_with_one_line_naming(module: str, argv: list[str], flag: str, env: dict[str, str]) -> str:
    run = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", **env})
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], run.stderr
    return lines[0]


# --- the kubeconfig -------------------------------------------------------------------------------------------
# Every tool that takes --kubeconfig; ovirt-flexvolume-driver and ovirt-csi-driver take none (the driver reads the
# API server from its configuration file, the CSI driver never calls it).
KUBECONFIG_TOOLS = [(parse, "ovirt-machine-controller"), (provisioner_app.parse, "ovirt-volume-provisioner")]


@pytest.mark.parametrize("parse_fn, prog", KUBECONFIG_TOOLS)
@pytest.mark.parametrize("problem", ["missing", "directory", "unreadable"])
def test_a_kubeconfig_that_cannot_be_read_stops_the_tool_with_one_line(parse_fn, prog, problem, tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    path = tmp_path / "kubeconfig"
    if problem == "directory":
        path.mkdir()
    elif problem == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        path.write_text("apiVersion: v1\n")
        path.chmod(0)
    line = _refused(parse_fn, [f"--kubeconfig={path}"], capsys)
    assert line.startswith(f"{prog}: error: argument --kubeconfig:") and str(path) in line, line


@pytest.mark.parametrize("parse_fn, prog", KUBECONFIG_TOOLS)
def test_a_missing_kubeconfig_from_the_environment_is_named_as_such(parse_fn, prog, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    line = _refused(parse_fn, [], capsys)
    assert "--kubeconfig" in line and "$KUBECONFIG" in line and str(tmp_path / "absent") in line, line


@pytest.mark.parametrize("parse_fn, prog", KUBECONFIG_TOOLS)
def test_a_kubeconfig_list_needs_one_file_that_exists(parse_fn, prog, tmp_path, capsys, monkeypatch):
    """KUBECONFIG may list files, as for kubectl; the client merges those that exist and skips the others."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    real = tmp_path / "real"
    real.write_text("apiVersion: v1\nkind: Config\n")
    listed = os.pathsep.join([str(tmp_path / "absent"), str(real)])
    args = parse_fn([f"--kubeconfig={listed}"])
    assert args.kubeconfig == listed
    line = _refused(parse_fn, [f"--kubeconfig={tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"], capsys)
    assert "--kubeconfig" in line and str(tmp_path / "a") in line and str(tmp_path / "b") in line, line


@pytest.mark.parametrize("module", ["machine_controller", "machine_controller.storage.app"])
def test_a_tool_started_with_a_missing_kubeconfig_exits_2_without_a_traceback(module, tmp_path):
    _exits_2_with_one_line_naming(module, [f"--kubeconfig={tmp_path / 'absent'}"], "--kubeconfig", env={})
    _exits_2_with_one_line_naming(module, [], "--kubeconfig", env={"KUBECONFIG": str(tmp_path / "absent")})
