"""What runs inside a simulated VM: the guest agent, Ignition, the kubelet's Node, and the disks it sees.

* Guest agent (docs/compatibility.md#status): once the VM is `up` and the agent has started, it reports `eth<i>` per
  plugged NIC (a unique IPv4 and the IPv6 link-local derived from the MAC) and `lo`. An RHCOS guest whose Ignition
  config was missing or invalid never gets past the initramfs, so it has no agent: no IPs, and it never joins.
* Initialization at start (docs/compatibility.md#vm-states): at most one of use_sysprep/use_cloud_init/
  use_ignition; none given -> on first boot with init data, Ignition for Ignition OSes (`rhcos_x64`).
* Node join (docs/compatibility.md#simulator): with a kubeconfig, a provisioned guest's kubelet registers the Node named
  after the VM's host name, with InternalIP/Hostname addresses, capacity from the VM and `nodeInfo.systemUUID` = VM id
  (the SMBIOS UUID oVirt gives the guest, docs/compatibility.md#disks) and the kubelet version of its image
  (seed.KUBELET_VERSIONS); it renews the Ready heartbeat while the VM is up. An RHCOS guest leaves `spec.providerID` to
  the providerID controller (docs/compatibility.md#node-controllers); a guest of the cloud-init node image is
  provisioned by a cloud-config and registers the `--provider-id` it gives the kubelet (cloud_config.py), as a Cluster
  API node does. A gracefully stopped guest posts Ready=False; a crashed,
  killed or removed one goes silent and its Node becomes Ready=Unknown after the grace period, as the node
  lifecycle controller does; so does a powered-off one (`stop`), whose kubelet had no chance to say goodbye.
* Block devices (docs/compatibility.md#disks): every active disk attachment is a disk of the guest whose serial is the
  disk id (virtio-blk truncates serials to 20 bytes), with the `/dev/disk/by-id` links RHCOS's udev creates.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ovirtsdk4 import types

from hack.ovirtsim import cloud_config
from hack.ovirtsim.errors import Msg, conflict
from hack.ovirtsim.real_guests import RealGuests
from hack.ovirtsim.router import EngineView
from hack.ovirtsim.scheduler import vm_vcpus
from hack.ovirtsim.seed import KUBELET_VERSIONS, RHCOS_TEMPLATE_NAME
from hack.ovirtsim.statemachine import GUEST_RUNNING
from hack.ovirtsim.store import InitMode, Store, VmRuntime, href

log = logging.getLogger("ovirtsim.guest")

IGNITION_OSES = {"rhcos_x64", "rhcos_ppc64", "rhcos_s390x", "rhcos_aarch64"}
_IGNITION_VERSION = re.compile(r"^[23]\.\d+\.\d+(-experimental)?$")
_DEVICE_NS = uuid.UUID("2a3b4c5d-0000-4000-8000-00000000beef")


# -- initialization and Ignition ---------------------------------------------------------------------------
def ignition_valid(payload: str | None) -> bool:
    """A parseable Ignition config: JSON with `ignition.version` 2.x.y or 3.x.y."""
    if not payload:
        return False
    try:
        config = json.loads(payload)
    except ValueError:
        return False
    version = config.get("ignition", {}).get("version") if isinstance(config, dict) else None
    return isinstance(version, str) and bool(_IGNITION_VERSION.match(version))


def is_ignition_os(vm: types.Vm) -> bool:
    return vm.os is not None and vm.os.type in IGNITION_OSES


def _has_init_data(init: types.Initialization | None) -> bool:
    return init is not None and any(v is not None for k, v in vars(init).items() if k != "_href")


def decide_init(vm: types.Vm, action: types.Action, rt: VmRuntime) -> InitMode:
    flags = {"sysprep": action.use_sysprep, "cloud_init": action.use_cloud_init, "ignition": action.use_ignition}
    if sum(1 for v in flags.values() if v) >= 2:
        raise conflict(Msg.MULTIPLE_INIT)
    if action.use_ignition:
        return InitMode.IGNITION
    if action.use_cloud_init:
        return InitMode.CLOUD_INIT
    if any(v is False for v in flags.values()) or action.use_initialization is False:
        return InitMode.NONE
    init = action.vm.initialization if action.vm is not None else vm.initialization
    if not rt.first_boot_done and (_has_init_data(init) or action.use_initialization):
        return InitMode.IGNITION if is_ignition_os(vm) else InitMode.CLOUD_INIT
    return InitMode.NONE


def boot(vm: types.Vm, action: types.Action, rt: VmRuntime) -> bool:
    """Record what this boot delivers to the guest; True if the guest comes up with a working agent."""
    mode = decide_init(vm, action, rt)
    init = action.vm.initialization if action.vm is not None and action.vm.initialization else vm.initialization
    payload = init.custom_script if init is not None else None
    if mode is not InitMode.NONE:
        rt.init_mode = mode.value
        rt.init_payload = payload
    if not is_ignition_os(vm):
        # A cloud-init image (a Kubernetes node image) runs a cloud-config once, at its first boot, and joins with
        # the kubelet flags it writes (cloud_config.py); anything else boots without joining.
        config = cloud_config.parse(payload, vm.id) if mode is InitMode.CLOUD_INIT else None
        if config is not None:
            rt.provisioned = True
            rt.kubelet_provider_id = cloud_config.kubelet_provider_id(config)
        return True
    if mode is InitMode.IGNITION and ignition_valid(payload):
        rt.provisioned = True
    return rt.provisioned


# -- guest agent -------------------------------------------------------------------------------------------
def agent_reporting(vm: types.Vm, rt: VmRuntime, now: float | None = None) -> bool:
    return (vm.status in GUEST_RUNNING and rt.guest_agent_at is not None
            and (now if now is not None else time.time()) >= rt.guest_agent_at)


def link_local(mac: str) -> str:
    """IPv6 link-local address from a MAC (modified EUI-64), what the guest's kernel configures."""
    octets = [int(x, 16) for x in mac.split(":")]
    octets[0] ^= 0x02
    eui = octets[:3] + [0xFF, 0xFE] + octets[3:]
    groups = [f"{(eui[i] << 8) | eui[i + 1]:x}" for i in range(0, 8, 2)]
    return "fe80::" + ":".join(groups)


