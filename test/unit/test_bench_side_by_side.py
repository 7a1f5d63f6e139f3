"""hack/bench/side_by_side.py: with --api both the benchmark prints each figure of the two front ends for the same N,
and Cluster API's as a multiple of the Machine API's."""

from __future__ import annotations

from hack.bench.options import CAPI, MAPI
from hack.bench.side_by_side import engine_writes, table


def _row(api: str, n: int, create_s: float, cpu_ms: float, others: dict | None = None) -> dict:
    return {"api": api, "n": n, "create_s": create_s, "ratio": create_s / 10.0, "create_req_per_machine": 8.0,
            "create_by_endpoint": {"POST /vms": 1.0, "POST /vms/{vm}/start": 1.0, "GET /vms": 3.0},
            "create_writes": {"patch machines/status 200": 2.0, "create events 201": 1.0},
            "cpu_ms_per_machine": cpu_ms, "delete_s": 5.0, "delete_req_per_machine": 4.0,
            "delete_by_endpoint": {"DELETE /vms/{vm}": 1.0}, "delete_writes": {}, "delete_cpu_ms_per_machine": 0.0,
            "peak_rss_mib": 100.0, "others": others or {}}


def test_engine_writes_are_the_requests_that_change_the_engine_without_sign_ins():
    counts = {"POST /vms": 1.0, "PUT /disks/{disk}": 1.0, "DELETE /vms/{vm}": 1.0, "POST /vms/{vm}/start": 1.0,
              "GET /vms": 7.0, "POST /sso/oauth/token": 0.5}
    assert engine_writes(counts) == 4.0


def test_each_figure_of_an_n_both_ran_is_printed_beside_the_other_with_the_ratio():
    manager = {"capi-manager": {"create_cpu_ms": 12.5, "delete_cpu_ms": 3.0, "create_writes": 9.0,
                                "delete_writes": 4.0}}
    lines = table({MAPI: [_row(MAPI, 10, 40.0, 15.0), _row(MAPI, 100, 50.0, 20.0)],
                   CAPI: [_row(CAPI, 100, 75.0, 10.0, manager)]})
    assert lines[0].startswith("N=100") and "Machine API" in lines[0] and "capi/mapi" in lines[0]
    assert not any(line.startswith("N=10 ") for line in lines)  # only the Machine API ran N=10
    by_label = {line[:45].strip(): line[45:].split() for line in lines[1:] if not line.startswith("  ")}
    assert by_label["all Running (s)"] == ["50.0", "75.0", "1.50x"]
    assert by_label["controller CPU per created Machine (ms)"] == ["20.0", "10.0", "0.50x"]
    assert by_label["oVirt writes per created Machine"] == ["2.00", "2.00", "1.00x"]
    assert by_label["controller's API writes per created Machine"] == ["3.00", "3.00", "1.00x"]
    # Nothing to divide by: no ratio rather than a division by zero.
    assert by_label["controller CPU per deleted Machine (ms)"] == ["0.0", "0.0", "-"]
    assert lines[-1].strip().startswith("capi-manager") and "12.5 ms per created Machine" in lines[-1]


def test_nothing_is_printed_side_by_side_when_one_front_end_ran():
    assert table({MAPI: [_row(MAPI, 100, 50.0, 20.0)]}) == []
