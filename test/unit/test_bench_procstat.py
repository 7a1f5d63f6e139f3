"""hack/bench/procstat.py: the CPU shares the benchmark prints are read from real processes."""

import subprocess
import sys
import time

from hack.bench.procstat import CpuShares, Shares, cpu_seconds, status_mib

# Spins for 0.3 s of its own CPU between "go" and "done", however loaded the machine is (tests run beside it).
SPIN = """import sys, time
print("ready", flush=True)
sys.stdin.readline()
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def test_a_busy_process_has_the_share_it_used_and_an_idle_one_none():
    busy = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert busy.stdout.readline() == "ready\n"
        shares = CpuShares({"busy": busy.pid, "idle": idle.pid})
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline() == "done\n"
        result = shares.stop()  # the spinner still runs, blocked on its input
    finally:
        busy.stdin.close()
        busy.wait(timeout=10)
        idle.kill()
    assert list(result.by_name) == ["busy", "idle"]  # largest first
    assert result.by_name["idle"] < 0.05
    # The spinner used its 0.3 s (and a little to read and write a line); the machine was at least that busy.
    cpu_s = result.cpu_seconds("busy")
    assert 0.28 < cpu_s < 0.5, cpu_s
    assert result.busy >= result.by_name["busy"] * 0.9
    assert "busy" in result.line() and "% busy of" in result.line()


def test_a_process_gone_before_the_phase_is_left_out():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    shares = CpuShares({"gone": gone.pid})
    assert shares.stop().by_name == {}


def test_cpu_seconds_and_memory_of_this_process():
    before = cpu_seconds(_self())
    end = time.process_time() + 0.05  # /proc counts in ticks of 10 ms: a fixed amount of work may take less than one
    while time.process_time() < end:
        pass
    assert 0.03 <= cpu_seconds(_self()) - before < 1.0
    assert status_mib(_self(), "VmHWM") >= status_mib(_self(), "VmRSS") > 1


def _self() -> int:
    import os

    return os.getpid()



def test_the_line_tells_the_share_of_processes_not_named():
    # On a shared machine the busy time the benchmark's processes did not use is what slowed its phase.
    line = Shares(seconds=1.0, busy=0.9, by_name={"kube-apiserver": 0.3, "controller": 0.2}).line()
    assert line.endswith("kube-apiserver 30 %, controller 20 %; other processes 40 %")
    assert Shares(seconds=1.0, busy=0.1, by_name={"controller": 0.2}).line().endswith("other processes 0 %")
