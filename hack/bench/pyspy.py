"""A sampling profile of the controller process during a benchmark phase, by py-spy (the `bench` extra): the
process is sampled from outside, without pausing it (`--nonblocking`), and each sample is the stack of the thread
holding the GIL (`--gil`), so workers, informers and the event sender are all seen (cProfile sees one thread) and
a thread waiting on a socket or a lock costs nothing: the samples are where the controller's CPU goes. The summary
is the top functions by own samples and by samples with the function anywhere on the stack, each as a share of
the samples.

    with PySpy(pid, work / "profile-1000.txt"):
        ...                                      # the phase
    print(summary(work / "profile-1000.txt"))
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import TracebackType

_LINE_NUMBER = re.compile(r":\d+\)$")


class PySpy:
    def __init__(self, pid: int, output: Path, rate: int = 50):
        beside = Path(sys.executable).parent / "py-spy"  # the virtualenv's, which need not be on PATH
        exe = str(beside) if beside.exists() else shutil.which("py-spy")
        if exe is None:
            raise RuntimeError("py-spy is not installed: `make bench-deps` installs the bench extra")
        self._argv = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking",
                      "--gil", "--output", str(output)]
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "PySpy":
        self._proc = subprocess.Popen(self._argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._proc
        self._proc.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
        _, err = self._proc.communicate(timeout=60)
        if self._proc.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-500:]}")


def _frame(frame: str) -> str:
    """`name (path/to/module.py:123)` -> `name (module.py)`: a function, whichever of its lines was sampled."""
    name, _, where = frame.partition(" (")
    where = _LINE_NUMBER.sub(")", "(" + where) if where else ""
    path = where.strip("()")
    return f"{name} ({'/'.join(path.split('/')[-2:])})" if path else name


def summary(raw: Path, top: int = 20) -> str:
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_frame(f) for f in stack.split(";") if f]
        n = int(count)
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            anywhere[f] += n
    if not total:
        return "no samples"
    rows = [f"{total} samples; top {top} by own samples:"]
    rows += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    rows.append(f"top {top} by samples with the function on the stack:")
    rows += [f"  {100 * n / total:5.1f}%  {f}" for f, n in anywhere.most_common(top)]
    return "\n".join(rows)
