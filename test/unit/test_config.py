"""--controllers selects what the process runs, in kube-controller-manager's style; bad names stop it at start-up."""

from __future__ import annotations

import pytest

from machine_controller.config import CAPI_CONTROLLER_NAMES, CONTROLLER_NAMES, parse, select_controllers

MACHINE_API = tuple(n for n in CONTROLLER_NAMES if n not in CAPI_CONTROLLER_NAMES)


def test_default_runs_every_machine_api_controller_and_no_cluster_api_one():
    # A Machine API deployment installs no Cluster API CRD: `*` must start no informer of those kinds.
    assert parse([]).controllers == MACHINE_API
    assert not set(MACHINE_API) & {"ovirtcluster", "ovirtmachine"}


@pytest.mark.parametrize("spec, expected", [
    ("*", MACHINE_API),
    ("ovirtcluster,ovirtmachine", ("ovirtcluster", "ovirtmachine")),
    ("*,ovirtmachine,ovirtcluster", (*MACHINE_API, "ovirtcluster", "ovirtmachine")),
    ("machine,machineset-capacity,ovirt-nodes,remediation",
     ("machine", "machineset-capacity", "remediation", "ovirt-nodes")),
    ("*,-machineset,-nodelink,-machinehealthcheck", ("machine", "machineset-capacity", "remediation", "ovirt-nodes")),
    ("*,-machineset-capacity", ("machine", "machineset", "nodelink", "machinehealthcheck", "remediation",
                                "ovirt-nodes")),
    (" machine , machine ", ("machine",)),
])
def test_selection(spec, expected):
    assert select_controllers(spec) == expected


@pytest.mark.parametrize("spec, message", [
    ("machine,machinesets", "unknown controller 'machinesets'"),
    ("-bogus", "unknown controller 'bogus'"),
    ("*,-" + ",-".join(CONTROLLER_NAMES), "no controller selected"),
    ("", "no controller selected"),
])
def test_bad_selection_is_a_clear_error(spec, message):
    with pytest.raises(ValueError, match=message):
        select_controllers(spec)


def test_unknown_name_stops_the_process_at_start_up(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(["--controllers=machine,nodelinks"])
    assert exit_.value.code == 2
    assert "unknown controller 'nodelinks'" in capsys.readouterr().err


def test_help_lists_every_controller_name():
    from machine_controller.config import build_parser

    help_text = " ".join(build_parser().format_help().split())  # argparse wraps lines at any space
    for name in CONTROLLER_NAMES:
        assert f" {name}," in help_text or f" {name} (default" in help_text, name


@pytest.mark.parametrize("args, message", [
    (["--metrics-secure"], "--metrics-secure needs --metrics-cert-dir"),
    (["--metrics-secure", "--metrics-cert-dir=/nonexistent"], "lacks tls.crt and tls.key"),
    (["--metrics-secure", "--metrics-cert-dir={dir}", "--metrics-port=9440"], "other than --health-port"),
])
def test_protected_metrics_misconfigured_stop_the_process_at_start_up(args, message, tmp_path, capsys):
    (tmp_path / "tls.crt").write_text("x")
    (tmp_path / "tls.key").write_text("x")
    with pytest.raises(SystemExit) as exit_:
        parse([a.format(dir=tmp_path) for a in args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


# The args machine-api-operator gives its `machine-controller` container
# (docs/compatibility.md#deployment-on-openshift).
MAO_ARGS = ["--logtostderr=true", "--v=3", "--leader-elect=true", "--leader-elect-lease-duration=120s",
            "--namespace=openshift-machine-api", "--feature-gates=MachineAPIMigration=false,Foo=true"]


def test_maos_flags_run_the_actuator_side_with_maos_settings():
    from machine_controller.config import from_mao_args

    config = parse(from_mao_args(MAO_ARGS))
    # The capacity annotations too: MAO's MachineSet controller does not write them (docs/compatibility.md#autoscaler).
    assert config.controllers == ("machine", "machineset-capacity", "remediation", "ovirt-nodes")
    assert (config.leader_elect, config.lease_duration_s, config.namespace) == (True, 120.0, "openshift-machine-api")
    assert config.log_level == "info"
    assert parse(from_mao_args(["--v=4", "--leader-elect=false", "--leader-elect-renew-deadline=1m30s"])) \
        .renew_deadline_s == 90.0


def test_maos_namespace_holds_the_lease_and_the_credentials():
    """MAO renders its controllers in its own namespace (its pod's) and names it with --namespace: the provider's
    Lease and credentials are there, as the Go provider's Lease is in its pod's namespace
    (docs/compatibility.md#the-operator-itself-not-run-here-the-module-proxy-refuses-the-release-that-knows-ovirt)."""
    from machine_controller.config import from_mao_args

    config = parse(from_mao_args([*MAO_ARGS[:4], "--namespace=mao-elsewhere"]))
    assert (config.namespace, config.leader_election_namespace, config.credentials_namespace) == \
        ("mao-elsewhere",) * 3
    assert parse(from_mao_args(MAO_ARGS)).credentials_namespace == "openshift-machine-api"


def test_started_as_maos_command_the_image_takes_maos_flags(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from machine_controller.config import MAO_COMMAND

    link = tmp_path / MAO_COMMAND  # the image links its entry point to the Go provider's command (Dockerfile)
    link.symlink_to(Path(sys.executable).parent / "ovirt-machine-controller")
    run = subprocess.run([str(link), *MAO_ARGS, "--no-such-flag"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in run.stderr, run.stderr  # MAO's own flags all understood
