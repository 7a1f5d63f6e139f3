"""Fake clients answer a cluster list as the engine does, with the XML of the VMs, for `read` to make records of."""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

import ovirtsdk4.types as types
from ovirtsdk4.writer import Writer
import ovirtsdk4.writers  # noqa: F401 - registers the SDK's writers, Writer.write needs them

T = TypeVar("T")


def answer(read: Callable[[bytes], list[T]], vms: Iterable[types.Vm]) -> list[T]:
    return read(Writer.write(list(vms), root="vms").encode())
