"""A stand-in for the engine's services that records every request the disk layer (machine_controller/storage/
disks.py) would send: the ids it puts into URL paths, the searches, the disks it creates or grows. The properties
check what would be sent, which the simulator would only answer; nothing here judges a request, so a malformed one
is recorded as it is, not refused."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import ovirtsdk4.types as types

from api.ids import is_ovirt_id
from machine_controller.ovirt import search
from machine_controller.ovirt.errors import NotFoundError
from machine_controller.storage.disks import GIB

INT64_MAX = 2**63 - 1


@dataclass
class Requests:
    path_ids: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    disks: dict[str, types.Disk] = field(default_factory=dict)  # made through this stand-in, by id

    def well_formed(self) -> None:
        """Every id in a path an engine UUID, every search `name="<literal>"`, every size an int64."""
        assert all(is_ovirt_id(i) for i in self.path_ids), self.path_ids
        for query in self.searches:
            field_, _, value = query.partition("=")
            assert field_ == "name" and value.startswith('"') and value.endswith('"'), query
            assert search.quote(value[1:-1]) == value, query
        assert all(0 < size <= INT64_MAX for size in self.sizes), self.sizes


def _ok_disk(disk_id: str, size: int = GIB, name: str = "d", description: str | None = None) -> types.Disk:
    return types.Disk(id=disk_id, name=name, alias=name, provisioned_size=size, status=types.DiskStatus.OK,
                      description=description)


class _Service:
    """Any service: what the disk layer calls on it, recorded. A disk made here is found by its name and id; any
    other id is a disk of 1 GiB, ok; no VM is listed, no attachment exists; every storage domain searched for
    exists."""

    def __init__(self, requests: Requests, disk_id: str | None = None):
        self.r, self.disk_id = requests, disk_id

    def _path(self, value: str) -> _Service:
        self.r.path_ids.append(value)
        return _Service(self.r, value)

    disk_service = vm_service = _path

    def disks_service(self) -> _Service:
        return self

    vms_service = disks_service

    def storage_domains_service(self) -> _Service:
        return _Domains(self.r)

    def disk_attachments_service(self) -> _Service:
        return _Attachments(self.r)

    def list(self, search: str | None = None, follow: str | None = None) -> list:
        if search is None:
            return []
        self.r.searches.append(search)
        return [d for d in self.r.disks.values() if search == f'name="{d.name}"']

    def get(self) -> types.Disk:
        return self.r.disks.get(self.disk_id) or _ok_disk(self.disk_id)

    def add(self, disk: types.Disk, query=None) -> types.Disk:
        self.r.sizes.append(disk.provisioned_size)
        made = _ok_disk(str(uuid.uuid4()), disk.provisioned_size, disk.name, disk.description)
        self.r.disks[made.id] = made
        return made

    def update(self, disk: types.Disk, **_) -> types.Disk:
        current = self.r.disks.get(self.disk_id) or _ok_disk(self.disk_id)
        if disk.provisioned_size is not None:
            self.r.sizes.append(disk.provisioned_size)
            current.provisioned_size = disk.provisioned_size
        if disk.description is not None:
            current.description = disk.description
        self.r.disks[self.disk_id] = current
        return current

    def remove(self, **_) -> None:
        self.r.disks.pop(self.disk_id, None)


class _Domains(_Service):
    def list(self, search: str | None = None, follow: str | None = None) -> list:
        super().list(search)
        name = (search or "")[len('name="'):-1]
        return [types.StorageDomain(id=str(uuid.uuid4()), name=name)] if search else []


class _Attachments(_Service):
    def attachment_service(self, value: str) -> _Service:
        self.r.path_ids.append(value)
        return _NoAttachment(self.r)

    def add(self, attachment: types.DiskAttachment, query=None) -> types.DiskAttachment:
        return types.DiskAttachment(id=attachment.disk.id, read_only=attachment.read_only, active=True)


class _NoAttachment(_Service):
    def get(self):
        raise NotFoundError("not attached")


class RecordingClient:
    """What `Disks` needs of an OvirtClient: `call(what, fn)`, with fn given the recording system service."""

    def __init__(self) -> None:
        self.requests = Requests()

    def call(self, what: str, fn):
        return fn(_Service(self.requests))
