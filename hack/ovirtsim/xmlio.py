"""Request parsing and response rendering with the SDK's own readers and writers (docs/compatibility.md#simulator).

The SDK's `Reader.read` picks the type from the root tag, exactly as the client does. Responses are written by
the SDK's generated per-type writers (`VmWriter.write_one`, ... registered in `Writer._writers`), so element names
and value rendering are the model's; but they write into `_TextCursor`, a pure-Python stand-in for the C
`ovirtsdk4.xml.XmlWriter`, because that C writer leaks memory in proportion to every document it produces
(docs/benchmarks.md#figures-behind-the-codes-choices), which a long-running simulator listing 1000 VMs cannot
afford.

The writers never emit `<link rel>` elements (13.2 caveat b), so the sub-collections of an entity are injected here
as `<link rel="..." href="..."/>`, the form real engines send and every client's reader (`XxxReader._process_link`)
turns into a followable list.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import ovirtsdk4  # noqa: F401  (importing the package registers every reader and writer)
from ovirtsdk4 import types
from ovirtsdk4.reader import Reader
from ovirtsdk4.writer import Writer

from hack.ovirtsim import always_sent
from hack.ovirtsim.errors import ApiError

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'

# Sub-collections the simulator serves, by entity type: these become `<link rel>` elements. Rel names are the
# lower-case path segments of the model (docs/compatibility.md#listing-and-search).
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


class _TextCursor:
    """The four methods the generated writers call on an `XmlWriter`, building a string."""

    __slots__ = ("_parts", "_stack", "_open")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._stack: list[str] = []
        self._open = False

    def _close_start(self) -> None:
        if self._open:
            self._parts.append(">")
            self._open = False

    def write_start(self, name: str) -> None:
        self._close_start()
        self._parts.append("<" + name)
        self._stack.append(name)
        self._open = True

    def write_attribute(self, name: str, value: str) -> None:
        self._parts.append(f' {name}="{_escape_attr(value)}"')

    def write_element(self, name: str, value: str) -> None:
        self._close_start()
        self._parts.append(f"<{name}>{_escape_text(value)}</{name}>")

    def write_end(self) -> None:
        name = self._stack.pop()
        if self._open:
            self._parts.append("/>")
            self._open = False
        else:
            self._parts.append(f"</{name}>")

    def string(self) -> str:
        return "".join(self._parts)


_NEEDS_ESCAPE = re.compile(r'[&<>"\r]')


def _escape_text(value: str) -> str:
    # The same entities libxml2's writer (the SDK's C writer) emits, so documents are byte-identical.
    if _NEEDS_ESCAPE.search(value) is None:
        return value
    return (value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("\r", "&#13;"))


_escape_attr = _escape_text


def write(obj: Any, root: str | None = None) -> str:
    """Like `Writer.write`, with the SDK's generated writers and a non-leaking cursor."""
    cursor = _TextCursor()
    if isinstance(obj, list):
        if root is None:
            raise ValueError("root is required for lists")
        cursor.write_start(root)
        for item in obj:
            Writer._writers[type(item)](item, cursor, None)
        cursor.write_end()
    else:
        Writer._writers[type(obj)](obj, cursor, root)
    return cursor.string()


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
    """One entity, without XML declaration, with its `<link>`s injected before the closing tag and every element
    the engine always sends (`always_sent`)."""
    text = write(always_sent.complete(obj), root=root)
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
    """The engine echoes the request's action with `status` set (docs/compatibility.md#vm-states)."""
    reply = action if action is not None else types.Action()
    reply.status = status
    reply.fault = None
    if job is not None:
        reply.job = job
    return XML_DECLARATION + write(reply)


def render_fault(error: ApiError, as_action: bool = False, action: types.Action | None = None) -> str:
    """Collection add, PUT and DELETE failures are a bare `<fault>`; actions wrap it in `<action>` (2.2)."""
    fault = types.Fault(reason=error.reason, detail=error.detail)
    if as_action:
        reply = action if action is not None else types.Action()
        reply.fault = fault
        reply.status = "failed"
        return XML_DECLARATION + write(reply)
    return XML_DECLARATION + write(fault)


def write_table(objs: list[Any], root: str) -> str:
    """Persistence: a whole table as one SDK collection document (read back with `read_table`)."""
    return write(objs, root=root)


def read_table(text: str) -> list[Any]:
    objs = Reader.read(text)
    return list(objs) if objs is not None else []