def _device(vm: types.Vm, name: str, mac: str, ips: list[types.Ip]) -> types.ReportedDevice:
    dev = types.ReportedDevice(id=str(uuid.uuid5(_DEVICE_NS, name + mac)), name=name,
                               description="guest reported data", type=types.ReportedDeviceType.NETWORK,
                               mac=types.Mac(address=mac), ips=ips, vm=types.Vm(id=vm.id))
    dev.vm.href = vm.href
    dev.href = href("vms", vm.id, "reporteddevices", dev.id)
    return dev


def reported_devices(store: Store, vm: types.Vm, nic_id: str | None = None) -> list[types.ReportedDevice]:
    rt = store.vm_runtime(vm.id)
    if not agent_reporting(vm, rt):
        return []
    devices = []
    nics = [n for n in store.vm_nics.children(vm.id) if n.plugged is not False]
    for i, nic in enumerate(nics):
        if nic_id is not None and nic.id != nic_id:
            continue
        ips = [types.Ip(address=store.runtime.nic_ips.get(nic.id, "0.0.0.0"), version=types.IpVersion.V4),
               types.Ip(address=link_local(nic.mac.address), version=types.IpVersion.V6)]
        devices.append(_device(vm, f"eth{i}", nic.mac.address, ips))
    if nic_id is None:
        devices.append(_device(vm, "lo", "00:00:00:00:00:00",
                               [types.Ip(address="127.0.0.1", version=types.IpVersion.V4),
                                types.Ip(address="::1", version=types.IpVersion.V6)]))
    return devices


def guest_ipv4(store: Store, vm: types.Vm) -> str | None:
    for nic in store.vm_nics.children(vm.id):
        if nic.plugged is not False and nic.id in store.runtime.nic_ips:
            return store.runtime.nic_ips[nic.id]
    return None


def host_name(vm: types.Vm) -> str:
    if vm.initialization is not None and vm.initialization.host_name:
        return vm.initialization.host_name
    return vm.name


def decorate(store: Store, vm: types.Vm) -> None:
    """Fields the engine shows from the guest agent (on a copy of the VM being rendered)."""
    if agent_reporting(vm, store.vm_runtime(vm.id)):
        vm.fqdn = host_name(vm)
        if is_ignition_os(vm):
            vm.guest_operating_system = types.GuestOperatingSystem(
                architecture="x86_64", family="Linux", distribution="Red Hat Enterprise Linux CoreOS",
                codename="Ootpa", kernel=types.Kernel(version=types.Version(full_version="5.14.0-427.el9.x86_64")),
                version=types.Version(full_version="4.16", major=4, minor=16))


