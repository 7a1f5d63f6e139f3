"""What two controller processes share: the engine's disks and the marks this driver writes in their descriptions.

The controller Deployment runs two replicas, and the provisioner and the attacher may lead on different ones, so
one volume can be acted on by two processes at once; `InFlight` only orders the calls of one process. The engine has
no compare-and-swap, so each rule below is a write followed by a fresh read that the other process's write-then-read
cannot both miss (docs/storage.md#two-controller-processes):

- A disk's description is `csi.ovirt.org volume <name>` when made, `... [answered]` once a CreateVolume may answer
  with it, `... [deleting]` while a DeleteVolume removes it.
- CreateVolume answers with a disk only when it is the only disk of its name and marked answered, and marks a disk
  answered only when it saw it alone. Two disks are never marked answered at once: each would have been seen alone
  before the other existed. The keeper is the answered disk, else the smallest id; every other disk of the name is a
  duplicate, removed only while, asked fresh, it is unmarked and attached nowhere: by the call that made it, or by
  any call once the keeper is answered.
- DeleteVolume marks the disk deleting, then asks the engine where it is attached; ControllerPublishVolume attaches,
  then reads the disk. Whichever goes second sees the other: the delete refuses (and takes its mark back), or the
  publish answers ABORTED and the delete removes the disk with its attachment.
"""

from __future__ import annotations

import time
from typing import Callable

import grpc
import ovirtsdk4.types as types

from machine_controller.ovirt.errors import NotFoundError, OvirtError
from machine_controller.runtime.logging import get_logger

from ..disks import CSI_DESCRIPTION_PREFIX, DiskLocked, Disks, status_of
from .errors import CsiError

log = get_logger(__name__)

ANSWERED = "[answered]"
DELETING = "[deleting]"


def description_for(name: str) -> str:
    # The mark of this driver's disks: DeleteVolume removes no other disk (a FlexVolume one, a VM's).
    return f"{CSI_DESCRIPTION_PREFIX} {name}"


def _name(disk: types.Disk) -> str:
    return disk.name or disk.alias or ""


def made_for(disk: types.Disk, name: str) -> bool:
    """Proof that this driver made `disk` for the volume `name`: its name, and the description it wrote for it."""
    made = description_for(name)
    return _name(disk) == name and disk.description in (made, f"{made} {ANSWERED}", f"{made} {DELETING}")


def is_answered(disk: types.Disk) -> bool:
    return disk.description == f"{description_for(_name(disk))} {ANSWERED}"


def is_deleting(disk: types.Disk) -> bool:
    return disk.description == f"{description_for(_name(disk))} {DELETING}"


def _aborted(message: str) -> CsiError:
    return CsiError(grpc.StatusCode.ABORTED, message)


class OneDiskPerName:
    """The disk of a volume name, made if there is none, however many processes ask at once (module docstring)."""

    def __init__(self, disks: Disks, wait_ok: Callable[[types.Disk], types.Disk], poll_s: float) -> None:
        self.disks = disks
        self.wait_ok = wait_ok  # the controller's: within the caller's deadline, an illegal disk removed
        self.poll_s = poll_s

    def _ours(self, name: str) -> list[types.Disk]:
        found = self.disks.named(name)
        for d in found:
            if not made_for(d, name):
                raise CsiError(grpc.StatusCode.ALREADY_EXISTS,
                               f"a disk named {name!r} ({d.id}) exists that this driver did not make for it")
            if is_deleting(d):
                raise _aborted(f"volume {name!r} ({d.id}) is being deleted")
        return found

    def _remove_duplicate(self, disk: types.Disk) -> bool:
        """Remove a duplicate only while, asked fresh, it is unmarked and attached nowhere: then nobody answered
        with it, and none will (it is never alone again while the answered disk exists)."""
        try:
            fresh = self.wait_ok(disk)
        except NotFoundError:  # its own call, or another, removed it first
            return True
        if is_answered(fresh) or self.disks.attachments_of_disk(fresh.id):
            return False
        return self.disks.remove(fresh.id)

    def get(self, name: str, create: Callable[[], types.Disk], budget_s: float) -> types.Disk:
        deadline = time.monotonic() + budget_s
        mine: str | None = None
        while True:
            found = self._ours(name)
            if not found:
                if mine is not None:
                    raise _aborted(f"the disk made for volume {name!r} ({mine}) is gone; try again")
                mine = create().id
                continue
            answered = [d for d in found if is_answered(d)]
            if len(answered) > 1:  # cannot happen (module docstring): say so rather than pick one
                raise CsiError(grpc.StatusCode.INTERNAL, f"{len(answered)} disks of volume {name!r} are marked "
                               f"answered ({', '.join(d.id for d in answered)}); refusing to guess")
            # Without an answered one, the smallest id: every process that sees the same disks picks the same.
            keeper = answered[0] if answered else min(found, key=lambda d: d.id)
            others = [d for d in found if d.id != keeper.id]
            if not others:
                if status_of(keeper) != "ok":
                    keeper = self.wait_ok(keeper)
                if is_answered(keeper):
                    return keeper
                # Seen alone: mark it, then look again before answering. Gone meanwhile: a concurrent call that saw
                # a smaller duplicate beside it removed it before the mark; look again.
                try:
                    self.disks.set_description(keeper.id, f"{description_for(name)} {ANSWERED}")
                except NotFoundError:
                    continue
            # Every other disk of the name is a duplicate of the keeper, made by a concurrent call. Before one is
            # answered, a call removes only its own: another call's disk may have been seen alone, before the
            # keeper existed, by the call about to mark it. Once one is answered, no other is ever alone again.
            elif any([self._remove_duplicate(d) for d in others if answered or d.id == mine]):
                continue
            if time.monotonic() >= deadline:
                raise _aborted(f"{len(found)} disks of volume {name!r} made at once by concurrent calls "
                               f"({', '.join(d.id for d in found)}); each call removes its own but {keeper.id}")
            if others:
                time.sleep(self.poll_s)


def _refuse_if_attached(disks: Disks, disk_id: str) -> None:
    vms = disks.attachments_of_disk(disk_id)
    if vms:
        raise CsiError(grpc.StatusCode.FAILED_PRECONDITION,
                       f"volume {disk_id} is still attached to VM {', '.join(vms)}")


def delete_unattached(disks: Disks, disk: types.Disk) -> None:
    """Remove a volume's disk unless it is attached to any VM, asked fresh after the disk is marked deleting."""
    if status_of(disk) == "locked":
        raise DiskLocked(f"disk {disk.id} is locked by the engine; not removing it now")
    _refuse_if_attached(disks, disk.id)  # the common refusal, without writing to the engine
    before = disk.description or ""
    disks.set_description(disk.id, f"{description_for(_name(disk))} {DELETING}")
    try:
        _refuse_if_attached(disks, disk.id)
        disks.remove(disk.id)
    except BaseException:
        # Refused or failed: the volume is left as it was, publishable again (a removed one went with its mark).
        try:
            if disks.get(disk.id) is not None:
                disks.set_description(disk.id, before)
        except OvirtError as e:  # the answer stays the first failure; a later DeleteVolume marks it again
            log.info("csi volume mark not taken back", volume=disk.id, error=str(e))
        raise


def check_published(disks: Disks, volume_id: str) -> None:
    """After an attach: the disk still exists and no DeleteVolume has it, else the publish is not OK."""
    disk = disks.get(volume_id)
    if disk is None:
        raise CsiError(grpc.StatusCode.NOT_FOUND, f"volume {volume_id} was deleted while it was being published")
    if is_deleting(disk):
        raise _aborted(f"volume {volume_id} is being deleted")
