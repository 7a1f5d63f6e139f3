"""Benchmark of the Machine controller: N Machines created at once against the simulator, through OpenShift's Machine
API, upstream Cluster API, or both (`--api`).

    .venv/bin/python -m hack.bench.machines [--api mapi|capi|both] [--n 10,100] [--machineset 100] [--steady 60]
                                            [--profile fast] [--heartbeat 60] [--floor-runs 2] [--plot DIR]
                                            [--py-spy DIR]

For each front end and N it reports: the time until all N Machines are Running, divided by the floor for N (the same
N VMs created and booted by a bare-SDK script with the best concurrency, on the same simulator in the same run, the
fastest of `--floor-runs` runs: hack/bench/floor.py); the oVirt requests per Machine (the simulator's own counters)
by endpoint; the controller process's CPU time and peak resident memory (VmHWM, with N Machines and N Nodes in its
caches; the controller runs with the product's dependencies only, as the image has them:
hack/bench/product_venv.py); how busy the machine was and each process's share of its cores (API server, etcd,
simulator, controller compete for two cores: hack/bench/procstat.py); the controller's Kubernetes API requests per
Machine by method, reads included (its own `rest_client_requests_total`); the Kubernetes API writes per Machine by
verb, resource and answer code, events included (the API server's audit log, hack/bench/audit.py). Then it deletes the
Machines and reports the same for deletion. How each front end creates and deletes its Machines, and what runs
beside the controller for Cluster API, is in hack/bench/front_ends.py; `--api both` prints the two side by side
(hack/bench/side_by_side.py). `--plot DIR` draws each run (hack/bench/plot.py), `--py-spy DIR` samples the
controller and the simulator during each creation and deletion (hack/bench/pyspy.py); both need
`make bench-deps`. The MachineSet variant (Machine API only) scales a set 0 -> N -> 0 with `kubectl scale` and counts
the oVirt requests per minute of the steady state with N Running Machines.
`--heartbeat` sets how often the simulated kubelets post their Node status: a real kubelet posts it every 10 s
only when it changed and every 5 min otherwise, so at N=1000 the profile's 1 s would make the simulator's guests,
not the controller, the bottleneck.
Nothing is asserted: speed is measured here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

import yaml
from prometheus_client.parser import text_string_to_metric_families

from hack import ovirt_install
from hack.bench.audit import AuditLog
from hack.bench.floor import Floor, boot_floor
from hack.bench.front_ends import INFRA_ID, NS, ClusterApi, FrontEnd, Kubectl, MachineApi
from hack.bench.options import MAPI, TITLES, parse
from hack.bench.plot import Run, Sample, draw
from hack.bench.procstat import CpuShares, cpu_seconds, status_mib
from hack.bench.product_venv import product_python
from hack.bench.pyspy import PySpy, summary
from hack.bench.side_by_side import table
from hack.controller_process import ControllerProcess
from hack.controlplane.cluster import LocalControlPlane
from hack.crds_established import wait_established
from hack.ovirtsim.testing import running_simulator
from machine_controller.app import COMPONENT
from machine_controller.controllers.resources import MACHINES, NODES
from machine_controller.runtime.informer import Informer, compact
from machine_controller.runtime.kube import Resource, load_api_client
from machine_controller.runtime.logging import configure_logging

SETTLE_S = 40.0
# The controller's malloc settings, as the image runs it (Dockerfile's ENV).
IMAGE_MALLOC = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}


class PhaseWatch:
    """The phase of every Machine, from the controller's own kind of informer (list, then watch). Listing a
    thousand Machines every second would cost the API server (and this 2-core machine) a share of what is
    measured; `kubectl get --watch` ended without a word when the API server closed its watch as too slow, and
    the informer resumes a closed watch."""

    def __init__(self, kubeconfig: Path, resource: Resource, namespace: str):
        self._informer = Informer(load_api_client(str(kubeconfig)), resource, namespace=namespace,
                                  transform=compact)
        self._informer.start()
        if not self._informer.wait_for_sync(60):
            raise RuntimeError("the Machine informer did not sync in 60 s")

    def wait(self, done: Callable[[list[str]], bool], label: str) -> None:
        """Until `done(phases)`, telling how it goes every 15 s on stderr; a Failed Machine ends the run."""
        t0 = shown = time.monotonic()
        while True:
            phases = [(m.get("status") or {}).get("phase") or "" for m in self._informer.store.list()]
            if done(phases):
                return
            if "Failed" in phases:
                raise RuntimeError("a Machine failed; see the controller's log")
            if time.monotonic() - shown >= 15:
                shown = time.monotonic()
                print(f"  {label} at {shown - t0:.0f} s: " + ", ".join(
                    f"{p or 'no phase'} {phases.count(p)}" for p in sorted(set(phases))), file=sys.stderr)
            time.sleep(0.2)

    def phases(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self._informer.store.list():
            phase = "Deleting" if m["metadata"].get("deletionTimestamp") else (m.get("status") or {}).get("phase") or ""
            counts[phase] = counts.get(phase, 0) + 1
        return counts

    def close(self) -> None:
        self._informer.stop()


class NodeWatch:
    """The names of the Nodes, from an informer: the floor asks at every look, which `kubectl get` would make
    cost the floor itself a process each time."""

    def __init__(self, kubeconfig: Path):
        self._informer = Informer(load_api_client(str(kubeconfig)), NODES, transform=compact)
        self._informer.start()
        if not self._informer.wait_for_sync(60):
            raise RuntimeError("the Node informer did not sync in 60 s")

    def names(self) -> set[str]:
        return {n["metadata"]["name"] for n in self._informer.store.list()}

    def close(self) -> None:
        self._informer.stop()


class Sampler:
    """Every `every` seconds, the Machines by phase and the controller's CPU seconds and RSS: the picture's data."""

    def __init__(self, run: Run, watch: PhaseWatch, pid: int, every: float = 0.5):
        self._run, self._watch, self._pid, self._every = run, watch, pid, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.t0 = time.monotonic()

    def _loop(self) -> None:
        while True:
            self._run.samples.append(Sample(time.monotonic() - self.t0, self._watch.phases(), cpu_seconds(self._pid),
                                            status_mib(self._pid, "VmRSS")))
            if self._stop.wait(self._every):
                return

    def __enter__(self) -> "Sampler":
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_one(n: int, front: FrontEnd, kubeconfig: Path, sim, ctl: ControllerProcess, floor: Floor, audit: AuditLog,
            plot_dir: Path | None, spy_dir: Path | None, plane_pids: dict[str, int]) -> dict:
    pid = ctl.proc.pid
    # Whose CPU each phase used: on two cores the API server, the simulator and the controller compete (and, for
    # Cluster API, its core manager).
    others = front.pids()
    pids = {"controller": pid, "simulator": sim.process.pid, **others, **plane_pids}
    sim.control.reset_counts()
    watch = PhaseWatch(kubeconfig, front.resource, front.namespace)
    tag = f"{n}" if front.key == MAPI else f"{front.key}-{n}"  # the Machine API's files keep their names
    run = Run(n, floor)
    load0 = os.getloadavg()[0]
    with Sampler(run, watch, pid) as sampler:
        mark = audit.mark()
        spies = _spies(spy_dir, tag, "create", {"controller": pid, "simulator": sim.process.pid})
        totals0 = _controller_totals(ctl)
        t0 = time.monotonic()
        create_shares = CpuShares(pids)
        front.create(n)
        watch.wait(lambda phases: len(phases) == n and all(p == "Running" for p in phases),
                   f"{TITLES[front.key]} N={n} create")
        create_s = time.monotonic() - t0
        create_cpu = create_shares.stop()
        totals1 = _controller_totals(ctl)
        spies.close()
        create_counts = sim.control.counts()
        create_requests = sum(create_counts.values())
        load1 = os.getloadavg()[0]
        create_writes = audit.writes_since(mark, COMPONENT)
        create_other_writes = {who: audit.writes_since(mark, agent, settle_s=0) for who, agent in front.others.items()}

        sim.control.reset_counts()
        mark = audit.mark()
        run.delete_at = time.monotonic() - sampler.t0
        t1 = time.monotonic()
        delete_shares = CpuShares(pids)
        spies = _spies(spy_dir, tag, "delete", {"controller": pid, "simulator": sim.process.pid})
        front.delete(n)
        watch.wait(lambda phases: not phases, f"{TITLES[front.key]} N={n} delete")
        delete_s = time.monotonic() - t1
        spies.close()
        delete_cpu = delete_shares.stop()
        totals2 = _controller_totals(ctl)
        load2 = os.getloadavg()[0]
    watch.close()
    delete_counts = sim.control.counts()
    delete_requests = sum(delete_counts.values())
    delete_writes = audit.writes_since(mark, COMPONENT)
    delete_other_writes = {who: audit.writes_since(mark, agent, settle_s=0) for who, agent in front.others.items()}
    cpu_s, delete_cpu_s = create_cpu.cpu_seconds("controller"), delete_cpu.cpu_seconds("controller")
    if plot_dir:
        draw(run, plot_dir / f"bench-{tag}.png", f"{TITLES[front.key]}, N={n}: all Running {create_s:.1f} s "
             f"(floor {floor.seconds:.1f} s), controller CPU {1000 * cpu_s / n:.0f} ms per Machine, "
             f"{sum(create_writes.values()) / n:.1f} API writes per Machine; deleted in {delete_s:.1f} s")
    return {"api": front.key, "n": n, "create_s": create_s, "floor_s": floor.seconds,
            "ratio": create_s / floor.seconds,
            "create_req_per_machine": create_requests / n,
            "delete_s": delete_s, "delete_req_per_machine": delete_requests / n,
            "cpu_s": cpu_s, "cpu_ms_per_machine": 1000 * cpu_s / n,
            "delete_cpu_ms_per_machine": 1000 * delete_cpu_s / n,
            "peak_rss_mib": status_mib(pid, "VmHWM"), "load": (load0, load1, load2),
            "create_by_endpoint": _per_machine(create_counts, n), "delete_by_endpoint": _per_machine(delete_counts, n),
            "create_writes": _per_machine(create_writes, n), "delete_writes": _per_machine(delete_writes, n),
            "create_cpu": create_cpu, "delete_cpu": delete_cpu,
            "create_requests": _per_machine(_of(totals1 - totals0, "requests"), n),
            "delete_requests": _per_machine(_of(totals2 - totals1, "requests"), n),
            "create_passes": _per_machine(_of(totals1 - totals0, "passes"), n),
            "delete_passes": _per_machine(_of(totals2 - totals1, "passes"), n),
            "create_waits": _mean_waits(totals1 - totals0), "delete_waits": _mean_waits(totals2 - totals1),
            "create_lists": _lists(totals1 - totals0), "delete_lists": _lists(totals2 - totals1),
            "others": {who: _other_costs(create_cpu.cpu_seconds(who) if who in create_cpu.by_name else 0.0,
                                         delete_cpu.cpu_seconds(who) if who in delete_cpu.by_name else 0.0,
                                         create_other_writes[who], delete_other_writes[who], n)
                       for who in others},
            "profiles": {(phase, who): summary(spy_dir / f"profile-{tag}-{phase}-{who}.txt")
                         for phase in ("create", "delete") for who in ("controller", "simulator")} if spy_dir else {}}


def _other_costs(create_cpu_s: float, delete_cpu_s: float, create_writes: Counter[str], delete_writes: Counter[str],
                 n: int) -> dict[str, float]:
    """What a process beside the controller (Cluster API's core manager) spent per Machine: CPU ms and API writes."""
    return {"create_cpu_ms": 1000 * create_cpu_s / n, "delete_cpu_ms": 1000 * delete_cpu_s / n,
            "create_writes": sum(create_writes.values()) / n, "delete_writes": sum(delete_writes.values()) / n}


def _spies(spy_dir: Path | None, tag: str, phase: str, pids: dict[str, int]) -> ExitStack:
    """py-spy on each process of `pids` for a phase, raw stacks into `spy_dir`; closing the stack writes them."""
    stack = ExitStack()
    for who, pid in pids.items() if spy_dir else ():
        stack.enter_context(PySpy(pid, spy_dir / f"profile-{tag}-{phase}-{who}.txt"))
    return stack


def _controller_totals(ctl: ControllerProcess) -> Counter[tuple[str, str]]:
    """The controller's totals so far by (what, controller): its reconcile passes (`controller_runtime_reconcile`),
    and the keys its work queues handed out with the seconds they had waited in them
    (`workqueue_queue_duration_seconds`): how long a Machine or Node waited for a worker."""
    totals: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(ctl.metrics()):
        for sample in family.samples:
            if family.name == "controller_runtime_reconcile" and sample.name.endswith("_total"):
                totals["passes", sample.labels["controller"]] += sample.value
            elif family.name == "workqueue_queue_duration_seconds" and sample.name.endswith(("_sum", "_count")):
                totals["waited_s" if sample.name.endswith("_sum") else "taken", sample.labels["name"]] += sample.value
            elif family.name == "rest_client_requests" and sample.name.endswith("_total"):
                totals["requests", sample.labels["method"]] += sample.value
            elif family.name == "ovirt_engine_request_duration_seconds" and sample.name.endswith(("_sum", "_count")) \
                    and sample.labels["operation"] == "cluster_vms":
                totals["listed_s" if sample.name.endswith("_sum") else "lists", "cluster_vms"] += sample.value
    return totals


def _lists(totals: Counter[tuple[str, str]]) -> str:
    """The lists of a cluster's VMs and how long each took on average, from request to its last byte parsed: a list
    counts as recent for three times that (machine_controller/ovirt/cluster_vm_lists.py), which is how long a Machine
    that acted just after one started may wait for the next."""
    n = totals["lists", "cluster_vms"]
    return f"{n:.0f}, {totals['listed_s', 'cluster_vms'] / n:.2f} s each on average" if n else "none"


def _of(totals: Counter[tuple[str, str]], what: str) -> dict[str, float]:
    """One kind of `_controller_totals` by its second key: "passes" by controller; "requests" (the Kubernetes API
    requests, reads and watches too, which the audit log's count of writes leaves out) by method."""
    return {key: v for (kind, key), v in totals.items() if kind == what}


def _mean_waits(totals: Counter[tuple[str, str]]) -> dict[str, float]:
    """Mean seconds a key waited in each controller's queue, longest first."""
    waits = {name: totals["waited_s", name] / taken for (what, name), taken in totals.items() if what == "taken"}
    return dict(sorted(waits.items(), key=lambda kv: -kv[1]))


def _per_machine(counts: dict[str, int], n: int) -> dict[str, float]:
    """Counts per Machine by key (an endpoint `METHOD template`, a write, a controller), most first."""
    return {k: v / n for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


def run_machineset(n: int, kubectl: Kubectl, sim, inst, ctl: ControllerProcess, floor: Floor,
                   steady_s: float) -> dict:
    """Scale a MachineSet 0 -> n -> 0 with `kubectl scale`, and count the oVirt requests of a steady state with n
    Running Machines (what the cluster costs the engine when nothing happens)."""
    ms = ovirt_install.machineset_for(inst, NS, f"bench-set-{n}")
    ms["spec"]["replicas"] = 0
    tpl = ms["spec"]["template"]
    tpl["metadata"]["labels"]["machine.openshift.io/cluster-api-cluster"] = INFRA_ID
    ms["metadata"]["labels"]["machine.openshift.io/cluster-api-cluster"] = INFRA_ID
    ms["spec"]["selector"]["matchLabels"]["machine.openshift.io/cluster-api-cluster"] = INFRA_ID
    value = tpl["spec"]["providerSpec"]["value"]
    value.update(cpu={"sockets": 1, "cores": 2, "threads": 1}, memory_mb=4096, clone=False,
                 affinity_groups_names=[f"{INFRA_ID}-compute"])
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(ms))
    watch = PhaseWatch(kubectl.kubeconfig, MACHINES, NS)
    sim.control.reset_counts()
    t0 = time.monotonic()
    kubectl("-n", NS, "scale", "machineset", ms["metadata"]["name"], f"--replicas={n}")
    watch.wait(lambda phases: len(phases) == n and all(p == "Running" for p in phases), f"set 0 -> {n}")
    up_s = time.monotonic() - t0
    up_requests = sum(sim.control.counts().values())

    # Let the last requeues of provisioning (Provisioned is looked at again after 30 s) pass first.
    time.sleep(SETTLE_S)
    sim.control.reset_counts()
    cpu0 = cpu_seconds(ctl.proc.pid)
    time.sleep(steady_s)
    steady_counts = sim.control.counts()
    steady_requests = sum(steady_counts.values())
    top = sorted(steady_counts.items(), key=lambda kv: -kv[1])[:4]
    steady_cpu = cpu_seconds(ctl.proc.pid) - cpu0

    t1 = time.monotonic()
    kubectl("-n", NS, "scale", "machineset", ms["metadata"]["name"], "--replicas=0")
    watch.wait(lambda phases: not phases, f"set {n} -> 0")
    watch.close()
    down_s = time.monotonic() - t1
    kubectl("-n", NS, "delete", "machineset", ms["metadata"]["name"])
    return {"n": n, "up_s": up_s, "ratio": up_s / floor.seconds, "req_per_machine": up_requests / n, "down_s": down_s,
            "steady_req_per_min": steady_requests * 60 / steady_s, "steady_cpu_pct": 100 * steady_cpu / steady_s,
            "steady_top": ", ".join(f"{k} {v}" for k, v in top)}


def main() -> int:
    args = parse(description=__doc__.splitlines()[0])
    configure_logging("warning", sys.stderr)  # the phase informer's own log lines are not figures
    counts = list(args.n)
    machineset = args.machineset if MAPI in args.api else 0  # a MachineSet is the Machine API's
    timings = {"node_heartbeat": args.heartbeat, "node_unknown_after": 2 * args.heartbeat} if args.heartbeat else {}
    work = Path(tempfile.mkdtemp(prefix="omc-bench-"))
    # A kubelet renews its Lease every 10 s and the node lifecycle controller marks a Node unreachable (a taint
    # and a status write, which wake the controllers watching Nodes) after 50 s without one; the simulated
    # kubelets renew no Lease, so with a longer heartbeat it is told to wait as long as the simulator does.
    kcm_args = (f"--node-monitor-grace-period={int(2 * args.heartbeat)}s",) if args.heartbeat else ()
    audit = AuditLog(work / "audit")
    if args.spy:
        args.spy.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {}
    ms_row = None
    with LocalControlPlane(work / "plane", controller_manager_args=kcm_args,
                           apiserver_args=audit.apiserver_args()) as plane:
        kubectl = Kubectl(plane.kubeconfig())
        kubectl("apply", "-f", str(ovirt_install.REPO / "config" / "manager" / "namespace.yaml"))
        kubectl("apply", "-k", str(ovirt_install.REPO / "config" / "crd"))
        wait_established(kubectl, "machines.machine.openshift.io")
        with running_simulator(work / "ovirt", kubeconfig=plane.kubeconfig(), profile=args.profile,
                               timings=timings, persist=args.sim_state_file) as sim:
            # Room for every VM: the seeded hosts hold a few dozen.
            for i in range(max(counts + [machineset]) // 8 + 1):
                sim.control.add_host(f"bench-host-{i}", sockets=4, cores=16, threads=2, memory=1024 ** 4)
            conn = sim.connection()
            try:
                inst = ovirt_install.prepare(conn, INFRA_ID)
            finally:
                conn.close()
            kubectl("apply", "-f", "-", stdin=yaml.safe_dump(ovirt_install.credentials_secret(
                sim.url, sim.username, sim.password, ca_pem=Path(sim.ca_file).read_text())))
            kubectl("apply", "-f", str(ovirt_install.REPO / "config" / "samples" / "worker-user-data.yaml"))
            floors, floor_runs = _floors(sim, inst, plane.kubeconfig(), kubectl,
                                         sorted(set(counts + ([machineset] if machineset else []))), args)
            for api in args.api:
                front: FrontEnd = MachineApi(plane.kubeconfig(), inst) if api == MAPI \
                    else ClusterApi(kubectl, sim, inst, work / api)
                ctl = ControllerProcess(plane.kubeconfig(), work / f"controller-{api}.log", namespace=front.namespace,
                                        extra_args=(f"--workers={args.workers}", f"--resync-period={args.resync}",
                                                    *([f"--ovirt-connections={args.ovirt_connections}"]
                                                      if args.ovirt_connections else []), *front.controller_args),
                                        env=IMAGE_MALLOC, python=sys.executable if args.dev_venv
                                        else str(product_python()))
                try:
                    front.before_controller()
                    ctl.start()
                    ctl.wait_ready()
                    front.after_controller()
                    rows[api] = [run_one(n, front, plane.kubeconfig(), sim, ctl, floors[n], audit, args.plot,
                                         args.spy, plane.state.pids) for n in counts]
                    if api == MAPI and machineset:
                        ms_row = run_machineset(machineset, kubectl, sim, inst, ctl, floors[machineset],
                                                args.steady)
                finally:
                    ctl.stop()
                    front.close()
    heartbeat = timings.get("node_heartbeat") or "the profile's"
    print(f"\nsimulator profile {args.profile!r}, "
          f"{'its state file written' if args.sim_state_file else 'its state in memory only'}, "
          f"guest Node heartbeat {heartbeat} s; controller workers="
          f"{args.workers}, oVirt connections {args.ovirt_connections or 'its default'}, "
          f"{'the development virtualenv' if args.dev_venv else 'the product dependencies only'}; floor: the same "
          f"N VMs created and booted by the bare SDK with {args.floor_workers} connections, the fastest of "
          f"{args.floor_runs} runs (" + "; ".join(f"N={n}: " + ", ".join(f"{s:.1f}" for s in runs) + " s"
                                       for n, runs in floor_runs.items()) + ")")
    for api, api_rows in rows.items():
        _print_rows(api, api_rows)
    if len(rows) > 1:
        print("\nThe two front ends on the same floor (Cluster API's figure as a multiple of the Machine API's):")
        for line in table(rows):
            print(line)
    if ms_row:
        r = ms_row
        print(f"\nMachineSet 0 -> {r['n']}: {r['up_s']:.1f} s ({r['ratio']:.2f}x the floor), "
              f"{r['req_per_machine']:.1f} oVirt requests per Machine; {r['n']} -> 0: {r['down_s']:.1f} s")
        print(f"steady state with {r['n']} Running Machines over {args.steady:.0f} s (resync {args.resync:.0f} s): "
              f"{r['steady_req_per_min']:.1f} oVirt requests/min, controller CPU {r['steady_cpu_pct']:.1f}%")
        print(f"  most frequent steady-state requests: {r['steady_top'] or 'none'}")
    return 0


def _floors(sim, inst, kubeconfig: Path, kubectl: Kubectl, sizes: list[int],
            args: argparse.Namespace) -> tuple[dict[int, Floor], dict[int, list[float]]]:
    """The floor of each N, the fastest of --floor-runs: single runs of it spread widely on a shared machine, and the
    ratio with them (docs/benchmarks.md#what-hackbenchmachines-measures). They run first, before any controller
    exists, and leave no VM and no Node behind; every front end is divided by the same floor."""
    floors: dict[int, Floor] = {}
    floor_runs: dict[int, list[float]] = {}
    nodes = NodeWatch(kubeconfig)
    for n in sizes:
        for r in range(args.floor_runs):
            floor = boot_floor(sim, inst, n, prefix=f"floor-{n}-{r}", workers=args.floor_workers,
                               node_names=nodes.names)
            kubectl("delete", "nodes", "-l", "node.openshift.io/os_id=rhcos", "--wait=false")
            floor_runs.setdefault(n, []).append(floor.seconds)
            if n not in floors or floor.seconds < floors[n].seconds:
                floors[n] = floor
    nodes.close()
    return floors, floor_runs


def _print_rows(api: str, rows: list[dict]) -> None:
    print(f"\n{TITLES[api]}:")
    print(f"{'N':>5} {'all Running':>12} {'floor':>7} {'/ floor':>8} {'req/machine':>12} {'writes/m':>9} "
          f"{'delete':>8} {'del req/m':>10} {'del wr/m':>9} {'CPU s':>7} {'CPU ms/m':>9} {'del ms/m':>9} "
          f"{'peak RSS':>9} {'load 1m':>15}")
    for r in rows:
        print(f"{r['n']:>5} {r['create_s']:>11.1f}s {r['floor_s']:>6.1f}s {r['ratio']:>7.2f}x "
              f"{r['create_req_per_machine']:>12.1f} {sum(r['create_writes'].values()):>9.2f} "
              f"{r['delete_s']:>7.1f}s {r['delete_req_per_machine']:>10.1f} {sum(r['delete_writes'].values()):>9.2f} "
              f"{r['cpu_s']:>7.1f} {r['cpu_ms_per_machine']:>9.1f} {r['delete_cpu_ms_per_machine']:>9.1f} "
              f"{r['peak_rss_mib']:>7.0f}MiB {'/'.join(f'{x:.1f}' for x in r['load']):>15}")
    print("  (load 1m: the machine's 1-minute load average before the creation, at all Running, at all deleted)")
    for r in rows:
        for what in ("create", "delete"):
            print(f"  N={r['n']} {what} CPU: {r[f'{what}_cpu'].line()}")
            parts = ", ".join(f"{k} {v:.1f}" for k, v in r[f"{what}_passes"].items())
            print(f"  N={r['n']} {what} reconcile passes per Machine by controller: {parts}")
            parts = ", ".join(f"{k} {v:.2f} s" for k, v in r[f"{what}_waits"].items())
            print(f"  N={r['n']} {what} mean wait of a key in its work queue by controller: {parts}")
            print(f"  N={r['n']} {what} lists of the cluster's VMs: {r[f'{what}_lists']}")
            parts = ", ".join(f"{k} {v:.2f}" for k, v in r[f"{what}_by_endpoint"].items())
            print(f"  N={r['n']} {what} oVirt requests per Machine by endpoint: {parts}")
            parts = ", ".join(f"{k} {v:.2f}" for k, v in r[f"{what}_requests"].items())
            print(f"  N={r['n']} {what} Kubernetes API requests per Machine by method (the controller's count): "
                  f"{parts}")
            parts = ", ".join(f"{k} {v:.2f}" for k, v in r[f"{what}_writes"].items())
            print(f"  N={r['n']} {what} Kubernetes API writes per Machine (verb resource code): {parts}")
        for who, cost in r["others"].items():
            print(f"  N={r['n']} {who}: CPU {cost['create_cpu_ms']:.1f} ms per created Machine, "
                  f"{cost['delete_cpu_ms']:.1f} per deleted; Kubernetes API writes {cost['create_writes']:.2f} per "
                  f"created Machine, {cost['delete_writes']:.2f} per deleted")
        for (phase, who), profile in r["profiles"].items():
            print(f"  N={r['n']} {phase}, py-spy profile of the {who}:\n" + profile)


if __name__ == "__main__":
    raise SystemExit(main())