# -- block devices -----------------------------------------------------------------------------------------
@dataclass
class BlockDevice:
    name: str
    path: str
    serial: str
    by_id: list[str]
    size: int
    disk_id: str
    interface: str
    read_only: bool


def block_devices(store: Store, vm: types.Vm) -> list[BlockDevice]:
    out: list[BlockDevice] = []
    sd = vd = 0
    for da in store.vm_disk_attachments.children(vm.id):
        if da.active is False:
            continue
        disk = store.disks.get(da.id)
        size = disk.provisioned_size if disk is not None else 0
        iface = da.interface.value if da.interface is not None else "virtio_scsi"
        short = da.id[:20]
        if iface == "virtio":
            name, serial, links = f"vd{chr(ord('a') + vd)}", short, [f"/dev/disk/by-id/virtio-{short}"]
            vd += 1
        else:
            name, serial = f"sd{chr(ord('a') + sd)}", da.id
            links = [f"/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_{short}"]
            sd += 1
        out.append(BlockDevice(name, f"/dev/{name}", serial, links, size or 0, da.id, iface, bool(da.read_only)))
    return out


def kubelet_version(store: Store, vm: types.Vm) -> str:
    """The kubelet of the VM's image, by its template's name (seed.py); RHCOS's for any other template."""
    template = store.templates.get(vm.template.id) if vm.template else None
    return KUBELET_VERSIONS.get(template.name if template else "", KUBELET_VERSIONS[RHCOS_TEMPLATE_NAME])


# -- the kubelet's Node ------------------------------------------------------------------------------------
@dataclass
class _GuestView:
    vm_id: str
    vm_name: str
    node: str
    running: bool  # the kubelet is running and registered
    graceful_stop: bool
    ip: str | None
    vcpus: int
    memory: int
    template: str | None  # the VM's template id: its guests may be real nodes (real_guests.py)
    cut_off: bool = False  # the engine lost its host (`unknown`): the guest may run on, unreachable
    provider_id: str | None = None  # the kubelet's --provider-id, registered with the Node
    kubelet_version: str = KUBELET_VERSIONS[RHCOS_TEMPLATE_NAME]  # the kubelet its image ships


@dataclass
class _NodeState:
    last_heartbeat: float = 0.0
    posted: str = ""  # "True", "False" or "Unknown": the Ready status last written
    error: str | None = None  # why the last write failed (e.g. a name the API server refuses), reported once
    retry_at: float = 0.0  # a failed kubelet tries again from then on, backing off
    failures: int = 0


NODE_RETRY_MAX = 30.0  # seconds: the longest a failing kubelet waits before trying again


NODE_WRITERS = 8  # guests whose Node writes are in flight at once


