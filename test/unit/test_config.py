"""--controllers selects what the process runs, in kube-controller-manager's style; bad names stop it at start-up."""

from __future__ import annotations

import pytest

from machine_controller.config import CONTROLLER_NAMES, parse, select_controllers


def test_default_runs_every_controller():
    assert parse([]).controllers == CONTROLLER_NAMES


@pytest.mark.parametrize("spec, expected", [
    ("*", CONTROLLER_NAMES),
    ("machine,ovirt-nodes,remediation", ("machine", "remediation", "ovirt-nodes")),
    ("*,-machineset,-nodelink,-machinehealthcheck", ("machine", "remediation", "ovirt-nodes")),
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
