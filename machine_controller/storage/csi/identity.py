"""The CSI Identity service: the driver's name and version, what it offers, and whether it is ready."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable

from .errors import rpc
from .volumes import DRIVER_NAME


def _version() -> str:
    try:
        return version("ovirt-machine-controller")
    except PackageNotFoundError:
        return "0.0.0"


def identity_servicer(pb: Any, pb_grpc: Any, probe: Callable[[], None] | None) -> Any:
    """`probe` raises when the engine cannot be reached (the controller side); the node side has no engine.

    The capabilities are the plugin's, the same from every instance whichever services it serves: the CSI spec's
    GetPluginCapabilities requires it, and a caller that asks the node instance (csi-sanity does) would otherwise
    take the controller service for absent (docs/storage.md#csi-driver)."""
    service = pb.PluginCapability.Service.Type
    expansion = pb.PluginCapability.VolumeExpansion.Type

    class Identity(pb_grpc.IdentityServicer):
        @rpc
        def GetPluginInfo(self, request, context):
            return pb.GetPluginInfoResponse(name=DRIVER_NAME, vendor_version=_version())

        @rpc
        def GetPluginCapabilities(self, request, context):
            return pb.GetPluginCapabilitiesResponse(capabilities=[
                pb.PluginCapability(service=pb.PluginCapability.Service(type=service.CONTROLLER_SERVICE)),
                pb.PluginCapability(volume_expansion=pb.PluginCapability.VolumeExpansion(type=expansion.ONLINE))])

        @rpc
        def Probe(self, request, context):
            if probe is not None:
                probe()  # an unreachable engine leaves as UNAVAILABLE: not ready, the liveness probe says so
            return pb.ProbeResponse(ready={"value": True})

    return Identity()
