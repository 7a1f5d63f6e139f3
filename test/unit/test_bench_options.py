"""hack/bench/options.py: the benchmark's command line refuses every number out of range, and any front end it does not
know, with one line naming the flag, before a control plane is started."""

from __future__ import annotations

import pytest

from hack.bench.options import CAPI, MAPI, MAX_MACHINES, parse


def test_the_machine_api_alone_is_the_default_so_existing_commands_keep_working():
    opts = parse([])
    assert opts.api == (MAPI,)
    assert opts.n == (10, 100)
    assert opts.machineset == 100


@pytest.mark.parametrize("text, apis", [
    ("mapi", (MAPI,)), ("capi", (CAPI,)), ("both", (MAPI, CAPI)), ("mapi,capi", (MAPI, CAPI)),
    ("capi,mapi", (MAPI, CAPI)), ("capi, capi", (CAPI,)),
])
def test_api_names_the_front_ends_in_the_order_they_run(text, apis):
    assert parse(["--api", text]).api == apis


@pytest.mark.parametrize("argv, message", [
    (["--api", "openshift"], "argument --api: 'openshift' is no front end: give mapi, capi, both or mapi,capi"),
    (["--api", ""], "argument --api: '' is no front end"),
    (["--n", "0"], "argument --n: N='0': must be at least 1, got 0"),
    (["--n", f"10,{MAX_MACHINES + 1}"], f"argument --n: N='{MAX_MACHINES + 1}': must be at most {MAX_MACHINES}"),
    (["--n", "10,x"], "argument --n: N='x': 'x' is not an integer"),
    (["--n", "100,10,100"], "argument --n: N=100 is given twice"),
    (["--workers", "0"], "argument --workers: must be at least 1, got 0"),
    (["--machineset", "-1"], "argument --machineset: must be at least 0, got -1"),
    (["--steady", "0"], "argument --steady: must be at least 1, got 0"),
    (["--resync", "0.5"], "argument --resync: must be at least 1, got 0.5"),
    (["--heartbeat", "nan"], "argument --heartbeat: must be a finite number, got nan"),
    (["--heartbeat", "7200"], "argument --heartbeat: must be at most 3600, got 7200"),
    (["--ovirt-connections", "0"], "argument --ovirt-connections: must be at least 1, got 0"),
    (["--floor-workers", "0"], "argument --floor-workers: must be at least 1, got 0"),
    (["--floor-runs", "0"], "argument --floor-runs: must be at least 1, got 0"),
])
def test_a_bad_value_is_refused_with_one_line_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1  # no usage dump burying it


def test_numbers_in_range_are_taken():
    opts = parse(["--api", "both", "--n", "100,1000", "--workers", "16", "--machineset", "0", "--heartbeat", "300",
                  "--floor-runs", "1"])
    assert (opts.n, opts.workers, opts.machineset, opts.heartbeat, opts.floor_runs) == ((100, 1000), 16, 0, 300.0, 1)
