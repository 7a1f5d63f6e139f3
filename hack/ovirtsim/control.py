"""The control API for tests: JSON over plain HTTP on its own port, outside the oVirt API path.

    GET    /health                       liveness and uptime
    GET    /counts   DELETE /counts      request counters by "METHOD template" / reset them
    GET    /faults   POST /faults        list / add a fault rule (see `faults.FaultRule` for the fields)
    DELETE /faults   DELETE /faults/{id} remove all / one rule
    POST   /tokens/expire                every SSO token becomes unknown (clients get 401 and log in again)
    GET    /vms      GET /vms/{id}       what the engine and the guest know of VMs (status, host, IPs, Node, disks)
    POST   /vms/{id}/crash               the qemu process dies: `down` at once, the guest goes silent
    POST   /vms/{id}/pause               the VM pauses itself (e.g. EIO): `paused`
    POST   /storagedomains/{id|name}/fill {"free_bytes": N}  leave only N bytes free
    POST   /hosts/{id|name}/status       {"status": "non_responsive"}: its VMs go `unknown`; "up": back `up`;
                                         "down" (or any other): its VMs go `down` (rebooted/fenced host)
    POST   /hosts                        {"name": ..., "cores": ..., "memory": ...} add a host to the cluster
    GET    /timings  POST /timings       read / override the timing profile at run time
    POST   /restart                      restart the engine process state: state file reloaded, tokens gone
    GET    /real-guests  POST /real-guests  {"plane": dir, "images": [archive, ...], "templates": [id|name, ...],
                                         "vms": [name pattern, ...]}: guests of those templates, and of VMs so
                                         named, run as real nodes of that local control plane
                                         (real_guests.py; needs --kubeconfig)
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Protocol

from ovirtsdk4 import types

from hack.ovirtsim import guest, statemachine
from hack.ovirtsim.engine import Engine
from hack.ovirtsim.faults import FaultRule
from hack.ovirtsim.resources.disks import occupy
from hack.ovirtsim.seed import add_host
from hack.ovirtsim.store import Store

Reply = tuple[int, Any]


class SimulatorView(Protocol):
    """What the control API needs of the simulator serving it (server.Simulator, which imports this module to
    serve it): the engine it drives, and how clients reach the simulator."""

    engine: Engine

    def describe(self) -> dict[str, Any]: ...


class ControlApi:
    def __init__(self, sim: SimulatorView) -> None:
        self.sim = sim

    @property
    def engine(self) -> Engine:
        return self.sim.engine

    def handle(self, method: str, path: str, query: dict[str, str], body: bytes) -> Reply:
        parts = [p for p in path.split("/") if p]
        try:
            data = json.loads(body) if body.strip() else {}
        except ValueError as exc:
            return 400, {"error": f"invalid JSON: {exc}"}
        try:
            return self._route(method, parts, data)
        except (KeyError, ValueError, TypeError) as exc:
            return 400, {"error": str(exc)}

    def _route(self, method: str, parts: list[str], data: dict[str, Any]) -> Reply:
        e = self.engine
        match (method, parts):
            case ("GET", ["health"]):
                return 200, {"ok": True, "uptime": time.time() - e.started_at, **self.sim.describe()}
            case ("GET", ["counts"]):
                return 200, {"counts": e.counters.snapshot()}
            case ("DELETE", ["counts"]):
                e.counters.reset()
                return 200, {}
            case ("GET", ["faults"]):
                return 200, {"faults": [r.to_json() for r in e.faults.rules()]}
            case ("POST", ["faults"]):
                return 201, e.faults.add(FaultRule.from_json(data)).to_json()
            case ("DELETE", ["faults"]):
                e.faults.clear()
                return 200, {}
            case ("DELETE", ["faults", rule_id]):
                e.faults.clear(int(rule_id))
                return 200, {}
            case ("POST", ["tokens", "expire"]):
                return 200, {"expired": e.tokens.expire_all()}
            case ("GET", ["vms"]):
                with e.store.lock:
                    e.tick()
                    return 200, {"vms": [self._vm(vm) for vm in e.store.vms.all()]}
            case ("GET", ["vms", vm_id]):
                with e.store.lock:
                    e.tick()
                    vm = e.store.vms.get(vm_id)
                    return (200, self._vm(vm, detail=True)) if vm else (404, {"error": "no such VM"})
            case ("POST", ["vms", vm_id, verb]) if verb in ("crash", "pause"):
                with e.store.lock:
                    vm = e.store.vms.get(vm_id)
                    if vm is None:
                        return 404, {"error": "no such VM"}
                    (statemachine.crash if verb == "crash" else statemachine.pause)(e.store, vm)
                    return 200, self._vm(vm)
            case ("POST", ["storagedomains", key, "fill"]):
                with e.store.lock:
                    sd = self._find(e.store, "storage_domains", key)
                    free = int(data.get("free_bytes", 0))
                    occupy(e.store, sd.id, (sd.available or 0) - free)
                    e.store.dirty = True
                    return 200, {"id": sd.id, "available": sd.available, "used": sd.used}
            case ("POST", ["hosts", key, "status"]):
                with e.store.lock:
                    return 200, self._host_status(e.store, self._find(e.store, "hosts", key), data["status"])
            case ("POST", ["hosts"]):
                with e.store.lock:
                    cluster = next(iter(e.store.clusters.all()))
                    ref = types.Cluster(id=cluster.id)
                    ref.href = cluster.href
                    host = add_host(e.store, data["name"], ref, sockets=int(data.get("sockets", 2)),
                                    cores=int(data.get("cores", 8)), threads=int(data.get("threads", 2)),
                                    memory=int(data.get("memory", 128 * 1024 ** 3)))
                    e.store.dirty = True
                    return 201, {"id": host.id, "name": host.name}
            case ("GET", ["timings"]):
                return 200, dataclasses.asdict(e.timings)
            case ("POST", ["timings"]):
                e.timings = e.timings.with_overrides(data)
                e.tokens.ttl = e.timings.token_ttl
                return 200, dataclasses.asdict(e.timings)
            case ("GET", ["real-guests"]) if e.node_agent:
                return 200, e.node_agent.real.describe()
            case ("POST", ["real-guests"]) if e.node_agent:
                with e.store.lock:
                    templates = frozenset(self._find(e.store, "templates", t).id for t in data.get("templates", ()))
                e.node_agent.real.configure(Path(data["plane"]), tuple(Path(i) for i in data.get("images", ())),
                                            templates, tuple(str(p) for p in data.get("vms", ())))
                return 200, e.node_agent.real.describe()
            case ("POST", ["restart"]):
                e.restart()
                return 200, {"restarted": True}
        return 404, {"error": f"no control endpoint {method} /{'/'.join(parts)}"}

    @staticmethod
    def _find(store: Store, table: str, key: str) -> Any:
        obj = store.tables[table].get(key) or store.find_by_name(table, key)
        if obj is None:
            raise KeyError(f"no {table} {key!r}")
        return obj

    def _host_status(self, store: Store, host: types.Host, status: str) -> dict[str, Any]:
        """What the engine shows when a host changes state (docs/compatibility.md#vm-states): while it does not respond
        its VMs are `unknown` and their guests are cut off (Nodes go silent); when it responds again they are back `up`;
        a host that went `down` (rebooted, fenced) took its VMs down with it."""
        host.status = types.HostStatus(status)
        affected = []
        for vm in store.vms.all():
            rt = store.vm_runtime(vm.id)
            if rt.host_id != host.id:
                continue
            if host.status in (types.HostStatus.NON_RESPONSIVE, types.HostStatus.CONNECTING) \
                    and vm.status in statemachine.RUNNING | {types.VmStatus.PAUSED}:
                statemachine.lose_contact(store, vm)
            elif host.status is types.HostStatus.UP and vm.status is types.VmStatus.UNKNOWN:
                statemachine.regain_contact(store, vm, time.time())
            elif host.status not in (types.HostStatus.UP, types.HostStatus.NON_RESPONSIVE,
                                     types.HostStatus.CONNECTING):
                statemachine.crash(store, vm, reason="host down")
            else:
                continue
            affected.append(vm.id)
        store.dirty = True
        return {"id": host.id, "status": host.status.value, "vms": affected}

    def _vm(self, vm: types.Vm, detail: bool = False) -> dict[str, Any]:
        store = self.engine.store
        rt = store.vm_runtime(vm.id)
        host = store.hosts.get(rt.host_id) if rt.host_id else None
        out: dict[str, Any] = {
            "id": vm.id, "name": vm.name, "status": vm.status.value if vm.status else None,
            "host": host.name if host else None, "host_name": guest.host_name(vm),
            "ips": [ip.address for d in guest.reported_devices(store, vm) for ip in d.ips],
            "node_name": rt.node_name, "provisioned": rt.provisioned, "crashed": rt.crashed,
            "node_error": self.engine.node_agent.error_of(rt.node_name) if self.engine.node_agent and rt.node_name
            else None,
        }
        if detail:
            out["init_mode"] = rt.init_mode
            out["ignition_valid"] = guest.ignition_valid(rt.init_payload) if rt.init_payload else None
            out["block_devices"] = [dataclasses.asdict(d) for d in guest.block_devices(store, vm)]
            out["disk_attachments"] = [da.id for da in store.vm_disk_attachments.children(vm.id)]
            out["affinity_groups"] = [g.name for g in store.affinity_groups.all()
                                      if any(m.id == vm.id for m in (g.vms or []))]
            out["tags"] = [t.name for t in (store.tags.get(i) for i in store.runtime.vm_tags.get(vm.id, [])) if t]
        return out
