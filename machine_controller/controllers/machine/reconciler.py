"""The Machine controller: the generic lifecycle of the Machine API (docs/compatibility.md#machine-phases) around
an `Actuator` (controllers/provider.py). Phases, the finalizer, drain, conditions, events and status live here;
everything of the cloud is behind the actuator, and this module imports no provider.

Where MAO waits inside a reconcile, this requeues: a Machine in Provisioning is driven step by step by
`actuator.provision` until its instance runs; one in Deleting by the drainer and `actuator.delete`.
Only `InvalidMachineConfiguration` leads to Failed; every provider fault goes back to the queue's backoff.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from typing import Any, Sequence

import structlog

from api import keys
from api.machine import (
    Machine,
    MachineConditionReason,
    MachineConditionType,
    MachineErrorReason,
    MachinePhase,
    decide_authority,
)
from api.meta import (
    Condition,
    ConditionSeverity,
    false_condition,
    format_time,
    now,
    set_condition,
    true_condition,
    unknown_condition,
)
from machine_controller.controllers.machine.drain import Drainer
from machine_controller.controllers.machine.metrics import ITEMS as MACHINE_ITEMS
from machine_controller.controllers.machine.metrics import MachineMetrics, machine_families
from machine_controller.controllers.mao_metrics import MaoCollector
from machine_controller.controllers.nodes.matching import INDEX_PROVIDER_ID, NodeMachineMatching
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.nodes.storage import hold_for_volumes, volume_attachments
from machine_controller.controllers.provider import (
    Actuator,
    ActuatorError,
    InstanceNotOwned,
    InvalidMachineConfiguration,
    MissingDependency,
    Progress,
)
from machine_controller.controllers.resources import MACHINES, NODES
from machine_controller.runtime.controller import Controller, OwnWrites, Result, enqueue_object, unless_own_write
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import EventHandler, Informer, Store
from machine_controller.runtime.kube import Rest, is_not_found, object_key
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.workqueue import WorkQueue
from machine_controller.runtime.writes import write

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class MachineTiming:
    """Requeue delays (seconds). MAO uses 30 s for everything; waiting for a guest IP is shorter, since that is
    what holds a new Machine back."""

    provisioned_s: float = 30.0
    waiting_for_ip_s: float = 5.0
    drain_retry_s: float = 20.0  # MAO's drain RequeueAfter
    instance_deleting_s: float = 5.0


class MachineReconciler:
    def __init__(self, rest: Rest, machines: Store, actuator: Actuator, events: EventRecorder,
                 metrics: MachineMetrics, timing: MachineTiming = MachineTiming(), nodes: Store | None = None,
                 matching: NodeMachineMatching | None = None):
        """`nodes`: the Node informer's cache, which the drain reads (drain.py). `matching`: given when this
        project's nodelink runs in the same process (app.py); a Machine whose Node registered before its
        provisioning ended then gets its nodeRef and the phase Running in the status write that ends the
        provisioning: one status write instead of two (`Provisioned`, then nodelink's `Running`), the Node found as
        nodelink would find it (docs/compatibility.md#nodelink, docs/architecture.md#matching-nodes-and-machines)."""
        self._rest = rest
        self._machines = machines
        self._actuator = actuator
        self._events = events
        self._metrics = metrics
        self._timing = timing
        self._drainer = Drainer(rest, nodes)
        # A pass goes on after its writes (the finalizer, then Provisioning with the instance's id), so the events
        # of those writes have nothing to tell it.
        self.own_writes = OwnWrites()
        # Machine key -> (uid, Node) whose drain this process finished in the deletion under way: the passes that
        # stop and remove the VM do not drain again (see `_delete`).
        self._drained: dict[str, tuple[str, str]] = {}
        # Machines whose Node vanished or stopped being Ready since their last pass: the next pass looks at the
        # instance afresh (`node_lost`).
        self._doubted: set[str] = set()
        self._matching = matching

    # --- entry point ----------------------------------------------------------------------------------------
    def node_lost(self, key: str) -> None:
        """The Machine `key`'s Node vanished or stopped being Ready: its instance may be gone or stopped this very
        moment, so its next pass judges it from what the provider says after that pass began."""
        self._doubted.add(key)

    def reconcile(self, key: str) -> Result | None:
        cached = self._machines.get(key)
        if cached is None:
            self._doubted.discard(key)
            self._drained.pop(key, None)
            self._actuator.forget(key)
            return None
        obj = copy.deepcopy(cached)  # the informer's object is shared with every reader: never written in place
        machine = self._authoritative(obj, Machine.from_dict(obj))
        if machine is None:
            return None  # a doubt about its Node waits for the Machine to be given back
        fresh = key in self._doubted
        self._doubted.discard(key)
        if machine.metadata.deleting:
            return self._delete(obj, machine)
        if keys.MACHINE_FINALIZER not in machine.metadata.finalizers:
            obj.update(self._patch_meta(obj, {"finalizers": [*machine.metadata.finalizers,
                                                             keys.MACHINE_FINALIZER]}))
            machine = Machine.from_dict(obj)
        phase = machine.status.phase or ""
        if phase == MachinePhase.FAILED:
            return None  # terminal: only deletion moves a Failed Machine on (docs/compatibility.md#machine-phases)
        problem = _invalid_machine(machine)
        if problem:
            # MAO retries such a Machine for ever with FailedValidate events; it can never be built as written,
            # so it ends Failed like any other invalid configuration, and nothing is created.
            self._events.warning(obj, "FailedValidate", problem)
            self._invalid(obj, machine, problem)
            return None
        if phase in ("", MachinePhase.PROVISIONING):
            return self._provision(obj, machine)
        return self._refresh(obj, machine, fresh=fresh)

    def _authoritative(self, obj: dict, machine: Machine) -> Machine | None:
        """MAO's check before anything else, deletion included (docs/compatibility.md#authoritativeapi): a Machine
        whose `status.authoritativeAPI` is `ClusterAPI` or `Migrating` gets `Paused=True` and nothing more (no
        instance call, no finalizer change, no drain), so a deletion waits for the Machine to be given back; given
        back, `Paused=False` and the pass goes on. The Machine as written, or None when it is left alone."""
        decided = decide_authority(machine.spec.authoritative_api, machine.status.authoritative_api,
                                   machine.status.conditions, now())
        if decided.problem:
            self._events.warning(obj, "InvalidAuthoritativeAPI", decided.problem)
        if decided.status is not None:
            # Guarded: the conditions are sent whole, from the Machine this pass read.
            updated = write(self._rest, MACHINES, obj, status=decided.status, guarded=True,
                            stamp={"lastUpdated": format_time(now())})
            if updated is not None:
                self.own_writes.record(updated)
                obj.update(updated)
                machine = Machine.from_dict(obj)
                log.info("authoritative API", authoritative_api=machine.status.authoritative_api,
                         paused=not decided.machine_api)
        return machine if decided.machine_api else None

    # --- provisioning ---------------------------------------------------------------------------------------
    def _provision(self, obj: dict, machine: Machine) -> Result | None:
        # The phase Provisioning is written after the first step, with what it tells (the new instance's id), in
        # one status write (`_record_provisioning`); a step that fails writes it with its condition.
        try:
            progress = self._actuator.provision(machine)
        except InvalidMachineConfiguration as e:
            self._events.warning(obj, "FailedCreate", f"InvalidConfiguration: {e}")
            self._invalid(obj, machine, str(e))
            return None
        except InstanceNotOwned as e:
            return self._not_owned(obj, machine, e)
        except MissingDependency as e:
            self._create_problem(obj, machine, str(e))
            raise
        except ActuatorError as e:
            self._create_problem(obj, machine, str(e), event=False)
            raise
        if not progress.done:  # a done step is recorded whole by `_refresh`: one metadata and one status write
            self._record_provisioning(obj, machine, progress)
            log.info("provisioning", waiting_for=progress.waiting_for, instance_state=progress.instance_state)
            return Result(requeue_after=progress.requeue_after)
        # Told once the end of provisioning is written: a pass that read a cache without that write yet gets 409
        # there (`_refresh` guards it) and tells nothing.
        result = self._refresh(obj, machine)
        self._events.normal(obj, "Created", f"Created Machine {machine.metadata.name}")
        return result

    def _invalid(self, obj: dict, machine: Machine, message: str) -> None:
        self._metrics.create_failed.labels(machine.metadata.name, machine.metadata.namespace,
                                           MachineErrorReason.INVALID_CONFIGURATION).inc()
        self._fail(obj, machine, MachineErrorReason.INVALID_CONFIGURATION, message)

    def _record_provisioning(self, obj: dict, machine: Machine, progress: Progress) -> None:
        """What a provisioning step tells, in one status write, and only what is new: the phase Provisioning and
        `InstanceExists` the first time (later, only a problem or the end of provisioning changes it: a Machine told
        that the instance it named is not its own keeps saying so); the instance's id in `status.providerStatus`
        (`progress.provider_status`) as soon as it is known, before the next step acts on it (the `VmId` annotation
        and providerID follow in one metadata write when provisioning ends, `_refresh`); a refused start as a
        Warning event and `InstanceRunning=False`, retried with the actuator's backoff, never failing the Machine. A
        state the instance only passes through on its way up (image_locked, down, wait_for_launch, powering_up) is
        not written: the phase says where the Machine is going, and each passing state would cost a write per
        Machine (hack/bench/machines.py). docs/architecture.md#from-a-machine-to-a-vm-and-back."""
        conditions = []
        if not machine.status.phase and progress.instance_id:
            conditions.append(true_condition(MachineConditionType.INSTANCE_EXISTS))
        elif not machine.status.phase:
            conditions.append(false_condition(MachineConditionType.INSTANCE_EXISTS,
                                              MachineConditionReason.INSTANCE_NOT_CREATED, ConditionSeverity.WARNING,
                                              "Instance has not been created"))
        if progress.problem:
            self._events.warning(obj, "FailedStart", progress.problem)
            conditions.append(false_condition(MachineConditionType.INSTANCE_RUNNING,
                                              MachineConditionReason.START_REFUSED, ConditionSeverity.WARNING,
                                              progress.problem))
        provider_status = None
        if progress.provider_status:
            provider_status = {**(machine.status.provider_status or {}), **progress.provider_status}
        elif not conditions:
            return  # a passing state of an instance already recorded: nothing new
        # Guarded by resourceVersion when it records the instance, as the metadata write that recorded it was: a
        # Machine changed meanwhile is looked at again first (docs/architecture.md#from-a-machine-to-a-vm-and-back).
        self._write_status(obj, machine, MachinePhase.PROVISIONING, conditions=conditions,
                           provider_status=provider_status, guarded=provider_status is not None)

    def _create_problem(self, obj: dict, machine: Machine, message: str, event: bool = True) -> None:
        """A Warning event and condition that say what blocks creation; the queue retries with backoff."""
        self._metrics.create_failed.labels(machine.metadata.name, machine.metadata.namespace,
                                           MachineErrorReason.CREATE_ERROR).inc()
        if event:
            self._events.warning(obj, "FailedCreate", message)
        condition = false_condition(MachineConditionType.INSTANCE_EXISTS, MachineConditionReason.INSTANCE_NOT_CREATED,
                                    ConditionSeverity.WARNING, message)
        self._write_status(obj, machine, machine.status.phase or MachinePhase.PROVISIONING, conditions=[condition])

    def _not_owned(self, obj: dict, machine: Machine, e: InstanceNotOwned) -> Result:
        """The Machine named an instance that is not its own (a manifest copied from another Machine carries its
        providerID and VmId): a Warning event and `InstanceExists=False` say which, and the references are dropped,
        so that neither this controller nor nodelink (which matches Nodes by providerID) takes that instance for
        this Machine's again. The next pass goes on with the instance of the Machine's own name
        (docs/architecture.md#acting-only-on-what-is-ours)."""
        message = f"{e}; the Machine's references to it are dropped, and it goes on with the instance of its name"
        self._events.warning(obj, MachineConditionReason.INSTANCE_NOT_OWNED, message)
        annotations = machine.metadata.annotations
        dropped: dict[str, Any] = {k: None for k in (keys.ANNOTATION_VM_ID, keys.ANNOTATION_INSTANCE_STATE)
                                   if k in annotations}
        if annotations.get(keys.ANNOTATION_VM_ID) not in (None, e.instance_id):
            dropped.pop(keys.ANNOTATION_VM_ID)  # another id, not the one refused: the next look judges it
        drop_provider_id = machine.spec.provider_id == e.provider_id
        if dropped or drop_provider_id:
            obj.update(self._patch_meta(obj, {"annotations": dropped},
                                        spec={"providerID": None} if drop_provider_id else None))
            for k in dropped:
                annotations.pop(k, None)
            if drop_provider_id:
                machine.spec.provider_id = None
            machine.metadata.resource_version = obj["metadata"]["resourceVersion"]
        condition = false_condition(MachineConditionType.INSTANCE_EXISTS, MachineConditionReason.INSTANCE_NOT_OWNED,
                                    ConditionSeverity.WARNING, message)
        # What the status recorded of an instance (its id while provisioning) is dropped with the condition: the
        # next look records the instance of the Machine's own name.
        self._write_status(obj, machine, machine.status.phase or MachinePhase.PROVISIONING, conditions=[condition],
                           drop_provider_status=True)
        return Result(requeue=True)

    def _record_instance(self, obj: dict, machine: Machine, progress: Progress, passing: bool = False) -> None:
        """While deleting: pin the instance's identity on the Machine when it does not show it yet (a Machine
        deleted before its provisioning ended shows it in its status only). `passing`: the state is one the
        instance passes through on its way out (powering_down, down), written only with the id the first time:
        the phase Deleting says where the Machine is going, and each passing state would cost a write per Machine
        (hack/bench/machines.py); the state is written when the deletion stalls (a VM whose host does not
        answer)."""
        if not progress.instance_id:
            return
        if passing and machine.metadata.annotations.get(keys.ANNOTATION_VM_ID) == progress.instance_id:
            return
        annotations = {keys.ANNOTATION_VM_ID: progress.instance_id}
        if progress.instance_state:
            annotations[keys.ANNOTATION_INSTANCE_STATE] = progress.instance_state
        self._annotate(obj, machine, annotations)

    # --- steady state ---------------------------------------------------------------------------------------
    def _refresh(self, obj: dict, machine: Machine, fresh: bool = False) -> Result | None:
        try:
            st = self._actuator.status(machine, fresh=fresh)
        except InstanceNotOwned as e:
            return self._not_owned(obj, machine, e)
        except ActuatorError as e:
            condition = unknown_condition(MachineConditionType.INSTANCE_EXISTS,
                                          MachineConditionReason.ERROR_CHECKING_PROVIDER, str(e))
            self._metrics.update_failed.labels(machine.metadata.name, machine.metadata.namespace,
                                               MachineErrorReason.UPDATE_ERROR).inc()
            self._write_status(obj, machine, machine.status.phase or MachinePhase.PROVISIONED, conditions=[condition])
            raise
        if st is None:
            if machine.spec.provider_id or machine.status.addresses:
                condition = false_condition(MachineConditionType.INSTANCE_EXISTS,
                                            MachineConditionReason.INSTANCE_MISSING, ConditionSeverity.WARNING,
                                            "Instance not found on provider")
                self._fail(obj, machine, None, "Can't find created instance.", conditions=[condition])
                return None
            self._write_status(obj, machine, MachinePhase.PROVISIONING)
            return Result(requeue=True)  # provisioned again, as a new pass: its own write wakes nothing
        self._annotate(obj, machine, {keys.ANNOTATION_VM_ID: st.instance_id,
                                      keys.ANNOTATION_INSTANCE_STATE: st.state}, provider_id=st.provider_id)
        addresses = [a.to_dict() for a in st.addresses] if st.addresses is not None and st.has_ip else None
        # Standalone, our nodelink writes Running with the nodeRef of a Provisioned Machine, and this pass then finds
        # nothing to write; beside MAO, whose nodelink writes only the nodeRef, Running is written here
        # (docs/compatibility.md#nodelink).
        phase = MachinePhase.RUNNING if machine.status.node_ref else MachinePhase.PROVISIONED
        node_ref = None
        if phase == MachinePhase.PROVISIONED and addresses and self._matching is not None:
            node = self._matching.node_for_new_machine(machine.key, st.provider_id, addresses)
            if node is not None:
                node_ref = {"kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}
                phase = MachinePhase.RUNNING
        conditions = [true_condition(MachineConditionType.INSTANCE_EXISTS)]
        if _has_false(machine, MachineConditionType.INSTANCE_RUNNING):
            conditions.append(true_condition(MachineConditionType.INSTANCE_RUNNING))  # a refused start got through
        # Guarded by the resourceVersion the pass read: two passes may follow each other before the watch brings the
        # first one's write (a wake by the VM list, another writer's event), and the second, still seeing the phase
        # before, would write and count the change again (docs/architecture.md#from-a-machine-to-a-vm-and-back).
        self._write_status(obj, machine, phase, conditions=conditions, addresses=addresses,
                           provider_status=st.provider_status, node_ref=node_ref, guarded=True)
        if node_ref is not None:
            log.info("linked machine to node", node=node_ref["name"])
        if st.addresses is not None and not st.has_ip:
            return Result(requeue_after=self._timing.waiting_for_ip_s)  # the guest agent has not reported yet
        if phase == MachinePhase.PROVISIONED:
            return Result(requeue_after=self._timing.provisioned_s)
        return None

    # --- deletion -------------------------------------------------------------------------------------------
    def _delete(self, obj: dict, machine: Machine) -> Result | None:
        node = machine.status.node_ref.name if machine.status.node_ref else None
        drains = (keys.MACHINE_FINALIZER in machine.metadata.finalizers and node is not None
                  and keys.ANNOTATION_EXCLUDE_NODE_DRAINING not in machine.metadata.annotations
                  and not machine.spec.lifecycle_hooks.pre_drain)
        if machine.status.phase != MachinePhase.DELETING and not drains:
            self._write_status(obj, machine, MachinePhase.DELETING)
        if keys.MACHINE_FINALIZER not in machine.metadata.finalizers:
            return None
        drained_here = self._drained.get(machine.key) == (machine.metadata.uid, node)
        if drained_here and _has_true(machine, MachineConditionType.DRAINED):
            # This process drained the Node in this deletion, and the Machine says so: the passes that stop and
            # remove the VM (several per deleted Machine, each a read of the Node and of its pods:
            # docs/benchmarks.md#figures-behind-the-codes-choices) do not drain it again. The Node stays cordoned, so
            # only a pod bound to it by name could come since, and the stop ends it as a re-drain refused by its
            # PodDisruptionBudget could not: the VM may already be going down. A restarted controller drains again
            # (docs/compatibility.md#machine-phases).
            pass
        elif node and keys.ANNOTATION_EXCLUDE_NODE_DRAINING not in machine.metadata.annotations:
            if machine.spec.lifecycle_hooks.pre_drain:
                return None  # the hook's owner edits the Machine when it is done
            # The phase Deleting goes with the drain's condition, in one status write (a thousand Machines
            # deleted at once otherwise cost a thousand writes more); a drain that cannot start shows it alone.
            try:
                drained = self._drainer.drain(node)
            except Exception:
                self._write_status(obj, machine, MachinePhase.DELETING)
                raise
            already_drained = _has_true(machine, MachineConditionType.DRAINED)
            condition = true_condition(MachineConditionType.DRAINED) if drained.done else false_condition(
                MachineConditionType.DRAINED, MachineConditionReason.DRAIN_ERROR, ConditionSeverity.WARNING,
                f"could not drain machine: {drained.message}")
            self._write_status(obj, machine, MachinePhase.DELETING, conditions=[condition])
            if not drained.done:
                self._events.warning(obj, "DrainRequeued", drained.message)
                return Result(requeue_after=self._timing.drain_retry_s if "PodDisruptionBudget" in drained.message
                              else self._timing.instance_deleting_s)
            if not already_drained:
                self._events.normal(obj, "Deleted", drained.message)
            self._drained[machine.key] = (machine.metadata.uid, node)
        if machine.spec.lifecycle_hooks.pre_terminate:
            return None
        try:
            progress = self._actuator.delete(machine)
        except InstanceNotOwned as e:
            return self._not_owned(obj, machine, e)
        except ActuatorError as e:
            self._metrics.delete_failed.labels(machine.metadata.name, machine.metadata.namespace,
                                               MachineErrorReason.DELETE_ERROR).inc()
            self._deletion_waits(obj, machine, str(e))
            raise
        if not progress.done:
            self._record_instance(obj, machine, progress, passing=not progress.problem)
            if progress.problem:
                self._delete_problem(obj, machine, progress.problem)
                if not progress.requeue_after:
                    return Result(requeue=True)  # the queue's backoff for this Machine, growing while it lasts
            return Result(requeue_after=progress.requeue_after or self._timing.instance_deleting_s)
        if node:
            waiting = self._release_storage(obj, machine, node)
            if waiting is not None:
                return waiting
            try:
                self._rest.delete(NODES, node)
            except Exception as e:
                if not is_not_found(e):
                    raise
        self._events.normal(obj, "Deleted", f"Deleted machine {machine.metadata.name}")
        finalizers = [f for f in machine.metadata.finalizers if f != keys.MACHINE_FINALIZER]
        self._patch_meta(obj, {"finalizers": finalizers})
        self._drained.pop(machine.key, None)
        return None

    def _release_storage(self, obj: dict, machine: Machine, node: str) -> Result | None:
        """The VM is gone, so nothing writes through the Node's volumes any more; but Kubernetes keeps a volume
        attached to a Node that cannot confirm the unmount for six minutes, and a ReadWriteOnce volume (a
        StatefulSet's disk) attaches nowhere else meanwhile. So a Node that still has VolumeAttachments gets the
        out-of-service taint, and is deleted once they are gone (controllers/nodes/storage.py). None: the Node may go
        now."""
        attached = volume_attachments(self._rest, node)
        if not attached:
            return None  # the Node, read only for its taints, is not read at all (one read per deleted Machine)
        try:
            current = self._rest.get(NODES, node)
        except Exception as e:
            if is_not_found(e):
                return None
            raise
        return hold_for_volumes(self._rest, current, self._events, obj, "the VM is gone", attached=attached)

    def _deletion_waits(self, obj: dict, machine: Machine, error: str) -> None:
        """The cloud could not be asked (unreachable, credentials refused) or could not act: nothing proves the
        instance gone, so the finalizer stays. The Machine says why its deletion waits, with a Warning event and
        `InstanceExists=Unknown`, and the work queue retries it with its growing backoff: a deletion always ends
        once the cloud answers, and never on a guess (docs/architecture.md#acting-only-on-what-is-ours)."""
        message = f"the instance cannot be confirmed gone, so the deletion waits and is retried with backoff: {error}"
        self._events.warning(obj, "FailedDelete", message)
        condition = unknown_condition(MachineConditionType.INSTANCE_EXISTS,
                                      MachineConditionReason.ERROR_CHECKING_PROVIDER, message)
        self._write_status(obj, machine, MachinePhase.DELETING, conditions=[condition])

    def _delete_problem(self, obj: dict, machine: Machine, message: str) -> None:
        """The cloud cannot say whether the instance is off (its host does not answer): nothing is sent to it, and
        `InstanceRunning=Unknown` with a Warning event says why the deletion waits
        (docs/fencing.md#why-the-deletion-path-is-fence-safe-too)."""
        self._events.warning(obj, MachineConditionReason.INSTANCE_STATE_UNKNOWN, message)
        condition = unknown_condition(MachineConditionType.INSTANCE_RUNNING,
                                      MachineConditionReason.INSTANCE_STATE_UNKNOWN, message)
        self._write_status(obj, machine, MachinePhase.DELETING, conditions=[condition])

    # --- writes ---------------------------------------------------------------------------------------------
    def _annotate(self, obj: dict, machine: Machine, annotations: dict[str, str],
                  provider_id: str | None = None) -> None:
        """Set annotations (and spec.providerID) when they differ, keeping `obj` and `machine` current so the
        status write that follows is guarded by the new resourceVersion."""
        stale = any(machine.metadata.annotations.get(k) != v for k, v in annotations.items())
        if not stale and (provider_id is None or machine.spec.provider_id == provider_id):
            return
        updated = self._patch_meta(obj, {"annotations": annotations},
                                   spec={"providerID": provider_id} if provider_id else None)
        obj.update(updated)
        machine.metadata.annotations.update(annotations)
        if provider_id:
            machine.spec.provider_id = provider_id
        machine.metadata.resource_version = updated["metadata"]["resourceVersion"]

    def _patch_meta(self, obj: dict, metadata: dict[str, Any], spec: dict[str, Any] | None = None) -> dict:
        """Write metadata (and spec) guarded by resourceVersion (docs/architecture.md#writing-an-object): a
        concurrent change ends the pass, and the next one starts from the newer object. The object as written."""
        updated = write(self._rest, MACHINES, obj, metadata=metadata, spec=spec, guarded=True)
        if updated is None:
            return obj
        self.own_writes.record(updated)
        return updated

    def _fail(self, obj: dict, machine: Machine, reason: str | None, message: str, conditions=()) -> None:
        # MAO marks the instance state Unknown in both places when a Machine fails
        # (docs/compatibility.md#machine-phases).
        self._annotate(obj, machine, {keys.ANNOTATION_INSTANCE_STATE: keys.INSTANCE_STATE_UNKNOWN})
        provider_status = dict(machine.status.provider_status or {})
        if "instanceState" in provider_status:
            provider_status["instanceState"] = keys.INSTANCE_STATE_UNKNOWN
        self._write_status(obj, machine, MachinePhase.FAILED, conditions=list(conditions), error_reason=reason,
                           error_message=message, provider_status=provider_status or None)

    def _write_status(self, obj: dict, machine: Machine, phase: str, conditions: Sequence[Condition] = (),
                      addresses=None, provider_status: dict | None = None, error_reason: str | None = None,
                      error_message: str | None = None, drop_provider_status: bool = False,
                      node_ref: dict | None = None, guarded: bool = False) -> None:
        old = obj.get("status") or {}
        merged = machine.status.conditions
        stamp = now()
        for c in conditions:
            merged = set_condition(merged, c, at=stamp)
        merged = self._hook_conditions(machine, merged, stamp)
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": [c.to_dict() for c in merged],
            # MAO clears the error fields on every write and sets them only for Failed
            # (docs/compatibility.md#machine-phases).
            "errorReason": error_reason if phase == MachinePhase.FAILED else None,
            "errorMessage": error_message if phase == MachinePhase.FAILED else None,
        }
        if addresses is not None:
            status["addresses"] = addresses
        if node_ref is not None:
            status["nodeRef"] = node_ref
        if provider_status is not None:
            status["providerStatus"] = provider_status
        elif drop_provider_status:
            status["providerStatus"] = None  # a merge patch's null removes the key
        updated = write(self._rest, MACHINES, obj, status=status, guarded=guarded,
                        stamp={"lastUpdated": format_time(stamp)})
        if updated is None:
            return
        self.own_writes.record(updated)
        obj.update(updated)
        machine.status = Machine.from_dict(updated).status
        machine.metadata.resource_version = updated["metadata"]["resourceVersion"]
        if old.get("phase") != phase:
            self._metrics.observe_phase(phase, obj["metadata"].get("creationTimestamp"))
            log.info("phase changed", old=old.get("phase"), new=phase)

    @staticmethod
    def _hook_conditions(machine: Machine, conditions: list, stamp: dt.datetime) -> list:
        hooks = machine.spec.lifecycle_hooks
        for ctype, present in ((MachineConditionType.DRAINABLE, hooks.pre_drain),
                               (MachineConditionType.TERMINABLE, hooks.pre_terminate)):
            if present:
                verb = "Drain" if ctype == MachineConditionType.DRAINABLE else "Terminate"
                owners = ", ".join(h.name for h in present)
                c = false_condition(ctype, MachineConditionReason.HOOK_PRESENT, ConditionSeverity.WARNING,
                                    f"{verb} operation currently blocked by: {owners}")
            else:
                c = true_condition(ctype)
            conditions = set_condition(conditions, c, at=stamp)
        return conditions


def _has_true(machine: Machine, ctype: str) -> bool:
    return any(c.type == ctype and c.status == "True" for c in machine.status.conditions)


def _has_false(machine: Machine, ctype: str) -> bool:
    return any(c.type == ctype and c.status == "False" for c in machine.status.conditions)


def _invalid_machine(machine: Machine) -> str | None:
    """What MAO's validation refuses before any provider call, with the field it names."""
    if not machine.cluster_id:
        return f"metadata.labels[{keys.LABEL_CLUSTER}]: Required value: the cluster's infrastructure ID"
    if machine.spec.provider_spec.value is None:
        return "spec.providerSpec.value: Required value: the provider spec of the Machine"
    return None


def node_lost_handler(machines: Store, reconciler: MachineReconciler, queue: WorkQueue) -> EventHandler:
    """A Node deleted, or whose Ready condition leaves True, makes the Machine of its providerID look at its
    instance afresh (`MachineReconciler.node_lost`). Nodelink's rewrite of the Machine at a Ready flip is not
    enough: the node controller deletes the Node of a removed VM at once, nodelink then finds no Node to link,
    and the Machine stayed `Running` without a VM until the next resync (docs/compatibility.md#machine-phases).
    A Machine being deleted is not woken: its deletion removes the Node itself."""

    def lost(node: dict) -> None:
        pid = (node.get("spec") or {}).get("providerID")
        for machine in machines.by_index(INDEX_PROVIDER_ID, pid) if pid else []:
            if not machine["metadata"].get("deletionTimestamp"):
                key = object_key(machine)
                reconciler.node_lost(key)
                queue.add(key)

    def on_update(old: dict, new: dict) -> None:
        if node_ready(old) == "True" and node_ready(new) != "True":
            lost(new)

    return EventHandler(on_update=on_update, on_delete=lost)


def add_machine_controller(manager: Manager, rest: Rest, machines: Informer, nodes: Informer, actuator: Actuator,
                           events: EventRecorder, queue: WorkQueue, workers: int,
                           mao: MaoCollector | None = None,
                           matching: NodeMachineMatching | None = None) -> MachineReconciler:
    """`machines` carries the providerID index (matching.py), by which a Node's loss reaches its Machine."""
    reconciler = MachineReconciler(rest, machines.store, actuator, events, MachineMetrics.of(manager.registry),
                                   nodes=nodes.store, matching=matching)
    machines.add_handler(unless_own_write(enqueue_object(queue), reconciler.own_writes))
    nodes.add_handler(node_lost_handler(machines.store, reconciler, queue))
    if mao is not None:
        mao.add(MACHINE_ITEMS, machines.store.list, machine_families)
    manager.add_controller(Controller(queue.name, queue, reconciler.reconcile, workers=workers,
                                      registry=manager.registry))
    return reconciler
