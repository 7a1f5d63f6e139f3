"""Benchmark of the oVirt simulator: start-up time, requests/second with N concurrent SDK clients, 1000 VMs.

    .venv/bin/python -m hack.bench.sim_throughput [--clients 1,8,32] [--duration 5] [--vms 1000] [--no-tls]

Each client is a separate process with its own `ovirtsdk4.Connection` (so the clients' GIL is not the limit),
polling `GET /vms/{id}` as controllers do; the figure is completed requests per second, cross-checked against the
simulator's own request counters. Prints a table; nothing is asserted (speed is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ovirtsdk4 as sdk
from ovirtsdk4 import types

from hack.bench.procstat import cpu_seconds
from hack.ovirtsim.testing import running_simulator


def _client(url: str, ca_file: str | None, user: str, password: str, vm_id: str, duration: float,
            start_at: float, out: "mp.Queue[int]") -> None:
    conn = sdk.Connection(url=url, username=user, password=password, ca_file=ca_file)
    svc = conn.system_service().vms_service().vm_service(vm_id)
    svc.get()  # log in before the clock starts
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    end = start_at + duration
    while time.time() < end:
        svc.get()
        done += 1
    out.put(done)
    conn.close()


def measure_rps(sim, vm_id: str, clients: int, duration: float) -> tuple[float, int, float]:
    """(client-observed req/s, counter difference (0 = exact), simulator CPU microseconds per request)."""
    ctx = mp.get_context("spawn")
    queue: "mp.Queue[int]" = ctx.Queue()
    start_at = time.time() + 2.0 + clients * 0.05
    procs = [ctx.Process(target=_client, args=(sim.url, sim.ca_file, sim.username, sim.password, vm_id, duration,
                                               start_at, queue)) for _ in range(clients)]
    before = sim.control.counts().get("GET /vms/{vm}", 0)
    for p in procs:
        p.start()
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = cpu_seconds(sim.process.pid)
    total = sum(queue.get(timeout=duration + 120) for _ in procs)
    cpu = cpu_seconds(sim.process.pid) - cpu0
    for p in procs:
        p.join()
    served = sim.control.counts().get("GET /vms/{vm}", 0) - before - clients  # minus the warm-up calls
    return total / duration, served - total, cpu / max(total, 1) * 1e6


def startup_times(runs: int, tls: bool) -> list[float]:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            with running_simulator(Path(tmp), tls=tls) as sim:
                times.append(time.monotonic() - t0)
                assert sim.control.health()["ok"]
    return times


def thousand_vms(sim, count: int, workers: int = 16) -> dict[str, float]:
    conn = sim.connection()
    vms = conn.system_service().vms_service()
    for i in range(count // 100 + 1):  # capacity for all of them at 1 GiB each
        sim.control.add_host(f"bench-host-{i}", memory=128 * 2**30)
    figures: dict[str, float] = {}

    def create(i: int) -> str:
        c = sim.connection()
        try:
            return c.system_service().vms_service().add(types.Vm(
                name=f"bench-{i:04d}", cluster=types.Cluster(name="Default"), template=types.Template(name="rhcos"),
                memory=2**30, memory_policy=types.MemoryPolicy(guaranteed=2**30)), clone=False).id
        finally:
            c.close()

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        ids = list(pool.map(create, range(count)))
    figures["create_per_s"] = count / (time.monotonic() - t0)

    def wait_all(status: types.VmStatus) -> None:
        wanted = set(ids)
        while any(v.status != status for v in vms.list() if v.id in wanted):
            time.sleep(0.2)

    wait_all(types.VmStatus.DOWN)
    t0 = time.monotonic()
    for _ in range(5):
        listed = vms.list()
    figures["list_all_s"] = (time.monotonic() - t0) / 5
    assert sum(1 for v in listed if v.name != "bench-target") == count
    t0 = time.monotonic()
    for i in range(50):
        assert len(vms.list(search=f"name=bench-{i:04d}")) == 1
    figures["search_by_name_ms"] = (time.monotonic() - t0) / 50 * 1000

    def start(vm_id: str) -> None:
        vms.vm_service(vm_id).start()

    t0 = time.monotonic()
    for vm_id in ids:
        start(vm_id)
    figures["start_per_s"] = count / (time.monotonic() - t0)
    wait_all(types.VmStatus.UP)
    figures["all_up_s"] = time.monotonic() - t0
    conn.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="1,8,32", help="comma-separated numbers of concurrent SDK clients")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--vms", type=int, default=1000, help="VMs for the scale run (0 to skip)")
    parser.add_argument("--no-tls", action="store_true", help="plain HTTP instead of HTTPS")
    args = parser.parse_args()
    tls = not args.no_tls

    starts = startup_times(5, tls)
    print(f"startup (spawn to serving, {'https' if tls else 'http'}): median {statistics.median(starts):.3f} s, "
          f"max {max(starts):.3f} s over {len(starts)} runs")

    with tempfile.TemporaryDirectory() as tmp, running_simulator(Path(tmp), tls=tls) as sim:
        conn = sim.connection()
        vm = conn.system_service().vms_service().add(types.Vm(
            name="bench-target", cluster=types.Cluster(name="Default"), template=types.Template(name="rhcos")))
        conn.close()
        print(f"machine: {os.cpu_count()} CPUs shared by the simulator and the client processes")
        print(f"{'clients':>8} {'GET /vms/{id} req/s':>20} {'counter diff':>13} {'sim CPU us/req':>15}")
        for n in (int(c) for c in args.clients.split(",")):
            rps, diff, cost = measure_rps(sim, vm.id, n, args.duration)
            print(f"{n:>8} {rps:>20.0f} {diff:>13} {cost:>15.0f}")
        if args.vms:
            figures = thousand_vms(sim, args.vms)
            print(f"{args.vms} VMs: create {figures['create_per_s']:.0f}/s (16 clients), "
                  f"list all {figures['list_all_s'] * 1000:.0f} ms, "
                  f"search by name {figures['search_by_name_ms']:.1f} ms, start {figures['start_per_s']:.0f}/s, "
                  f"all up after {figures['all_up_s']:.1f} s")
            for n in (int(c) for c in args.clients.split(",")):
                rps, diff, cost = measure_rps(sim, vm.id, n, args.duration)
                print(f"  with {args.vms} VMs, {n:>3} clients: {rps:.0f} req/s (counter diff {diff}, "
                      f"sim CPU {cost:.0f} us/req)")


if __name__ == "__main__":
    main()
