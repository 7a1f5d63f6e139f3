"""How a remediation ends (docs/fencing.md): the Node healthy (Succeeded or Skipped), a target that is not ours
refused (Skipped, Succeeded=False, so an orchestrator tries its next remediator), or the retries spent: escalation
(the Machine deleted so that its MachineSet replaces it, in either front end: targets.py) or Failed where that is
not allowed."""

from __future__ import annotations

from api.meta import ConditionSeverity, false_condition, true_condition
from api.remediation import OnExhaustion, OvirtRemediation, RemediationPhase
from machine_controller.runtime.controller import Result
from machine_controller.runtime.kube import is_not_found

from .context import CONDITIONS, RemediationContext
from .targets import Target


class Outcomes(RemediationContext):
    def _end_healthy(self, obj: dict, rem: OvirtRemediation, target: Target, phase: RemediationPhase,
                     message: str) -> Result | None:
        self._remove_taints(target.node_name)
        self._metrics.outcomes.labels(rem.metadata.namespace,
                                      "skipped" if phase == RemediationPhase.SKIPPED else "succeeded").inc()
        self._events.normal(obj, "NodeHealthy", message)
        self._write(obj, rem, phase=phase, node_name=target.node_name, message=message,
                    conditions=[false_condition(CONDITIONS.PROCESSING, "NodeHealthy", ConditionSeverity.INFO, message),
                                true_condition(CONDITIONS.SUCCEEDED)])
        return None

    def _refuse_not_ovirt(self, obj: dict, rem: OvirtRemediation, target: Target) -> Result | None:
        """A Node of another provider (or a providerID that names no VM) is not ours to fence: nothing is tainted
        or sent, and Succeeded=False tells an orchestrator such as NodeHealthCheck to try its next remediator
        (docs/architecture.md#acting-only-on-what-is-ours)."""
        self._refuse(obj, rem, target.node_name, "NotAnOvirtVM",
                     f"node {target.node_name or '(none)'} has providerID {target.provider_id!r}, which names "
                     "no oVirt VM: nothing to power-cycle")
        return None

    def _refuse(self, obj: dict, rem: OvirtRemediation, node_name: str, reason: str, message: str) -> None:
        """The target is not ours to fence: `Skipped` with Succeeded=False (an orchestrator tries its next
        remediator) and a Warning saying why; the taints of a cycle already begun go."""
        if rem.status.phase and node_name:
            self._remove_taints(node_name)  # begun by a controller that did not check it, or before a check
        self._metrics.outcomes.labels(rem.metadata.namespace, "skipped").inc()
        self._events.warning(obj, reason, message)
        self._write(obj, rem, phase=RemediationPhase.SKIPPED, message=message,
                    conditions=[false_condition(CONDITIONS.PROCESSING, reason, ConditionSeverity.WARNING, message),
                                false_condition(CONDITIONS.SUCCEEDED, reason, ConditionSeverity.ERROR, message)])

    def _escalate(self, obj: dict, rem: OvirtRemediation, target: Target, last: str) -> Result | None:
        why = f"{last}, after {rem.status.retry_count} power cycle(s)"
        refusal = self._refuse_machine_deletion(rem, target)
        if refusal:
            self._metrics.outcomes.labels(rem.metadata.namespace, "failed").inc()
            self._events.warning(obj, "RemediationFailed", f"{why}; {refusal}")
            self._write(obj, rem, phase=RemediationPhase.FAILED, message=f"{why}; {refusal}",
                        conditions=[false_condition(CONDITIONS.PROCESSING, "Exhausted", ConditionSeverity.WARNING, why),
                                    false_condition(CONDITIONS.SUCCEEDED, "Exhausted", ConditionSeverity.ERROR,
                                                    f"{why}; {refusal}")])
            return None
        machine = target.machine
        assert machine is not None, "a deletion is refused without a Machine"
        self._metrics.outcomes.labels(rem.metadata.namespace, "escalated").inc()
        self._events.warning(obj, "RemediationEscalated", f"{why}; deleting machine {machine['metadata']['name']}"
                                                         " so that its MachineSet replaces it")
        self._write(obj, rem, phase=RemediationPhase.DELETING_MACHINE, message=f"{why}; machine deleted",
                    conditions=[true_condition(CONDITIONS.PERMANENT_NODE_DELETION_EXPECTED)])
        self._delete_machine(target)
        return None

    @staticmethod
    def _refuse_machine_deletion(rem: OvirtRemediation, target: Target) -> str | None:
        """Why the Machine is not deleted on exhaustion: onExhaustion None, no Machine, or the front end's own rule
        (only a Machine its set replaces, never a control-plane one: targets.py)."""
        if rem.spec.on_exhaustion == OnExhaustion.NONE:
            return "onExhaustion is None: the machine is left as it is"
        if target.machine is None:
            return "no Machine to replace"
        return target.front.deletion_refused(target.machine)

    def _delete_machine(self, target: Target) -> None:
        machine = target.machine
        if machine is None or machine["metadata"].get("deletionTimestamp"):
            return
        meta = machine["metadata"]
        try:
            self._rest.delete(target.front.resource, meta["name"], meta["namespace"])
        except Exception as e:
            if not is_not_found(e):
                raise
