"""The state file: the engine's database on disk, so a restarted engine keeps every VM, disk and group.

Format (JSON): each table as one SDK collection document written by the SDK's own writer and read back by its
reader (a round trip through the client's code), plus the runtime facts and the timeline as plain JSON. Writes go
to a temporary file renamed over the old one, so a killed simulator leaves either the old or the new state.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.ovirtsim import xmlio
from hack.ovirtsim.store import TABLES, Counters, RuntimeState, StorageRuntime, Store, Transition, VmRuntime

FORMAT = 1


def snapshot(store: Store, request_counts: dict[str, int] | None = None) -> dict[str, Any]:
    """Serialize under the store lock (cheap), so the file write can happen outside it. The request counters are
    test instrumentation, not engine data, but they ride along so a restarted simulator keeps counting."""
    rt = store.runtime
    return {
        "request_counts": request_counts or {},
        "format": FORMAT,
        "saved_at": time.time(),
        "tables": {name: xmlio.write_table(list(store.tables[name].all()), spec.root)
                   for name, spec in TABLES.items()},
        "runtime": dataclasses.asdict(rt),
        "timeline": [dataclasses.asdict(t) for t in store.timeline],
    }


def write(path: str | Path, data: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def load(path: str | Path, store: Store) -> dict[str, int] | None:
    """Fill `store` from the file and return the saved request counters; None if there is no file."""
    path = Path(path)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: unsupported state format {data.get('format')!r}")
    for table in store.tables.values():
        table.clear()
    for name, text in data["tables"].items():
        for obj in xmlio.read_table(text):
            store.tables[name].put(obj)
    rt = data["runtime"]
    store.runtime = RuntimeState(
        vms={k: VmRuntime(**v) for k, v in rt["vms"].items()},
        storage={k: StorageRuntime(**v) for k, v in rt["storage"].items()},
        nic_ips=dict(rt["nic_ips"]),
        vm_tags={k: list(v) for k, v in rt["vm_tags"].items()},
        job_correlation=dict(rt.get("job_correlation", {})),
        counters=Counters(**rt["counters"]),
    )
    store.timeline = sorted(Transition(**t) for t in data["timeline"])
    store.dirty = False
    return dict(data.get("request_counts", {}))
