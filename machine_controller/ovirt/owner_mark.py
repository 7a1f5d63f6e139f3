"""The mark of its owner that a VM made for Cluster API's front end carries, and the check of it.

A VM is a Machine's when it bears the Machine's name, which the engine keeps unique. That proves ownership only
while one name space of owners maps onto the engine's: Cluster API's OvirtMachines are named uniquely per
namespace only, and Clusters of several namespaces (or several management clusters) share an engine. So the
actuator of that front end writes, in the VM's create request, its owner's kind, namespace and name into the VM's
`comment` (kept by the engine, returned in every GET of the VM and in lists), and takes a VM found by its name or
by a recorded id as the object's only when that mark names the object (docs/architecture.md#acting-only-on-what-is-ours,
docs/cluster-api.md#the-contract-rule-by-rule).

The `comment`, not the `description`: the description is the VM's human text, which the administration portal shows
in its lists and invites to edit, and which the engine limits to 255 characters; the comment is free text no
engine feature sets. The owner's uid is written too, for whoever reads the VM, but not compared: `clusterctl move`
recreates the objects, with their namespace and name, under new uids, and the moved OvirtMachine must still own
its VM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, TypeVar

from api.machine import Machine
from api.migration import ADOPT_VM_ANNOTATION
from machine_controller.controllers.provider import ActuatorError

PREFIX = "ovirt-machine-controller owner:"
_MARK = re.compile(rf"^{re.escape(PREFIX)} (?P<owner>\S+ \S+/\S+)(?: uid \S*)?$")


class _Marked(Protocol):
    @property
    def id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def comment(self) -> str | None: ...


V = TypeVar("V", bound=_Marked)


class VmOfAnother(ActuatorError):
    """The VM bearing the object's name is marked as another's (or bears no mark): nothing was done to it, and the
    object waits, retried with backoff, until that VM or its name is freed."""


@dataclass(frozen=True)
class OwnerMarks:
    """Marks of owners of `kind` (the kind of object the front end's Machines stand for, e.g. OvirtMachine)."""

    kind: str

    def mark(self, machine: Machine) -> str:
        meta = machine.metadata
        return f"{PREFIX} {self._owner(machine)} uid {meta.uid or ''}".rstrip()

    def is_marked_for(self, machine: Machine, vm: _Marked) -> bool:
        found = _MARK.match(vm.comment or "")
        return found is not None and found["owner"] == self._owner(machine)

    def adoptable(self, machine: Machine, vm: _Marked) -> bool:
        """`vm` is the Machine API VM that the object was converted from and is to take over
        (docs/cluster-api.md#migrating-from-the-machine-api): it bears no mark and no comment at all (a Machine API
        VM's, never another front end object's nor a human's note), it bears the object's name (the Machine API's
        proof that it was that Machine's, and the converted object keeps the Machine's name), and its id is the one
        the converter recorded on the object (api/migration/metadata.py ADOPT_VM_ANNOTATION). Such a VM is marked
        before anything else is done with it; any other unmarked VM stays another's."""
        return (not vm.comment and bool(vm.id) and vm.name == machine.metadata.name
                and machine.metadata.annotations.get(ADOPT_VM_ANNOTATION) == vm.id)

    def check(self, machine: Machine, vm: V) -> V:
        """`vm`, found by the object's name, when it bears the object's mark; else VmOfAnother naming the VM and
        what its mark says."""
        if self.is_marked_for(machine, vm):
            return vm
        raise VmOfAnother(
            f"VM {vm.name} ({vm.id}) bears the name of {self._owner(machine)} but {said_by(vm)}: it is another's, so "
            f"it is left alone, and {self.kind} {machine.metadata.name} waits for that name to be free on the engine")

    def _owner(self, machine: Machine) -> str:
        meta = machine.metadata
        return f"{self.kind} {meta.namespace}/{meta.name}"


def said_by(vm: _Marked) -> str:
    """What the VM's mark says, in a refusal."""
    if not vm.comment:
        return "bears no owner mark (comment)"
    return f"its owner mark (comment) says {vm.comment!r}"
