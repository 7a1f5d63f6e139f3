"""Helpers every collection handler shares: lookups, references, listing with search/max/follow, replies."""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

from ovirtsdk4 import types

from hack.ovirtsim import search, xmlio
from hack.ovirtsim.errors import ApiError, entity_not_found, not_found
from hack.ovirtsim.router import ApiRequest, ApiResponse, EngineView
from hack.ovirtsim.store import Store, Table, href

# The view of a row as rendered: (row, follow paths) -> object to write.
Presenter = Callable[[Any, list[str]], Any]

# Collection path segment of each entity type (for hrefs of references).
SEGMENT: dict[type, str] = {
    types.Vm: "vms", types.Template: "templates", types.Cluster: "clusters", types.DataCenter: "datacenters",
    types.Host: "hosts", types.StorageDomain: "storagedomains", types.Disk: "disks", types.Network: "networks",
    types.VnicProfile: "vnicprofiles", types.Tag: "tags", types.Job: "jobs", types.InstanceType: "instancetypes",
}


def ref(obj: Any) -> Any:
    """An engine reference: an empty element with id and href (`<cluster href="..." id="..."/>`)."""
    r = type(obj)(id=obj.id)
    r.href = obj.href
    return r


def ref_to(cls: type, id_: str) -> Any:
    r = cls(id=id_)
    r.href = href(SEGMENT[cls], id_)
    return r


def get_or_404(table: Table, id_: str, parent: str = "") -> Any:
    obj = table.get(id_, parent)
    if obj is None:
        raise not_found()
    return obj


def vm_or_404(engine: EngineView, req: ApiRequest) -> types.Vm:
    """The VM a `/vms/{vm}/...` path names (vms.py and vm_devices.py both serve such paths)."""
    return get_or_404(engine.store.vms, req.params["vm"])


def resolve(store: Store, table: str, cls_name: str, given: Any, parent: str = "") -> Any:
    """A reference inside a request body, by id or name; unknown -> 404 `Entity not found: Cluster: name=x`."""
    if given is None:
        return None
    if given.id:
        obj = store.tables[table].get(given.id, parent)
        if obj is None:
            raise entity_not_found(cls_name, f"id={given.id}")
        return obj
    if getattr(given, "name", None):
        obj = store.find_by_name(table, given.name, parent)
        if obj is None:
            raise entity_not_found(cls_name, f"name={given.name}")
        return obj
    return None


def listing(engine: EngineView, req: ApiRequest, objs: Iterable[Any], root: str,
            fields: dict[str, search.FieldGetter] | None = None,
            present: Presenter | None = None) -> ApiResponse:
    """`GET` of a collection: `search` (if the collection supports it), `max`, then `present` (the view of each
    row as rendered, with the `follow` paths inlined)."""
    items = list(objs)
    if fields is not None and req.query.get("search"):
        items = search.apply(items, req.query["search"], fields, req.flag("case_sensitive", False))
    limit = req.int_param("max")
    if limit is not None and limit >= 0:
        items = items[:limit]
    paths = follow_paths(req)
    if present is not None:
        items = [present(obj, paths) for obj in items]
    return ApiResponse.xml(xmlio.render_list(items, root, skip_links=_top_rels(paths)))


def entity(obj: Any, req: ApiRequest | None = None, present: Presenter | None = None,
           status: int = 200, location: bool = False) -> ApiResponse:
    paths = follow_paths(req) if req is not None else []
    if present is not None:
        obj = present(obj, paths)
    return ApiResponse.xml(xmlio.render(obj, skip_links=_top_rels(paths)), status,
                           location=obj.href if location else None)


def follow_paths(req: ApiRequest) -> list[str]:
    """`follow=disk_attachments.disk,nics`: the linked collections to inline
    (docs/compatibility.md#listing-and-search)."""
    raw = req.query.get("follow", "")
    return [p.strip() for p in raw.split(",") if p.strip()]


def _top_rels(paths: list[str]) -> list[str]:
    return [p.split(".")[0].replace("_", "") for p in paths]


def sub_paths(paths: list[str], head: str) -> list[str]:
    return [p.split(".", 1)[1] for p in paths if p.startswith(head + ".")]


def wants(paths: list[str], head: str) -> bool:
    return any(p == head or p.startswith(head + ".") for p in paths)


def shallow(obj: Any) -> Any:
    return copy.copy(obj)


def action_done(job: types.Job | None = None, action: types.Action | None = None) -> ApiResponse:
    return ApiResponse.xml(xmlio.render_action(action, "complete", ref(job) if job else None))


def removed() -> ApiResponse:
    """DELETE succeeds with 200 and `<action><status>complete</status></action>`, never 204
    (docs/compatibility.md#simulator)."""
    return ApiResponse.xml(xmlio.render_action(None, "complete"))


def merge(target: Any, patch: Any, skip: Iterable[str] = ("_href", "_id")) -> None:
    """PUT semantics: every attribute the client sent replaces the stored one."""
    skipped = set(skip)
    for key, value in vars(patch).items():
        if key in skipped or value is None:
            continue
        setattr(target, key, value)


def require(value: Any, entity_name: str, fields: str, operation: str = "add") -> None:
    if value is None or value == "":
        raise ApiError(400, "Incomplete parameters", f"{entity_name} [{fields}] required for {operation}")
