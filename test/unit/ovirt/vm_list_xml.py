"""Fake clients answer a cluster list as the engine does, with the XML of the VMs, for a reader to make records of;
`read_vms` reads a whole answer with the controller's reader."""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

import ovirtsdk4.types as types
import ovirtsdk4.writers  # noqa: F401 - registers the SDK's writers, Writer.write needs them
from ovirtsdk4.writer import Writer

from machine_controller.ovirt.streaming_get import Reader
from machine_controller.ovirt.vm_list_reader import ListedVm, VmListReader

T = TypeVar("T")


def answer(new_reader: Callable[[], Reader[list[T]]], vms: Iterable[types.Vm]) -> list[T]:
    reader = new_reader()
    reader.feed(Writer.write(list(vms), root="vms").encode())
    return reader.close()


def read_vms(body: bytes) -> list[ListedVm]:
    reader = VmListReader()
    reader.feed(body)
    return reader.close()
