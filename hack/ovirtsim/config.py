"""Configuration of the simulator: timing profiles, credentials and addresses, with their defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

API_PREFIX = "/ovirt-engine/api"
SSO_TOKEN_PATH = "/ovirt-engine/sso/oauth/token"
SSO_TOKEN_HTTP_AUTH_PATH = "/ovirt-engine/sso/oauth/token-http-auth"
SSO_LOGOUT_PATH = "/ovirt-engine/services/sso-logout"

# Test-only credentials of the simulated engine (never a real secret).
DEFAULT_USERNAME = "admin@internal"
DEFAULT_PASSWORD = "ovirtsim-admin"

LISTEN_HOST = "127.0.0.1"
# The engine API listens on every address, so that a pod on a real node (docs/architecture.md#real-nodes) reaches it
# at the machine's address (`pod_url`), as a controller pod reaches an engine; the control API stays on loopback.
API_LISTEN_HOST = "0.0.0.0"


class Profile(str, Enum):
    FAST = "fast"
    REALTIME = "realtime"


@dataclass
class Timings:
    """Seconds each asynchronous engine operation takes (docs/compatibility.md#vm-states).

    `fast` keeps the order of events of a real engine but compresses it for tests; `realtime` is close to
    what an engine on real hosts shows (clone of a 16 GiB RHCOS disk, boot of RHCOS, guest agent start).
    """

    vm_create: float  # image_locked -> down (disk copy/overlay creation)
    wait_for_launch: float  # wait_for_launch -> powering_up
    powering_up: float  # powering_up -> up (guest OS loaded)
    guest_agent: float  # up -> guest agent reports IPs
    powering_down_stop: float  # stop: powering_down -> down
    powering_down_shutdown: float  # shutdown: powering_down -> down (guest shuts down cleanly)
    reboot: float  # reboot_in_progress -> up
    disk_create: float  # new disk: locked -> ok
    disk_extend: float  # extend: locked -> ok
    disk_remove: float  # removed VM's disks stay locked this long, then vanish
    node_heartbeat: float  # guest kubelet: Node status heartbeat period
    node_unknown_after: float  # a silent Node goes Ready=Unknown after this (node-monitor-grace-period)
    token_ttl: float  # SSO token lifetime

    def with_overrides(self, overrides: dict[str, float]) -> "Timings":
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown timing(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        return dataclasses.replace(self, **{k: float(v) for k, v in overrides.items()})


PROFILES: dict[Profile, Timings] = {
    Profile.FAST: Timings(
        vm_create=0.3,
        wait_for_launch=0.1,
        powering_up=0.2,
        guest_agent=0.2,
        powering_down_stop=0.1,
        powering_down_shutdown=0.2,
        reboot=0.2,
        disk_create=0.2,
        disk_extend=0.2,
        disk_remove=0.2,
        # A real kubelet's status period: state changes are still posted at once, and a test bed of many running
        # guests does not spend its API server on a status write per guest per second
        # (docs/architecture.md#the-test-bed).
        node_heartbeat=10.0,
        node_unknown_after=1.0,
        token_ttl=1800.0,
    ),
    # Figures from the go-ovirt-client mock (2 s steps, IPs ~10 s after up) stretched to what an RHCOS boot on
    # a real host takes; the Node grace period is kube-controller-manager's default node-monitor-grace-period.
    Profile.REALTIME: Timings(
        vm_create=20.0,
        wait_for_launch=3.0,
        powering_up=45.0,
        guest_agent=15.0,
        powering_down_stop=3.0,
        powering_down_shutdown=20.0,
        reboot=45.0,
        disk_create=10.0,
        disk_extend=5.0,
        disk_remove=5.0,
        node_heartbeat=10.0,
        node_unknown_after=40.0,
        token_ttl=1800.0,
    ),
}


@dataclass
class SimConfig:
    """Everything `serve` needs; the CLI flags map one to one onto these fields."""

    port: int = 0  # 0: pick a free port
    control_port: int = 0
    tls: bool = False
    cert_dir: str | None = None  # where the generated CA and server certificate go (TLS only)
    state_file: str | None = None
    profile: Profile = Profile.FAST
    timing_overrides: dict[str, float] = field(default_factory=dict)
    kubeconfig: str | None = None
    username: str = DEFAULT_USERNAME
    password: str = DEFAULT_PASSWORD
    seed: bool = True  # seed the default inventory when no state file exists

    def timings(self) -> Timings:
        return PROFILES[self.profile].with_overrides(self.timing_overrides)
