"""What the benchmarks read of processes and of the machine from Linux's /proc: CPU seconds, resident memory, and
where a phase's CPU went (`CpuShares`).

On this project's 2-core machine the benchmark's processes (API server, etcd, kube-controller-manager, the
simulator, the controller) share the cores, so a phase is often bound by the machine's CPU, not by any one of
them: the shares say which process a run's time was spent in (hack/bench/machines.py prints them).

    shares = CpuShares({"controller": pid, "simulator": sim.process.pid, **plane.state.pids})
    ...                                          # the phase
    print(shares.stop().line())                  # machine 89 % busy of 2 cores: kube-apiserver 39 %, ...
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def status_mib(pid: int, field: str) -> float:
    """A memory line of /proc/PID/status (VmRSS, VmHWM: the peak resident set) in MiB; 0 when absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mib(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE / 2**20


def busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores, /proc/stat): user, nice, system, irq, softirq,
    steal. Idle and iowait are not busy."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / TICKS


@dataclass(frozen=True)
class Shares:
    seconds: float  # wall time of the phase
    busy: float  # share of all cores the machine was busy, 0..1
    by_name: dict[str, float]  # share of all cores each named process used, 0..1, largest first

    def cpu_seconds(self, name: str) -> float:
        """The CPU seconds the named process used in the phase."""
        return self.by_name[name] * self.seconds * (os.cpu_count() or 1)

    def line(self) -> str:
        """The shares, and the rest of the busy time: processes not named (the benchmark's own, or whatever else
        ran on a shared machine, which makes the phase's figures slower than the machine alone would)."""
        cores = os.cpu_count() or 1
        parts = ", ".join(f"{name} {100 * share:.0f} %" for name, share in self.by_name.items())
        rest = max(0.0, self.busy - sum(self.by_name.values()))
        return f"machine {100 * self.busy:.0f} % busy of {cores} cores: {parts}; other processes {100 * rest:.0f} %"


class CpuShares:
    """The CPU each named process used from construction to `stop()`, as a share of all the machine's cores, beside
    how busy the machine was. A process gone at the start or at `stop()` is left out."""

    def __init__(self, pids: dict[str, int]):
        self._pids = dict(pids)
        self._t0 = time.monotonic()
        self._busy0 = busy_seconds()
        self._cpu0 = {name: self._read(pid) for name, pid in self._pids.items()}

    @staticmethod
    def _read(pid: int) -> float | None:
        try:
            return cpu_seconds(pid)
        except OSError:
            return None

    def stop(self) -> Shares:
        wall = time.monotonic() - self._t0
        capacity = wall * (os.cpu_count() or 1)
        used = {}
        for name, pid in self._pids.items():
            before, after = self._cpu0[name], self._read(pid)
            if before is not None and after is not None:
                used[name] = (after - before) / capacity
        ranked = dict(sorted(used.items(), key=lambda kv: kv[1], reverse=True))
        return Shares(wall, (busy_seconds() - self._busy0) / capacity, ranked)
