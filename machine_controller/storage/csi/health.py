"""`/healthz` of the driver: the CSI Probe, called on the driver's own endpoint (docs/storage.md#csi-driver).

The `livenessprobe` sidecar usually serves this. Its module cannot be fetched here (docs/images.md#not-built-yet), so
the driver serves it itself, in the same way: the check goes through the gRPC endpoint that the sidecars and the
kubelet use, so a server that no longer answers fails it, not only an engine that cannot be reached.
"""

from __future__ import annotations

from typing import Any, Callable

import grpc

from machine_controller.runtime.logging import get_logger

log = get_logger(__name__)


def probe_check(pb: Any, pb_grpc: Any, endpoint: str, timeout_s: float) -> Callable[[], bool]:
    """A health check: Identity.Probe on `endpoint` answers within `timeout_s` and does not say "not ready"."""
    channel = grpc.insecure_channel(endpoint)
    identity = pb_grpc.IdentityStub(channel)

    def check() -> bool:
        try:
            reply = identity.Probe(pb.ProbeRequest(), timeout=timeout_s)
        except grpc.RpcError as e:
            log.warning("probe failed", code=e.code().name, error=e.details())
            return False
        # An unset `ready` means ready (the CSI spec), as the livenessprobe sidecar reads it.
        return not reply.HasField("ready") or reply.ready.value

    return check
