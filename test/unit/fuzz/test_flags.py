"""Every command-line flag of every tool (machine_controller/config.py; the provisioner's and the CSI driver's
`parse`; machine-api-operator's flags through `from_mao_args`): any argument list is accepted or stops the process
with exit code 2 and one line on stderr naming what is wrong, never a traceback (the parsers are driven directly,
SystemExit caught). The flags are read from each tool's own --help, so a new flag is fuzzed too."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from machine_controller import config
from machine_controller.storage import app as provisioner_app
from machine_controller.storage.csi import server as csi_server

from .strategies import texts

TOOLS = {
    "ovirt-machine-controller": config.parse,
    "ovirt-volume-provisioner": provisioner_app.parse,
    "ovirt-csi-driver": csi_server.parse,
    "ovirt-machine-controller (as machine-controller-manager)": lambda argv: config.parse(config.from_mao_args(argv)),
}
# The flags machine-api-operator passes its provider container (config.from_mao_args).
_MAO_FLAGS = ["--v", "-v", "--logtostderr", "--alsologtostderr", "--feature-gates", "--leader-elect",
              "--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period",
              "--namespace"]


def _flags(parse) -> list[str]:
    """The long options a parser's --help lists, --help itself and its prefixes left out (they print and exit 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parse(["--help"])
    return sorted({f for f in re.findall(r"--[a-z][a-z0-9-]*", out.getvalue()) if f != "--help"})


# Values of every kind a flag is given: numbers at and past the bounds, non-finite ones, other digits, durations,
# paths, lists, and any text.
_values = st.one_of(
    st.sampled_from(["0", "1", "-1", "8", "65535", "65536", "1e400", "nan", "inf", "-inf", "1_000", " 5 ", "0x10",
                     "2.5", "", "true", "false", "120s", "1m30s", "1h", "machine", "*,-machine", "-", "--",
                     "unix:///csi/csi.sock", "tcp://:0", "/abs/path", "rel/path", "controller,node", "node", "debug"]),
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=3),
    texts,
)


@st.composite
def _argv(draw, flags: list[str]) -> list[str]:
    argv = []
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(flags) | st.sampled_from(flags).map(lambda f: "--no-" + f[2:]) | texts)
        if flag.startswith("-h") or flag.startswith("--he") and "--help".startswith(flag):
            continue  # help: prints and exits 0, not an argument error
        form = draw(st.integers(0, 2))
        argv += [flag] if form == 0 else [f"{flag}={draw(_values)}"] if form == 1 else [flag, draw(_values)]
    return argv


def _outcome(parse, argv: list[str]) -> tuple[int, str, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            parse(argv)
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("tool", sorted(TOOLS))
@given(data=st.data())
def test_any_arguments_are_accepted_or_refused_in_one_line_with_code_2(tool, data):
    parse = TOOLS[tool]
    mao = "machine-controller-manager" in tool
    # MAO's own flags are translated first: half the time only those, or the few would hardly ever be drawn.
    flags = _MAO_FLAGS if mao and data.draw(st.booleans()) else _flags(parse) + (_MAO_FLAGS if mao else [])
    argv = data.draw(_argv(flags), label="argv")
    code, out, err = _outcome(parse, argv)
    assert not out, out
    if code == 0:
        assert not err, err
        return
    assert code == 2, (code, err)
    _one_line(err, tool.split(" ")[0])


def _one_line(err: str, prog: str) -> None:
    """One line of a log or a terminal: a single newline, at the end, and no carriage return."""
    assert err.endswith("\n") and "\n" not in err[:-1] and "\r" not in err, err
    assert err.startswith(prog + ": error: "), err
    # It names the flag, or the argument that is none.
    assert "--" in err or "unrecognized arguments: " in err or "ambiguous option: " in err, err


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("argv", [["\n"], ["--workers=1\r"], ["--log-level", "x\ny"]])
def test_an_argument_with_a_line_break_is_refused_in_one_line(tool, argv):
    # Found by test_any_arguments_are_accepted_or_refused_in_one_line_with_code_2 (argv ['\n'], ['\r']): argparse echoes
    # the argument as it is, so its line break split the error in two lines.
    code, out, err = _outcome(TOOLS[tool], argv)
    assert code == 2
    _one_line(err, tool.split(" ")[0])


def test_a_verbosity_in_superscript_digits_is_refused_in_one_line():
    # Not found by the property (too rare a draw) but by reading from_mao_args: "²".isdigit() is true and int("²")
    # raises, so `--v=²` was a traceback.
    code, out, err = _outcome(TOOLS["ovirt-machine-controller (as machine-controller-manager)"], ["--v=²"])
    assert code == 2
    _one_line(err, "ovirt-machine-controller")
