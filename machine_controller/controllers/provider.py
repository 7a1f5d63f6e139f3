"""The seam between the generic Machine API controllers and a cloud provider (docs/architecture.md#the-seam).

The Machine controller knows phases, the finalizer, drain, conditions and events; it reaches the cloud only
through `Actuator`, and the node controller only through `Instances`. A provider (`machine_controller.ovirt`)
implements these Protocols and raises these errors; only the wiring module (`machine_controller.app`) knows
both sides, and import-linter forbids `controllers` from importing a provider.

The verbs are resumable step machines, not MAO's blocking exists/create/update/delete: each call looks at
where the instance is, does the next idempotent step and says how long to wait before looking again, so a
worker is never held by a slow engine and a killed controller resumes where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, Sequence

from api.machine import Machine
from api.meta import NodeAddress

# --- errors: their meaning is their type, decided by the provider where it understands the fault ---------------

class InvalidMachineConfiguration(Exception):
    """The Machine can never be built as specified. The only road to phase Failed, with errorReason
    InvalidConfiguration (docs/compatibility.md#machine-phases)."""


class ActuatorError(Exception):
    """The provider could not act now; retried with backoff, never Failed. `transient` makes the controller
    log it as one line, without a traceback."""

    transient = True


class ActionRefused(ActuatorError):
    """The cloud refused the action outright (e.g. the VM is locked): nothing was done, so it may be sent again
    without doubling it. A lost answer is a plain ActuatorError: the action may have happened."""


class InstanceNotOwned(ActuatorError):
    """The object names (by providerID or a recorded instance id) an instance that is not its own: another
    Machine's, named in a copied manifest (docs/architecture.md#acting-only-on-what-is-ours). Nothing was done to
    that instance. The controller reports it and drops the Machine's references to it (`instance_id`,
    `provider_id`); the Machine then goes on with the instance of its own name."""

    def __init__(self, message: str, instance_id: str, provider_id: str):
        super().__init__(message)
        self.instance_id = instance_id
        self.provider_id = provider_id


class MissingDependency(ActuatorError):
    """Something the spec names does not exist in the cloud yet (a template, a network...). Reported to the
    user as a Warning event and `InstanceExists=False`, and checked again with backoff: an admin may create it."""


# --- results ----------------------------------------------------------------------------------------------------

@dataclass
class Progress:
    """The outcome of one step: done, or what is awaited and when to look again.

    `problem` is set when the instance exists but the cloud refuses to move it on (for example no host can run
    it): the controller shows it as a Warning event and a condition, and keeps retrying. A deletion step with a
    problem and no `requeue_after` (the cloud cannot tell whether the instance is off, so nothing is sent to it)
    is retried with the work queue's per-object backoff.

    `provider_status`, from `provision`: what the Machine's `status.providerStatus` is to record of an instance it
    does not record yet (its id, the first time it is known), written with the phase Provisioning in one status
    write; None when there is nothing new to record (docs/architecture.md#from-a-machine-to-a-vm-and-back)."""

    done: bool
    requeue_after: float = 0.0
    waiting_for: str = ""
    instance_id: str | None = None
    instance_state: str | None = None
    problem: str | None = None
    provider_status: dict | None = None


@dataclass
class InstanceStatus:
    """What the Machine shows of its instance: providerID, addresses, state."""

    instance_id: str
    state: str
    provider_id: str
    addresses: list[NodeAddress] | None  # None: leave them as they are (a stopped instance reports nothing)
    has_ip: bool
    provider_status: dict = field(default_factory=dict)


class Actuator(Protocol):
    """What the Machine controller asks of a provider."""

    def provision(self, machine: Machine) -> Progress:
        """Take the next step towards a running instance for `machine`; `done` once it runs. Raises
        InvalidMachineConfiguration, MissingDependency or ActuatorError."""

    def status(self, machine: Machine, fresh: bool = False) -> InstanceStatus | None:
        """The instance as it is now, or None when there is none. With `fresh`, from what the cloud says after
        this call began, never from a view the provider kept from before (the Machine's Node vanished or stopped
        being Ready: its instance may have gone a moment ago)."""

    def delete(self, machine: Machine) -> Progress:
        """Take the next step towards no instance (stopped, data disks detached, removed); `done` once gone."""

    def forget(self, key: str) -> None:
        """The Machine `key` is gone from the API before its deletion was seen through (its finalizer removed by
        hand): whatever the provider remembers of it goes, so a Machine created again under the same name is not
        judged by the old one's history. Its instance, if any, is left to its user."""


@dataclass(frozen=True)
class NodeInstance:
    """The instance behind a Node, as the node controller needs it."""

    provider_id: str
    running: bool


class Instances(Protocol):
    """What the node controller asks of a provider: whose instance is this Node, and does it still exist."""

    def owns(self, provider_id: str) -> bool:
        """Whether this provider manages instances with this providerID (its scheme)."""

    def find(self, node_name: str, provider_id: str | None) -> NodeInstance | None:
        """The instance behind the Node: by its providerID when it has one, else by the Node's name. None only
        when the provider is sure it does not exist; a failed lookup raises ActuatorError."""


# --- several engines, for Cluster API's infrastructure controllers (controllers/infrastructure/) -----------------

@dataclass(frozen=True)
class EngineIdentity:
    """The Secret naming one engine and its credentials: an OvirtCluster's `spec.identityRef`, in its namespace
    (the contract's multi-tenancy rule: one controller serves Clusters on several engines)."""

    namespace: str
    secret_name: str


class Engines(Protocol):
    """What the OvirtCluster and OvirtMachine controllers ask of a provider that serves several engines: one
    `Actuator` per engine identity, made when first asked for and made again when its Secret changes. A Secret
    missing or unusable raises MissingDependency naming it and the key at fault."""

    def actuator(self, identity: EngineIdentity) -> Actuator:
        """The actuator of the engine `identity` names."""

    def missing_clusters(self, identity: EngineIdentity, cluster_ids: Sequence[str]) -> list[str]:
        """Those of `cluster_ids` the engine has no cluster of; ActuatorError when the engine cannot be asked."""

    def forget(self, key: str) -> None:
        """`Actuator.forget` for every engine: the object `key` left the API before its deletion was seen through."""


# --- power control, for fencing (docs/fencing.md) ---------------------------------------------------------------

class PowerState(StrEnum):
    """A VM's power as fencing must see it. UNKNOWN is never taken as off: the hypervisor has lost its host, and
    the VM may still be running and writing to its disks."""

    ON = "On"  # running, paused or not responding: it may still write, so it must be stopped
    STOPPING = "Stopping"
    OFF = "Off"  # confirmed off by the hypervisor
    STARTING = "Starting"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Power:
    state: PowerState
    detail: str  # the provider's own word for the state, for events and logs


class PowerControl(Protocol):
    """What the remediation controller asks of a provider. Instances are found by providerID, never searched by
    name, and each call names the target (its Machine's name, else its Node's): an instance found by the id that
    bears another name is not the target's, and the call raises InstanceNotOwned without reading it or acting on
    it (docs/architecture.md#acting-only-on-what-is-ours).

    A power action is sent once (docs/fencing.md#power-actions-are-sent-once): the provider never repeats it on
    its own, and sends nothing while the same action, sent earlier, is still being carried out. ActionRefused
    means the cloud refused it (nothing happened); any other ActuatorError may be a lost answer, so the caller
    looks at the power again before asking once more."""

    def power(self, provider_id: str, name: str) -> Power | None:
        """The instance's power state; None when the instance does not exist."""

    def power_off(self, provider_id: str, name: str) -> bool:
        """Hard power-off (not a guest shutdown). True when it was sent; False when one sent earlier is still being
        carried out, and nothing was sent."""

    def power_off_under_way(self, provider_id: str, name: str) -> bool:
        """Whether a power-off sent earlier is still being carried out (the cloud took it and has not ended it)."""

    def stopped_by_late_power_off(self, provider_id: str, name: str) -> bool:
        """Whether a power-off of ours reached the cloud after our last power-on: a request held on its way that
        stopped the instance once it was started again (docs/fencing.md#requests-whose-answer-was-lost)."""

    def power_on(self, provider_id: str, name: str) -> bool:
        """Start the instance; never while a power-off sent earlier could still land after the start. True when it
        was sent; False when one sent earlier is still being carried out, and nothing was sent."""


class EnginePower(Protocol):
    """What the remediation controller asks of a provider that serves several engines, to fence Cluster API's
    Machines (docs/fencing.md#both-front-ends): the power control of the engine an OvirtCluster's identity names, for
    the VMs of one namespace's OvirtMachines. Such a VM is the target's only when it bears the OvirtMachine's name and
    its owner mark (the VM names of one engine are shared by every namespace); otherwise InstanceNotOwned, as for a VM
    of another name. A Secret missing or unusable raises MissingDependency."""

    def power(self, identity: EngineIdentity, namespace: str) -> PowerControl:
        """The power control of the engine `identity` names, for the OvirtMachines of `namespace`."""
