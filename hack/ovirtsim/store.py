"""The engine's database: tables of SDK model objects, the simulator's runtime facts, and the timeline.

Entities are kept as the SDK's own model objects (`types.Vm`, `types.Disk`, ...): whatever a client sent is echoed
back as the engine would, and persistence is a round trip through the SDK's writer and reader. Facts the API never
shows (which host runs a VM, when its guest agent starts, ...) live in small runtime dataclasses. Every delayed
status change (image_locked -> down, locked -> ok, ...) is a `Transition` on one timeline, with absolute wall-clock
due times, so a restarted engine resumes where it stopped.
"""

from __future__ import annotations

import heapq
import threading
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterator

from hack.ovirtsim.config import API_PREFIX


def new_id() -> str:
    return str(uuid.uuid4())


def href(*segments: str) -> str:
    return API_PREFIX + "/" + "/".join(segments)


@dataclass(frozen=True)
class TableSpec:
    root: str  # the SDK collection tag, used for persistence
    parent_attr: str | None  # sub-collections are keyed by the id of this reference (vm, template, cluster)


TABLES: dict[str, TableSpec] = {
    "data_centers": TableSpec("data_centers", None),
    "clusters": TableSpec("clusters", None),
    "hosts": TableSpec("hosts", None),
    "storage_domains": TableSpec("storage_domains", None),
    "networks": TableSpec("networks", None),
    "vnic_profiles": TableSpec("vnic_profiles", None),
    "instance_types": TableSpec("instance_types", None),
    "templates": TableSpec("templates", None),
    "template_disk_attachments": TableSpec("disk_attachments", "template"),
    "template_nics": TableSpec("nics", "template"),
    "template_consoles": TableSpec("graphics_consoles", "template"),
    "vms": TableSpec("vms", None),
    "vm_disk_attachments": TableSpec("disk_attachments", "vm"),
    "vm_nics": TableSpec("nics", "vm"),
    "vm_consoles": TableSpec("graphics_consoles", "vm"),
    "disks": TableSpec("disks", None),
    "affinity_groups": TableSpec("affinity_groups", "cluster"),
    "tags": TableSpec("tags", None),
    "jobs": TableSpec("jobs", None),
}


