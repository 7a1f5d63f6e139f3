"""ovirt-csi-driver's flags: a bad one is one line naming it and exit code 2, as every tool of the project answers
(machine_controller/config.py FlagParser), never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from machine_controller.storage.csi.server import parse

REPO = __import__("pathlib").Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("endpoint", ["foo", "http://localhost:10000", "unix://", "localhost:http", "localhost:70000",
                                      "tcp://", "localhost:0", "unix",
                                      # an address, but no directory to make the socket in
                                      "unix:///nonexistent/csi/csi.sock"])
def test_an_endpoint_that_is_no_address_is_one_line_and_exit_code_2(endpoint):
    proc = subprocess.run([sys.executable, "-m", "machine_controller.storage.csi.server", "--endpoint", endpoint,
                           "--services", "node", "--node-id", "123e4567-e89b-12d3-a456-426614174000"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--endpoint" in lines[0] and endpoint in lines[0], proc.stderr


@pytest.mark.parametrize("endpoint", ["unix:///csi/csi.sock", "unix:/tmp/x.sock", "localhost:10000",
                                      "tcp://0.0.0.0:10000", "[::]:10000", ":10000"])
def test_endpoints_that_are_addresses_are_taken(endpoint):
    assert parse(["--endpoint", endpoint]).endpoint == endpoint
