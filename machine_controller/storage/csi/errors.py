"""The gRPC status code of every failure, decided here once (docs/storage.md#csi-error-codes).

Servicer methods raise `CsiError(code, message)` for what they decide themselves (bad arguments, not found,
incompatible volumes) and let the disk layer's classified oVirt errors through; `rpc` turns both into the status
the CSI spec names, so the sidecars retry what is transient and report what is not.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import grpc

from machine_controller.ovirt.connection import NoCredentials
from machine_controller.ovirt.errors import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    OvirtError,
    TransientError,
)
from machine_controller.runtime.logging import get_logger

from ..disks import DiskIllegal, DiskLocked, DiskSizeOutOfRange, DiskTooLarge
from ..flexvolume import Failure

log = get_logger(__name__)


class CsiError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def invalid(message: str) -> CsiError:
    return CsiError(grpc.StatusCode.INVALID_ARGUMENT, message)


def require(request: Any, *fields: str) -> None:
    """INVALID_ARGUMENT naming the first of `fields` the request leaves empty (or, for a message field, unset)."""
    for name in fields:
        value = getattr(request, name)
        present = request.HasField(name) if hasattr(value, "ListFields") else bool(value)
        if not present:
            raise invalid(f"{name} is required")


def not_found(message: str) -> CsiError:
    return CsiError(grpc.StatusCode.NOT_FOUND, message)


def status_of(err: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(err, CsiError):
        return err.code, str(err)
    if isinstance(err, NotFoundError):
        return grpc.StatusCode.NOT_FOUND, str(err)
    if isinstance(err, (DiskTooLarge, DiskSizeOutOfRange)):  # the spec's "unsupported capacity_range"
        return grpc.StatusCode.OUT_OF_RANGE, str(err)
    if isinstance(err, DiskLocked):
        # The engine holds the disk (creating, extending): the spec's "operation pending for this volume".
        return grpc.StatusCode.ABORTED, str(err)
    if isinstance(err, (NoCredentials, TransientError)):
        return grpc.StatusCode.UNAVAILABLE, str(err)
    if isinstance(err, BadRequestError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(err)
    if isinstance(err, Failure):  # a node command (mkfs, mount, resize2fs) failed: its own words
        return grpc.StatusCode.INTERNAL, str(err)
    if isinstance(err, (AuthenticationError, DiskIllegal, OvirtError)):
        return grpc.StatusCode.INTERNAL, str(err)
    return grpc.StatusCode.INTERNAL, f"{type(err).__name__}: {err}"


def rpc(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap one servicer method: its failures become the status `status_of` decides, logged on one line."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return fn(self, request, context)
        except Exception as e:  # noqa: BLE001 - every failure leaves as a gRPC status
            code, message = status_of(e)
            log.info("csi call failed", method=fn.__name__, code=code.name, error=message)
            context.abort(code, message)

    return wrapper
