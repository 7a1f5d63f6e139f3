"""The picture of one benchmark run (`hack/bench/machines.py --plot DIR`): above, the Machines by phase over time
beside the floor's guests booting and their Nodes registering (the same N VMs without a controller); below, on the
same time axis, the controller's CPU (share of one core) and resident memory. matplotlib is the `bench` extra
(`make bench-deps`), imported only when a picture is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hack.bench.floor import Floor

PHASES = ("", "Provisioning", "Provisioned", "Running", "Deleting")


@dataclass
class Sample:
    t: float  # seconds since the Machines were created
    phases: dict[str, int]  # Machines by phase ("" for none yet)
    cpu_s: float  # the controller's CPU seconds so far
    rss_mib: float


@dataclass
class Run:
    n: int
    floor: "Floor"
    samples: list[Sample] = field(default_factory=list)
    delete_at: float | None = None  # when the deletion began, on the same axis


def draw(run: Run, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 7), height_ratios=(3, 2))
    ts = [s.t for s in run.samples]
    for phase in PHASES:
        ys = [s.phases.get(phase, 0) for s in run.samples]
        if any(ys):
            top.plot(ts, ys, label=f"Machines {phase or 'without a phase'}")
    if run.floor.timeline:
        ft = [row[0] for row in run.floor.timeline]
        top.plot(ft, [row[1] for row in run.floor.timeline], "k:", label="floor: guests booted")
        top.plot(ft, [row[2] for row in run.floor.timeline], "k--", label="floor: Nodes registered")
    if run.delete_at is not None:
        for ax in (top, bottom):
            ax.axvline(run.delete_at, color="grey", linewidth=0.8)
        top.annotate(" deletion", (run.delete_at, run.n), va="top", color="grey")
    top.set_ylabel("Machines / VMs")
    top.set_title(title, fontsize=10)
    top.legend(loc="center right", fontsize=8)
    top.grid(alpha=0.3)

    cpu_t, cpu_pct = [], []
    for a, b in pairwise(run.samples):
        if b.t > a.t:
            cpu_t.append(b.t)
            cpu_pct.append(100 * (b.cpu_s - a.cpu_s) / (b.t - a.t))
    bottom.plot(cpu_t, cpu_pct, color="tab:red", label="controller CPU (% of one core)")
    bottom.set_ylabel("CPU %", color="tab:red")
    bottom.set_xlabel("seconds since the Machines were created")
    bottom.grid(alpha=0.3)
    rss = bottom.twinx()
    rss.plot(ts, [s.rss_mib for s in run.samples], color="tab:blue", label="controller RSS")
    rss.set_ylabel("RSS MiB", color="tab:blue")
    rss.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
