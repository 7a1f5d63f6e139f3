"""The command line of hack/bench/machines.py: every flag, each number range-checked as it enters (with the
controller's own `bounded` and its one-line errors, machine_controller/config.py), and `--api`, the front ends to
measure (docs/benchmarks.md#what-hackbenchmachines-measures).

    opts = parse(["--api", "both", "--n", "100"])   # opts.api == ("mapi", "capi"), opts.n == (100,)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from machine_controller.config import RESYNC_S, WORKERS, FlagParser, bounded

# The front ends, in the order they run and are printed: the Machine API first, the one Cluster API is compared to.
MAPI, CAPI = "mapi", "capi"
APIS = (MAPI, CAPI)
TITLES = {MAPI: "Machine API", CAPI: "Cluster API"}
# The simulator's hosts are added for the largest N (a host per 8 VMs): far beyond what this machine can boot.
MAX_MACHINES = 10_000
_HOUR_S = 3600.0


def api_list(text: str) -> tuple[str, ...]:
    """`mapi`, `capi`, `both`, or a comma-separated list of front ends; always in APIS order, each once."""
    names = [part.strip() for part in text.split(",")]
    chosen: set[str] = set()
    for name in names:
        if name == "both":
            chosen.update(APIS)
        elif name in APIS:
            chosen.add(name)
        else:
            raise argparse.ArgumentTypeError(f"{name!r} is no front end: give mapi, capi, both or mapi,capi")
    return tuple(api for api in APIS if api in chosen)


_MACHINES = bounded(int, 1, MAX_MACHINES)


def machine_counts(text: str) -> tuple[int, ...]:
    """Comma-separated Machine counts, each 1..MAX_MACHINES, none twice (a second run of an N would reuse the names
    of the first's Machines while they may still be going)."""
    counts: list[int] = []
    for part in text.split(","):
        try:
            n = _MACHINES(part.strip())
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"N={part.strip()!r}: {e}") from None
        if n in counts:
            raise argparse.ArgumentTypeError(f"N={n} is given twice")
        counts.append(n)
    return tuple(counts)


def parser(description: str = "") -> argparse.ArgumentParser:
    p = FlagParser(description=description)
    p.add_argument("--api", type=api_list, default=(MAPI,),
                   help="front ends to measure: mapi (OpenShift's Machine API, N Machines), capi (upstream Cluster "
                        "API, one MachineDeployment of N replicas with its own core manager), or both (mapi,capi), "
                        "printed side by side on the same floor (default: mapi)")
    p.add_argument("--n", type=machine_counts, default=(10, 100),
                   help=f"comma-separated Machine counts, each 1 to {MAX_MACHINES}")
    p.add_argument("--profile", default="fast", choices=["fast", "realtime"])
    p.add_argument("--workers", type=WORKERS, default=8, help="the controller's --workers")
    p.add_argument("--machineset", type=bounded(int, 0, MAX_MACHINES), default=100,
                   help="with the Machine API, also scale a MachineSet 0 -> N -> 0 (0: skip)")
    p.add_argument("--steady", type=bounded(float, 1.0, _HOUR_S), default=60.0,
                   help="seconds of steady state measured after the MachineSet's scale-up")
    p.add_argument("--resync", type=RESYNC_S, default=600.0, help="controller --resync-period")
    p.add_argument("--heartbeat", type=bounded(float, 1.0, _HOUR_S), default=None,
                   help="seconds between the simulated kubelets' Node status posts (default: the profile's)")
    p.add_argument("--ovirt-connections", type=bounded(int, 1, 64), default=None,
                   help="the controller's --ovirt-connections (default: the controller's own)")
    p.add_argument("--sim-state-file", action="store_true",
                   help="let the simulator write its state file as tests do (a snapshot of its whole store every "
                        "half second while it changes); by default it keeps its state in memory: an engine's "
                        "database is not on the benchmark's cores, and the benchmark never restarts it")
    p.add_argument("--dev-venv", action="store_true",
                   help="run the controller with the development virtualenv instead of the product's "
                        "dependencies only (hack/bench/product_venv.py)")
    p.add_argument("--floor-workers", type=bounded(int, 1, 256), default=16,
                   help="connections of the bare-SDK floor script")
    p.add_argument("--floor-runs", type=bounded(int, 1, 20), default=2,
                   help="runs of the floor for each N, the fastest taken (default 2)")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG per front end and N into this directory")
    p.add_argument("--py-spy", type=Path, default=None, dest="spy",
                   help="profile the controller and the simulator during each creation and deletion with "
                        "py-spy, raw stacks into this directory")
    return p


def parse(argv: list[str] | None = None, description: str = "") -> argparse.Namespace:
    return parser(description).parse_args(argv)