class NodeAgent:
    """The kubelets of all guests: one thread finds what each must write to the API server of the kubeconfig, and
    `NODE_WRITERS` threads write it. Real kubelets are independent machines: a thousand guests booting together
    register together, not one after another behind a single writer."""

    def __init__(self, engine: EngineView, kubeconfig: str) -> None:
        self.engine = engine
        self.kubeconfig = kubeconfig
        self._nodes: dict[str, _NodeState] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writers: ThreadPoolExecutor | None = None
        self._api: Any = None
        self.real = RealGuests(self._block_devices)

    def start(self) -> None:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = NODE_WRITERS
        self._api = client.CoreV1Api(client.ApiClient(cfg))
        self._writers = ThreadPoolExecutor(NODE_WRITERS, thread_name_prefix="guest-kubelet")
        self._thread = threading.Thread(target=self._loop, name="guest-kubelets", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        if self._writers:
            self._writers.shutdown(wait=False, cancel_futures=True)
        self.real.stop()

    def _loop(self) -> None:
        period = min(0.25, self.engine.timings.node_heartbeat / 4)
        while not self._stop.wait(period):
            try:
                self.sync()
            except Exception:
                log.exception("node sync")

    def _views(self) -> list[_GuestView]:
        store = self.engine.store
        now = time.time()
        views = []
        with store.lock:
            for vm in store.vms.all():
                rt = store.vm_runtime(vm.id)
                running = rt.provisioned and agent_reporting(vm, rt, now)
                if not running and rt.node_name is None:
                    continue
                views.append(_GuestView(vm.id, vm.name or "", rt.node_name or host_name(vm), running,
                                        vm.status in (types.VmStatus.POWERING_DOWN, types.VmStatus.DOWN)
                                        and rt.graceful_stop,
                                        guest_ipv4(store, vm), vm_vcpus(vm), vm.memory or 0,
                                        vm.template.id if vm.template else None,
                                        rt.provisioned and vm.status is types.VmStatus.UNKNOWN,
                                        rt.kubelet_provider_id, kubelet_version(store, vm)))
                if running:
                    rt.node_name = host_name(vm) if rt.node_name is None else rt.node_name
        return views

    def _block_devices(self, vm_id: str) -> list[dict[str, Any]]:
        store = self.engine.store
        with store.lock:
            vm = store.vms.get(vm_id)
            return [asdict(d) for d in block_devices(store, vm)] if vm else []

    def error_of(self, node: str) -> str | None:
        """Why this guest's kubelet last failed to write its Node (None: it did not)."""
        state = self._nodes.get(node)
        return state.error if state is not None else None

    def sync(self) -> None:
        """One pass over every guest. Each kubelet is independent, as on real machines: one whose Node the API
        server refuses (an invalid name, a webhook, an outage) is reported, backs off and is skipped, and the
        other guests are served in the same pass."""
        now = time.time()
        seen = set()
        writes: list[Callable[[], None]] = []
        real: dict[str, str] = {}
        cut_off: set[str] = set()
        for view in self._views():
            if self.real.claims(view.template, view.vm_name):  # a real kubelet writes this Node, not us
                if view.running or view.cut_off:
                    real[view.vm_id] = view.node
                if view.cut_off:
                    cut_off.add(view.vm_id)
                continue
            seen.add(view.node)
            state = self._nodes.setdefault(view.node, _NodeState())
            write = self._guest_write(view, state, now)
            if write is not None:
                writes.append(functools.partial(self._guarded, view.vm_id, view.node, state, now, write))
        for name, state in self._nodes.items():  # guests of removed VMs went silent
            if name not in seen and state.posted == "True" \
                    and now - state.last_heartbeat >= self.engine.timings.node_unknown_after:
                writes.append(functools.partial(self._guarded, None, name, state, now, functools.partial(
                    self._post_condition, name, state, "Unknown", "NodeStatusUnknown",
                    "Kubelet stopped posting node status.", now)))
        self.real.want(real, frozenset(cut_off))
        # Only the guests with something to write go to the writers: handing every quiet guest to a thread (a
        # future apiece, several passes a second) would cost CPU in proportion to the inventory, on the cores the
        # controller is measured on (docs/benchmarks.md#figures-behind-the-codes-choices).
        # Each guest's state is touched by its own write only; the pass ends when every write has.
        if self._writers is None:
            for write in writes:
                write()
        else:
            for _ in self._writers.map(lambda write: write(), writes):
                pass

    def _guest_write(self, view: _GuestView, state: _NodeState, now: float) -> Callable[[], None] | None:
        """What this guest's kubelet writes now, if anything."""
        t = self.engine.timings
        if view.running:
            if state.posted != "True" or now - state.last_heartbeat >= t.node_heartbeat:
                return functools.partial(self._post_ready, view, state, now)
        elif view.graceful_stop and state.posted == "True":
            return functools.partial(self._post_condition, view.node, state, "False", "KubeletNotReady",
                                     "node is shutting down", now)
        elif state.posted not in ("Unknown", "False") and now - state.last_heartbeat >= t.node_unknown_after:
            return functools.partial(self._post_condition, view.node, state, "Unknown", "NodeStatusUnknown",
                                     "Kubelet stopped posting node status.", now)
        return None

    def _guarded(self, vm_id: str | None, node: str, state: _NodeState, now: float,
                 write: Callable[[], None]) -> None:
        if now < state.retry_at:
            return
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - any refusal of one guest's write stays with that guest
            reason = _describe(exc)
            if reason != state.error:
                log.warning("guest %s: Node %s not written: %s", vm_id or "(removed VM)", node, reason)
            state.error = reason
            state.failures += 1
            state.retry_at = now + min(NODE_RETRY_MAX, self.engine.timings.node_heartbeat * 2 ** state.failures)
            return
        if state.error is not None:
            log.info("guest %s: Node %s written again", vm_id or "(removed VM)", node)
        state.error, state.failures, state.retry_at = None, 0, 0.0

    @staticmethod
    def _ts(now: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))

    def _conditions(self, ready: str, reason: str, message: str, now: float) -> list[dict[str, Any]]:
        ts = self._ts(now)
        pressures = (("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
                     ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
                     ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"))
        conds = [{"type": kind, "status": "False", "reason": f"KubeletHas{ok}", "message": msg,
                  "lastHeartbeatTime": ts, "lastTransitionTime": ts}
                 for kind, ok, msg in pressures]
        if ready == "Unknown":
            conds = [dict(c, status="Unknown", reason="NodeStatusUnknown", message=message) for c in conds]
        conds.append({"type": "Ready", "status": ready, "reason": reason, "message": message,
                      "lastHeartbeatTime": ts, "lastTransitionTime": ts})
        return conds

    def _post_ready(self, view: _GuestView, state: _NodeState, now: float) -> None:
        from kubernetes.client.rest import ApiException

        conditions = self._conditions("True", "KubeletReady", "kubelet is posting ready status", now)
        if state.posted == "True":  # keep the transition time of an unchanged condition
            for c in conditions:
                c.pop("lastTransitionTime")
        status = {
            "conditions": conditions,
            "addresses": ([{"type": "InternalIP", "address": view.ip}] if view.ip else [])
            + [{"type": "Hostname", "address": view.node}],
        }
        if state.posted == "":
            # A kubelet starting registers its Node first (and posts status to it when it exists already).
            try:
                self._register(view, status)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                self._api.patch_node_status(view.node, {"status": status})
        else:
            try:
                self._api.patch_node_status(view.node, {"status": status})
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self._register(view, status)
        state.last_heartbeat = now
        state.posted = "True"

    def _register(self, view: _GuestView, status: dict[str, Any]) -> None:
        memory_ki = view.memory // 1024
        capacity = {"cpu": str(view.vcpus), "memory": f"{memory_ki}Ki", "pods": "250",
                    "ephemeral-storage": "125293548Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
        allocatable = dict(capacity, cpu=f"{max(view.vcpus * 1000 - 500, 100)}m",
                           memory=f"{max(memory_ki - 1024 * 1024, 1024)}Ki")
        boot = hashlib.sha256(f"{view.vm_id}{time.time()}".encode()).hexdigest()
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": view.node, "labels": {
                "kubernetes.io/hostname": view.node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                "node.openshift.io/os_id": "rhcos"}},
            # A kubelet started with --provider-id registers it; the field cannot be changed once set.
            "spec": {"providerID": view.provider_id} if view.provider_id else {},
            "status": dict(status, capacity=capacity, allocatable=allocatable, nodeInfo={
                "machineID": view.vm_id.replace("-", ""), "systemUUID": view.vm_id, "bootID": boot[:36],
                "kernelVersion": "5.14.0-427.el9.x86_64", "osImage": "Red Hat Enterprise Linux CoreOS 416.94",
                "containerRuntimeVersion": "cri-o://1.29.1", "kubeletVersion": view.kubelet_version,
                "kubeProxyVersion": view.kubelet_version, "operatingSystem": "linux", "architecture": "amd64"}),
        }
        # The API server keeps the status of a created Node (the kubelet registers with it), so one request.
        self._api.create_node(node)
        log.info("guest %s registered Node %s", view.vm_id, view.node)

    def _post_condition(self, node: str, state: _NodeState, ready: str, reason: str, message: str,
                        now: float) -> None:
        from kubernetes.client.rest import ApiException

        conditions = self._conditions(ready, reason, message, now)
        # A silent kubelet does not heartbeat: keep the last heartbeat time, as the lifecycle controller does.
        hb = self._ts(state.last_heartbeat or now)
        for c in conditions:
            c["lastHeartbeatTime"] = hb
        try:
            self._api.patch_node_status(node, {"status": {"conditions": conditions}})
        except ApiException as exc:
            if exc.status != 404:
                raise
        state.posted = ready


def _describe(exc: Exception) -> str:
    """An API server refusal as its status and message (`Node "Bad_Name" is invalid: ...`), else the exception."""
    body = getattr(exc, "body", None)
    status = getattr(exc, "status", None)
    if body:
        try:
            message = json.loads(body).get("message")
        except (ValueError, AttributeError):
            message = None
        if message:
            return f"{status} {message}"
    return f"{type(exc).__name__}: {exc}"
