"""A cluster's VM list, read straight from the engine's XML into the few fields the actuator reads (`ListedVm`).

The SDK's reader builds a full `types.Vm` for each VM of the answer, with every attribute of the type and its
followed links, in Python: at a thousand VMs that is the largest CPU cost of the controller while Machines are
being created (docs/benchmarks.md#figures-behind-the-codes-choices), and the list is taken again and again while
Machines wait on their VMs (cluster_vm_lists.py). Here expat (C) builds one VM's elements at a time, the
few values wanted are picked with `find`, and the VM's elements are dropped before the next one is read, so the
memory of a list stays that of one VM. Values are converted as the SDK's `Reader` converts them (an unknown enum
value is None, a boolean is true/false/1/0), and a list that is only linked (`<link rel="tags">`, not followed) is
an empty tuple, as the SDK makes it an empty list: the records are the same whichever reader made them
(test/unit/ovirt/test_vm_list_reader.py compares them with the SDK's on the simulator).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import ovirtsdk4.types as types

E = TypeVar("E", bound=Enum)


@dataclass(frozen=True, slots=True)
class ListedIp:
    address: str | None


@dataclass(frozen=True, slots=True)
class ListedDevice:
    name: str | None
    type: types.ReportedDeviceType | None
    ips: tuple[ListedIp, ...]


@dataclass(frozen=True, slots=True)
class ListedTag:
    name: str | None


@dataclass(frozen=True, slots=True)
class ListedDisk:
    id: str | None
    status: types.DiskStatus | None
    provisioned_size: int | None


@dataclass(frozen=True, slots=True)
class ListedAttachment:
    id: str | None
    bootable: bool | None
    disk: ListedDisk | None


@dataclass(frozen=True, slots=True)
class ListedVm:
    """What the actuator reads of a VM in its cluster's list, under the SDK's names (it reads a VM asked for on
    its own, a `types.Vm`, the same way), and nothing else: an SDK object has a slot for every attribute of its
    type (a `types.Vm` with only these set still weighs about 6 KiB, this about 0.7 KiB), and a list holds
    the whole cluster."""

    id: str | None
    name: str | None
    status: types.VmStatus | None
    tags: tuple[ListedTag, ...] | None
    reported_devices: tuple[ListedDevice, ...] | None
    disk_attachments: tuple[ListedAttachment, ...] | None
    # The mark of the VM's owner, when its actuator requires one (owner_mark.py).
    comment: str | None = None


class VmListReader:
    """Reads a `GET /vms` answer (`<vms><vm>...</vm>...</vms>`) piece by piece as it arrives (`feed`, from
    streaming_get.py); `close` gives its VMs, in order.

    Only the ends of elements are asked of the parser (the starts would double the events this loop goes through,
    for a depth that would only tell a VM of the list from a `<vm>` inside one): a VM of the list has child
    elements (its name, its status...), a VM that one only links to (a disk attachment's, a reported device's) is
    an empty `<vm href=... id=.../>`, as the engine renders every link that is not followed, and the list follows
    no VM.
    The events of a piece are read before the next piece is parsed, so a VM's elements are dropped before the next
    one is built: expat (C) holds at most a piece and a VM."""

    def __init__(self) -> None:
        self._parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("end",))
        self._vms: list[ListedVm] = []

    def feed(self, piece: bytes) -> None:
        self._parser.feed(piece)
        self._read_events()

    def close(self) -> list[ListedVm]:
        self._parser.close()
        self._read_events()
        return self._vms

    def _read_events(self) -> None:
        for event in self._parser.read_events():
            # Only "end" events are asked for: each is (event, Element).
            elem = event[-1]
            if isinstance(elem, ET.Element) and elem.tag == "vm" and len(elem):
                self._vms.append(_vm(elem))
                elem.clear()  # its elements are dropped before the next VM is read


def _vm(e: ET.Element) -> ListedVm:
    tags = _many(e, "tags", "tag", "tags")
    devices = _many(e, "reported_devices", "reported_device", "reporteddevices")
    attachments = _many(e, "disk_attachments", "disk_attachment", "diskattachments")
    return ListedVm(
        id=e.get("id"), name=e.findtext("name"), status=_enum(types.VmStatus, e.findtext("status")),
        tags=None if tags is None else tuple(ListedTag(t.findtext("name")) for t in tags),
        reported_devices=None if devices is None else tuple(
            ListedDevice(d.findtext("name"), _enum(types.ReportedDeviceType, d.findtext("type")),
                         tuple(ListedIp(ip.findtext("address")) for ip in d.iterfind("ips/ip")))
            for d in devices),
        disk_attachments=None if attachments is None else tuple(
            ListedAttachment(a.get("id"), _boolean(a.findtext("bootable")), _disk(a.find("disk")))
            for a in attachments),
        comment=e.findtext("comment"),
    )


def _many(e: ET.Element, outer: str, inner: str, rel: str) -> list[ET.Element] | None:
    """The followed list's elements; [] when it is only linked (the SDK's empty list); None when neither. A VM's links
    (7 in the simulator's XML, more in an engine's) are only looked through for a list that is not followed, which
    the actuator's lists are not."""
    found = e.find(outer)
    if found is not None:
        return found.findall(inner)
    linked = any(link.get("rel") == rel and link.get("href") for link in e.iterfind("link"))
    return [] if linked else None


def _disk(e: ET.Element | None) -> ListedDisk | None:
    if e is None:
        return None
    size = e.findtext("provisioned_size")
    return ListedDisk(e.get("id"), _enum(types.DiskStatus, e.findtext("status")), None if size is None else int(size))


def _enum(enum_type: type[E], text: str | None) -> E | None:
    if text is None:
        return None
    try:
        return enum_type(text)
    except ValueError:
        return None


def _boolean(text: str | None) -> bool | None:
    if text is None:
        return None
    lowered = text.lower()
    if lowered in ("false", "0"):
        return False
    if lowered in ("true", "1"):
        return True
    raise ValueError(f"The text {text!r} isn't a valid boolean value")
