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
    """Any service: what the disk layer calls on it, recorded. A disk exists (1 GiB, ok) at every id; no disk is
    found by a search, no VM is listed, no attachment exists; every storage domain searched for exists."""

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
        if search is not None:
            self.r.searches.append(search)
        return []

    def get(self) -> types.Disk:
        return _ok_disk(self.disk_id)

    def add(self, disk: types.Disk, query=None) -> types.Disk:
        self.r.sizes.append(disk.provisioned_size)
        return _ok_disk(str(uuid.uuid4()), disk.provisioned_size, disk.name, disk.description)

    def update(self, disk: types.Disk) -> types.Disk:
        self.r.sizes.append(disk.provisioned_size)
        return _ok_disk(self.disk_id, disk.provisioned_size)

    def remove(self, **_) -> None:
        return None


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