class Table:
    """Rows by parent id (`""` for top-level collections) and id, in insertion order."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self._rows: dict[str, dict[str, Any]] = {}
        # id -> the parents holding a row of that id, in insertion order: a disk's attachments are found without
        # going through every VM's (a thousand VMs removed at once went through all of them for each).
        self._parents_of_id: dict[str, dict[str, None]] = {}

    def parent_id(self, obj: Any) -> str:
        return getattr(obj, self.spec.parent_attr).id if self.spec.parent_attr else ""

    def put(self, obj: Any) -> Any:
        parent = self.parent_id(obj)
        self._rows.setdefault(parent, {})[obj.id] = obj
        self._parents_of_id.setdefault(obj.id, {})[parent] = None
        return obj

    def get(self, id_: str, parent: str = "") -> Any | None:
        return self._rows.get(parent, {}).get(id_)

    def children(self, parent: str = "") -> list[Any]:
        return list(self._rows.get(parent, {}).values())

    def with_id(self, id_: str) -> list[Any]:
        """Every row of this id, whatever its parent (a disk's attachments to each VM)."""
        return [self._rows[parent][id_] for parent in self._parents_of_id.get(id_, ())]

    def remove(self, id_: str, parent: str = "") -> Any | None:
        rows = self._rows.get(parent)
        if not rows:
            return None
        obj = rows.pop(id_, None)
        if obj is not None:
            self._unindex(id_, parent)
        if not rows:
            del self._rows[parent]
        return obj

    def drop_parent(self, parent: str) -> list[Any]:
        rows = self._rows.pop(parent, {})
        for id_ in rows:
            self._unindex(id_, parent)
        return list(rows.values())

    def _unindex(self, id_: str, parent: str) -> None:
        parents = self._parents_of_id.get(id_)
        if parents is not None:
            parents.pop(parent, None)
            if not parents:
                del self._parents_of_id[id_]

    def all(self) -> Iterator[Any]:
        for rows in self._rows.values():
            yield from rows.values()

    def __len__(self) -> int:
        return sum(len(rows) for rows in self._rows.values())

    def clear(self) -> None:
        self._rows.clear()
        self._parents_of_id.clear()


class InitMode(str, Enum):
    """What the guest received at first boot (docs/compatibility.md#vm-states)."""

    NONE = "none"
    IGNITION = "ignition"
    CLOUD_INIT = "cloud_init"


@dataclass
class VmRuntime:
    gen: int = 0  # bumped by every lifecycle action; transitions of an older generation are stale
    host_id: str | None = None
    guest_agent_at: float | None = None  # the guest agent reports from this time on (None: not now)
    has_agent: bool = False  # this boot's guest runs an agent (an RHCOS guest only once provisioned)
    first_boot_done: bool = False
    init_mode: str = InitMode.NONE.value
    init_payload: str | None = None  # what the guest got at first boot (Ignition JSON for RHCOS)
    thin: bool = False  # created without clone: disks are overlays on the template's
    crashed: bool = False
    graceful_stop: bool = False  # the last stop was a guest shutdown (its kubelet could say goodbye)
    provisioned: bool = False  # the guest OS got a valid Ignition config once (RHCOS provisions on first boot)
    node_name: str | None = None  # the Kubernetes Node this guest registered, if any
    kubelet_provider_id: str | None = None  # the --provider-id its cloud-config gave the kubelet (cloud_config.py)


@dataclass
class StorageRuntime:
    capacity: int  # bytes; `available` = capacity - used


@dataclass
class Transition:
    due: float
    seq: int
    kind: str  # "vm" | "disk" | "job" | "disk_delete"
    target: str
    value: str = ""
    gen: int = 0

    def __lt__(self, other: "Transition") -> bool:
        return (self.due, self.seq) < (other.due, other.seq)


@dataclass
class Counters:
    ip_seq: int = 0
    mac_seq: int = 0
    seq: int = 0


@dataclass
class RuntimeState:
    vms: dict[str, VmRuntime] = field(default_factory=dict)
    storage: dict[str, StorageRuntime] = field(default_factory=dict)
    nic_ips: dict[str, str] = field(default_factory=dict)  # VM NIC id -> the IPv4 its guest gets
    vm_tags: dict[str, list[str]] = field(default_factory=dict)  # VM id -> tag ids
    # job id -> correlation id (docs/compatibility.md#correlation-ids)
    job_correlation: dict[str, str] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)


class Store:
    """All state, guarded by one re-entrant lock held for the duration of each API request."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.tables: dict[str, Table] = {name: Table(spec) for name, spec in TABLES.items()}
        self.runtime = RuntimeState()
        self.timeline: list[Transition] = []
        self.dirty = False

    def __getattr__(self, name: str) -> Table:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)

    # -- timeline -------------------------------------------------------------------------------------------
    def schedule(self, delay: float, kind: str, target: str, value: str = "", gen: int = 0) -> Transition:
        self.runtime.counters.seq += 1
        t = Transition(time.time() + delay, self.runtime.counters.seq, kind, target, value, gen)
        heapq.heappush(self.timeline, t)
        return t

    def due(self, now: float) -> Iterator[Transition]:
        while self.timeline and self.timeline[0].due <= now:
            yield heapq.heappop(self.timeline)

    # -- runtime helpers ------------------------------------------------------------------------------------
    def vm_runtime(self, vm_id: str) -> VmRuntime:
        return self.runtime.vms.setdefault(vm_id, VmRuntime())

    def next_ip(self) -> str:
        """A unique IPv4 for a guest NIC, from 10.88.0.0/16 (skipping .0 and .255 hosts)."""
        c = self.runtime.counters
        c.ip_seq += 1
        n = c.ip_seq
        return f"10.88.{(n // 250) % 256}.{n % 250 + 2}"

    def next_mac(self) -> str:
        """MACs from the engine's default pool range 56:6f:xx:xx:xx:xx."""
        c = self.runtime.counters
        c.mac_seq += 1
        n = c.mac_seq
        return "56:6f:{:02x}:{:02x}:{:02x}:{:02x}".format((n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255)

    def find_by_name(self, table: str, name: str, parent: str = "") -> Any | None:
        for obj in self.tables[table].children(parent):
            if obj.name == name:
                return obj
        return None
