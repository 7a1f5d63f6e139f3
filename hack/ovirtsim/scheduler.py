"""Host selection at VM start: capacity filters and enforcing affinity groups (docs/compatibility.md#affinity-groups).

The engine runs filter policy units over the cluster's hosts and answers 409
`[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, ...]`
with one line per filtered host when none is left (`SCHEDULING_ALL_HOSTS_FILTERED_OUT`), and
`SCHEDULING_NO_HOSTS` when the cluster has no running host at all. Among the hosts left, the one with the most
free memory wins (the default `evenly_distributed`-like weighting).
"""

from __future__ import annotations

from ovirtsdk4 import types

from hack.ovirtsim.errors import Msg, conflict
from hack.ovirtsim.statemachine import RUNNING
from hack.ovirtsim.store import Store

MiB = 1024 ** 2


def vm_vcpus(vm: types.Vm) -> int:
    topo = vm.cpu.topology if vm.cpu is not None and vm.cpu.topology is not None else None
    if topo is None:
        return 1
    return (topo.sockets or 1) * (topo.cores or 1) * (topo.threads or 1)


def vm_scheduling_memory(vm: types.Vm) -> int:
    """The memory filter counts the guaranteed memory (what the host must really provide)."""
    if vm.memory_policy is not None and vm.memory_policy.guaranteed:
        return vm.memory_policy.guaranteed
    return vm.memory or 0


def host_vcpus(host: types.Host) -> int:
    topo = host.cpu.topology
    return (topo.sockets or 1) * (topo.cores or 1) * (topo.threads or 1)


def vms_on_host(store: Store, host_id: str) -> list[types.Vm]:
    return [vm for vm in store.vms.all()
            if vm.status in RUNNING | {types.VmStatus.PAUSED, types.VmStatus.NOT_RESPONDING}
            and store.vm_runtime(vm.id).host_id == host_id]


def free_memory(store: Store, host: types.Host, used: dict[str, int] | None = None) -> int:
    used = used if used is not None else memory_in_use(store)
    return (host.memory or 0) - used.get(host.id, 0)


def memory_in_use(store: Store) -> dict[str, int]:
    """Scheduling memory of the VMs occupying each host, in one pass over the VMs."""
    used: dict[str, int] = {}
    occupying = RUNNING | {types.VmStatus.PAUSED, types.VmStatus.NOT_RESPONDING}
    for vm in store.vms.all():
        if vm.status in occupying:
            host_id = store.vm_runtime(vm.id).host_id
            if host_id:
                used[host_id] = used.get(host_id, 0) + vm_scheduling_memory(vm)
    return used


def _groups_of(store: Store, vm: types.Vm) -> list[types.AffinityGroup]:
    return [g for g in store.affinity_groups.children(vm.cluster.id)
            if any(member.id == vm.id for member in (g.vms or []))]


def _rule(group: types.AffinityGroup, which: str) -> tuple[bool, bool, bool]:
    """(enabled, enforcing, positive) of the VM or host rule, honouring the deprecated top-level flags."""
    rule = getattr(group, f"{which}_rule")
    if rule is not None:
        return bool(rule.enabled if rule.enabled is not None else True), bool(rule.enforcing), bool(rule.positive)
    if which == "vms":
        return group.positive is not None, bool(group.enforcing), bool(group.positive)
    return False, False, False


def pick_host(store: Store, vm: types.Vm) -> types.Host:
    hosts = [h for h in store.hosts.all() if h.cluster is not None and h.cluster.id == vm.cluster.id
             and h.status is types.HostStatus.UP]
    if not hosts:
        raise conflict(Msg.SCHEDULING_NO_HOSTS)
    reasons: list[str] = []
    need_mem = vm_scheduling_memory(vm)
    need_cpu = vm_vcpus(vm)
    # Placement hosts are resolved to ids when the VM is created or updated.
    pinned = {h.id for h in (vm.placement_policy.hosts or [])} if vm.placement_policy is not None else set()
    groups = _groups_of(store, vm)
    used = memory_in_use(store)
    left: list[types.Host] = []
    for host in hosts:
        why = None
        if pinned and host.id not in pinned:
            why = (f"The host {host.name} did not satisfy internal filter PinToHost because it is not the host the VM "
                   "is pinned to.")
        elif need_cpu > host_vcpus(host):
            why = (f"The host {host.name} did not satisfy internal filter CPU because it does not have enough "
                   f"cores to run the VM.")
        elif free_memory(store, host, used) < need_mem:
            why = (f"The host {host.name} did not satisfy internal filter Memory because its available memory is "
                   f"too low ({free_memory(store, host, used) // MiB} MB) to run the VM.")
        else:
            why = _affinity_violation(store, vm, host, groups)
        if why:
            reasons.append(why)
        else:
            left.append(host)
    if not left:
        raise conflict(Msg.SCHEDULING_FILTERED, *reasons)
    return max(left, key=lambda h: (free_memory(store, h, used), h.name))


def _affinity_violation(store: Store, vm: types.Vm, host: types.Host,
                        groups: list[types.AffinityGroup]) -> str | None:
    for group in groups:
        enabled, enforcing, positive = _rule(group, "vms")
        if enabled and enforcing:
            others = {store.vm_runtime(m.id).host_id for m in (group.vms or []) if m.id != vm.id
                      and store.vms.get(m.id) is not None and store.vms.get(m.id).status in RUNNING}
            others.discard(None)
            if not positive and host.id in others:
                return (f"The host {host.name} did not satisfy internal filter VmAffinityGroups because it "
                        f"matched negative affinity rules {group.name}.")
            if positive and others and host.id not in others:
                return (f"The host {host.name} did not satisfy internal filter VmAffinityGroups because it "
                        f"did not match positive affinity rules {group.name}.")
        h_enabled, h_enforcing, h_positive = _rule(group, "hosts")
        members = {h.id for h in (group.hosts or [])}
        if h_enabled and h_enforcing and members:
            if h_positive and host.id not in members or not h_positive and host.id in members:
                return (f"The host {host.name} did not satisfy internal filter VmToHostsAffinityGroups because it "
                        f"did not match the host affinity rules of {group.name}.")
    return None
