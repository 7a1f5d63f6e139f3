"""The node plugin registers itself with the kubelet (docs/storage.md#registration-with-the-kubelet).

The kubelet finds a CSI driver through its plugin watcher. A unix socket that appears in
`<kubelet root>/plugins_registry` is dialled. The kubelet asks `Registration.GetInfo` for the plugin's type
(`CSIPlugin`), its name, the CSI endpoint as the kubelet sees it, and the CSI versions it speaks. It then calls
NodeGetInfo on that endpoint, adds the driver to the Node's CSINode, and reports the outcome with
`NotifyRegistrationStatus`. When the socket is removed, the driver is unregistered.

The `node-driver-registrar` sidecar usually plays this part, but its module cannot be fetched here
(docs/images.md#not-built-yet). So `ovirt-csi-driver --services node` serves the API itself: one image fewer to pin
and patch.

The API is the kubelet's pluginregistration v1. The proto package is `pluginregistration` (the kubelet never
renamed it to v1). The service is `Registration`, and the field numbers are in `_DESCRIPTOR` below. The messages
are built from that descriptor at run time, so no protoc step and no generated file are needed for five small
messages.
"""

from __future__ import annotations

import os
import stat
import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from machine_controller.runtime.logging import get_logger

log = get_logger(__name__)

PLUGIN_TYPE = "CSIPlugin"  # the kubelet's handler for CSI drivers
# The kubelet takes the highest 1.x it is offered (0.x is refused since Kubernetes 1.17); "1.0.0" is what every
# CSI driver offers, since CSI 1.x stays compatible with 1.0.
CSI_VERSIONS = ("1.0.0",)
SERVICE = "pluginregistration.Registration"


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FieldDescriptorProto
    string, boolean = f.TYPE_STRING, f.TYPE_BOOL
    one, many = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    messages = {
        "InfoRequest": [],
        # Its type: CSIPlugin; name: the driver's; endpoint: the CSI socket as the kubelet's mount namespace sees it.
        "PluginInfo": [("type", 1, string, one), ("name", 2, string, one), ("endpoint", 3, string, one),
                       ("supported_versions", 4, string, many)],
        "RegistrationStatus": [("plugin_registered", 1, boolean, one), ("error", 2, string, one)],
        "RegistrationStatusResponse": [],
    }
    proto = descriptor_pb2.FileDescriptorProto(name="ovirt_csi_pluginregistration.proto",
                                               package="pluginregistration", syntax="proto3")
    for name, fields in messages.items():
        proto.message_type.add(name=name, field=[
            f(name=fname, number=number, type=ftype, label=label, json_name=fname)
            for fname, number, ftype, label in fields])
    return proto


def _message_classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    classes = {}
    for name in ("InfoRequest", "PluginInfo", "RegistrationStatus", "RegistrationStatusResponse"):
        desc = pool.FindMessageTypeByName(f"pluginregistration.{name}")
        # GetMessageClass is protobuf 4.22's name for what older releases' MessageFactory.GetPrototype did.
        get = getattr(message_factory, "GetMessageClass", None)
        classes[name] = get(desc) if get else message_factory.MessageFactory(pool).GetPrototype(desc)
    return classes


MESSAGES = _message_classes()


@dataclass
class Status:
    """What the kubelet said last: None before it has answered."""

    registered: bool | None = None
    error: str = ""


def socket_name(driver: str) -> str:
    """`<driver>-reg.sock`: the name node-driver-registrar gives it, so a node moving from the sidecar to the driver
    keeps one socket per driver in plugins_registry."""
    return f"{driver}-reg.sock"


class Registration:
    """The Registration service on `<registration_dir>/<driver>-reg.sock`, telling the kubelet `endpoint`."""

    def __init__(self, registration_dir: str, driver: str, endpoint: str) -> None:
        if not os.path.isabs(endpoint):
            raise ValueError(f"the kubelet's path of the CSI socket must be absolute, got {endpoint!r}")
        if not os.path.isdir(registration_dir):
            raise ValueError(f"the kubelet's plugin registration directory {registration_dir} does not exist")
        self.path = os.path.join(registration_dir, socket_name(driver))
        self.driver, self.endpoint = driver, endpoint
        self.status = Status()
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    def info(self) -> Any:
        return MESSAGES["PluginInfo"](type=PLUGIN_TYPE, name=self.driver, endpoint=self.endpoint,
                                      supported_versions=list(CSI_VERSIONS))

    def _get_info(self, request: Any, context: grpc.ServicerContext) -> Any:
        log.info("kubelet asks for the plugin's info", driver=self.driver, endpoint=self.endpoint)
        return self.info()

    def _notify(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.status = Status(request.plugin_registered, request.error)
        if request.plugin_registered:
            log.info("registered with the kubelet", driver=self.driver)
        else:
            # Nothing to retry from here: the kubelet tries again when the socket is made again (a restart of the
            # driver, which the liveness check asks for).
            log.error("the kubelet refused the registration", driver=self.driver, error=request.error)
        return MESSAGES["RegistrationStatusResponse"]()

    def start(self) -> None:
        """Serve on the socket; the kubelet's watcher sees it appear. Start it once the CSI endpoint serves, since
        the kubelet calls NodeGetInfo there at once."""
        if os.path.lexists(self.path) and stat.S_ISSOCK(os.lstat(self.path).st_mode):
            os.remove(self.path)  # left by a driver that died: a new socket makes the kubelet register again
        m = MESSAGES
        handlers = {
            "GetInfo": grpc.unary_unary_rpc_method_handler(
                self._get_info, request_deserializer=m["InfoRequest"].FromString,
                response_serializer=m["PluginInfo"].SerializeToString),
            "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                self._notify, request_deserializer=m["RegistrationStatus"].FromString,
                response_serializer=m["RegistrationStatusResponse"].SerializeToString),
        }
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        server.add_insecure_port(f"unix://{self.path}")
        server.start()
        self._server = server
        log.info("registration socket ready", path=self.path)

    def healthy(self) -> bool:
        """False once the kubelet refused the driver or the socket is gone (a cleaned directory): both mend by a
        restart, which makes the socket again."""
        with self._lock:
            refused = self.status.registered is False
        return not refused and os.path.exists(self.path)

    def stop(self) -> None:
        """Remove the socket first, so the kubelet unregisters the driver, then stop serving."""
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        if self._server is not None:
            self._server.stop(grace=1).wait()
