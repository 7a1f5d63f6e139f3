"""hack/bench/procstat.py: the CPU shares the benchmark prints are read from real processes."""

import subprocess
import sys
import time

from hack.bench.procstat import CpuShares, cpu_seconds, status_mib

SPIN = "import time\nend = time.monotonic() + 0.6\nwhile time.monotonic() < end: pass\n"


def test_a_busy_process_has_the_share_it_used_and_an_idle_one_none():
    busy = subprocess.Popen([sys.executable, "-c", SPIN])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(0.05)
        shares = CpuShares({"busy": busy.pid, "idle": idle.pid})
        time.sleep(0.8)
        result = shares.stop()
    finally:
        busy.wait(timeout=10)
        idle.kill()
    assert list(result.by_name) == ["busy", "idle"]  # largest first
    assert result.by_name["idle"] < 0.05
    # The spinner used about 0.55 s of one core over the phase; the machine was at least that busy.
    cpu_s = result.cpu_seconds("busy")
    assert 0.2 < cpu_s < 1.0, cpu_s
    assert result.busy >= result.by_name["busy"] * 0.9
    assert "busy" in result.line() and "% busy of" in result.line()


def test_a_process_gone_before_the_phase_is_left_out():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    shares = CpuShares({"gone": gone.pid})
    assert shares.stop().by_name == {}


def test_cpu_seconds_and_memory_of_this_process():
    before = cpu_seconds(_self())
    sum(i * i for i in range(300_000))
    assert cpu_seconds(_self()) > before
    assert status_mib(_self(), "VmHWM") >= status_mib(_self(), "VmRSS") > 1


def _self() -> int:
    import os

    return os.getpid()

