"""Request parsing and response rendering with the SDK's own readers and writers (ref ovirt-api 13.2).

The SDK's `Reader.read` picks the type from the root tag, exactly as the client does, and `Writer.write` renders
the model's element names. The writer never emits `<link rel>` elements (13.2 caveat b), so the sub-collections of
an entity are injected here as `<link rel="..." href="..."/>`, the form real engines send and every client's reader
(`XxxReader._process_link`) turns into a followable list.
"""

from __future__ import annotations

from typing import Any, Iterable

import ovirtsdk4  # noqa: F401  (importing the package registers every reader and writer)
from ovirtsdk4 import types
from ovirtsdk4.reader import Reader
from ovirtsdk4.writer import Writer

from hack.ovirtsim.errors import ApiError

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'

# Sub-collections the simulator serves, by entity type: these become `<link rel>` elements. Rel names are the
# lower-case path segments of the model (ref ovirt-api 4, `VmReader._process_link`).
SUBCOLLECTIONS: dict[type, tuple[str, ...]] = {
    types.Vm: ("cdroms", "diskattachments", "graphicsconsoles", "nics", "numanodes", "permissions", "reporteddevices",
               "snapshots", "tags", "watchdogs"),
    types.Template: ("diskattachments", "graphicsconsoles", "nics"),
    types.Cluster: ("affinitygroups",),
    types.Nic: ("reporteddevices",),
    types.Job: ("steps",),
    types.StorageDomain: ("disks",),
    types.Network: ("vnicprofiles",),
}


def parse(body: bytes, expected: type | None = None) -> Any:
    """Parse a request body with the SDK's generic reader; a wrong root tag is the engine's 400."""
    if not body.strip():
        if expected is None:
            return None
        raise ApiError(400, "Incomplete parameters", f"{expected.__name__} required")
    try:
        obj = Reader.read(body)
    except Exception as exc:  # the C reader raises plain Errors for malformed XML
        raise ApiError(400, "Operation Failed", f"Failed to parse the request body: {exc}") from exc
    if expected is not None and not isinstance(obj, expected):
        raise ApiError(400, "Operation Failed",
                       f"Expected a {expected.__name__} but got {type(obj).__name__}")
    return obj


def _links(obj: Any, skip: Iterable[str]) -> str:
    rels = SUBCOLLECTIONS.get(type(obj), ())
    href = getattr(obj, "href", None)
    if not rels or href is None:
        return ""
    skipped = set(skip)
    return "".join(f'<link href="{href}/{rel}" rel="{rel}"/>' for rel in rels if rel not in skipped)


def entity_xml(obj: Any, skip_links: Iterable[str] = (), root: str | None = None) -> str:
    """One entity, without XML declaration, with its `<link>`s injected before the closing tag."""
    text = Writer.write(obj, root=root)
    links = _links(obj, skip_links)
    if not links:
        return text
    if text.endswith("/>"):  # an entity with no child element at all
        start = text[1:].split(" ", 1)[0].split("/", 1)[0]
        return f"{text[:-2]}>{links}</{start}>"
    close = text.rindex("</")
    return text[:close] + links + text[close:]


def render(obj: Any, skip_links: Iterable[str] = ()) -> str:
    return XML_DECLARATION + entity_xml(obj, skip_links)


def render_list(objs: Iterable[Any], root: str, skip_links: Iterable[str] = ()) -> str:
    skip = tuple(skip_links)
    items = "".join(entity_xml(o, skip) for o in objs)
    return XML_DECLARATION + (f"<{root}>{items}</{root}>" if items else f"<{root}/>")


def render_action(action: types.Action | None = None, status: str = "complete",
                  job: types.Job | None = None) -> str:
    """The engine echoes the request's action with `status` set (ref ovirt-api 6.1)."""
    reply = action if action is not None else types.Action()
    reply.status = status
    reply.fault = None
    if job is not None:
        reply.job = job
    return XML_DECLARATION + Writer.write(reply)


def render_fault(error: ApiError, as_action: bool = False, action: types.Action | None = None) -> str:
    """Collection add, PUT and DELETE failures are a bare `<fault>`; actions wrap it in `<action>` (2.2)."""
    fault = types.Fault(reason=error.reason, detail=error.detail)
    if as_action:
        reply = action if action is not None else types.Action()
        reply.fault = fault
        reply.status = "failed"
        return XML_DECLARATION + Writer.write(reply)
    return XML_DECLARATION + Writer.write(fault)


def write_table(objs: list[Any], root: str) -> str:
    """Persistence: a whole table as one SDK collection document (read back with `read_table`)."""
    return Writer.write(objs, root=root)


def read_table(text: str) -> list[Any]:
    objs = Reader.read(text)
    return list(objs) if objs is not None else []
