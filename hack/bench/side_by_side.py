"""The Machine API's and Cluster API's figures of one benchmark run side by side, with Cluster API's as a multiple of
the Machine API's (hack/bench/machines.py --api both; docs/benchmarks.md#the-two-front-ends). Pure: it formats the
rows `run_one` returns.

    for line in table(rows_by_api):
        print(line)
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from hack.bench.options import CAPI, MAPI

Row = Mapping[str, Any]

# The simulator's sign-in: a new session, not a change to the engine's objects.
_SIGN_IN = "/sso/"


def engine_writes(by_endpoint: Mapping[str, float]) -> float:
    """The requests that change the engine's objects (POST, PUT, DELETE: creations, updates, actions such as a start,
    removals) among the oVirt requests by `METHOD template`, sign-ins left out."""
    return sum(v for k, v in by_endpoint.items()
               if k.split(" ", 1)[0] in ("POST", "PUT", "DELETE") and _SIGN_IN not in k)


def _kube_writes(row: Row, phase: str) -> float:
    return sum(row[f"{phase}_writes"].values())


# (label, the figure of a row, its format): the figures both front ends have.
FIGURES: tuple[tuple[str, Callable[[Row], float], str], ...] = (
    ("all Running (s)", lambda r: r["create_s"], "{:.1f}"),
    ("/ floor", lambda r: r["ratio"], "{:.2f}x"),
    ("oVirt requests per created Machine", lambda r: r["create_req_per_machine"], "{:.1f}"),
    ("oVirt writes per created Machine", lambda r: engine_writes(r["create_by_endpoint"]), "{:.2f}"),
    ("controller's API writes per created Machine", lambda r: _kube_writes(r, "create"), "{:.2f}"),
    ("controller CPU per created Machine (ms)", lambda r: r["cpu_ms_per_machine"], "{:.1f}"),
    ("deleted in (s)", lambda r: r["delete_s"], "{:.1f}"),
    ("oVirt requests per deleted Machine", lambda r: r["delete_req_per_machine"], "{:.1f}"),
    ("oVirt writes per deleted Machine", lambda r: engine_writes(r["delete_by_endpoint"]), "{:.2f}"),
    ("controller's API writes per deleted Machine", lambda r: _kube_writes(r, "delete"), "{:.2f}"),
    ("controller CPU per deleted Machine (ms)", lambda r: r["delete_cpu_ms_per_machine"], "{:.1f}"),
    ("controller peak RSS (MiB)", lambda r: r["peak_rss_mib"], "{:.0f}"),
)


def ratio(capi: float, mapi: float) -> str:
    """Cluster API's figure as a multiple of the Machine API's; `-` where the Machine API's is zero."""
    return f"{capi / mapi:.2f}x" if mapi else "-"


def table(rows: Mapping[str, list[Row]]) -> list[str]:
    """One block per N that both front ends ran: each figure for the Machine API, for Cluster API, and capi/mapi;
    then what only Cluster API has, its own processes' costs (`others`: its core manager's CPU and API writes per
    Machine), which the Machine API's figures have no counterpart for."""
    by_n = {api: {r["n"]: r for r in rows.get(api, [])} for api in (MAPI, CAPI)}
    width = max(len(label) for label, _, _ in FIGURES) + 2
    lines: list[str] = []
    for n in [n for n in by_n[MAPI] if n in by_n[CAPI]]:
        m, c = by_n[MAPI][n], by_n[CAPI][n]
        lines.append(f"N={n}".ljust(width) + f"{'Machine API':>12} {'Cluster API':>12} {'capi/mapi':>10}")
        for label, figure, fmt in FIGURES:
            lines.append(label.ljust(width) + f"{fmt.format(figure(m)):>12} {fmt.format(figure(c)):>12} "
                                              f"{ratio(figure(c), figure(m)):>10}")
        for who, cost in c.get("others", {}).items():
            lines.append(f"  {who} (Cluster API only): CPU {cost['create_cpu_ms']:.1f} ms per created Machine, "
                         f"{cost['delete_cpu_ms']:.1f} per deleted; API writes {cost['create_writes']:.2f} per "
                         f"created Machine, {cost['delete_writes']:.2f} per deleted")
    return lines
