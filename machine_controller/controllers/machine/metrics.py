"""The Machine API operator's metric names (docs/compatibility.md#metrics), so OpenShift's dashboards and alerts
(MachineWithNoRunningPhase, MachineWithoutValidNode, ...) work unchanged."""

from __future__ import annotations

import datetime as dt

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from machine_controller.controllers.mao_metrics import timestamp_seconds
from machine_controller.runtime.metrics import family

_PHASE_BUCKETS = (5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 360, 480, 600)


class MachineMetrics:
    def __init__(self, registry: CollectorRegistry | None):
        self.phase_transition = Histogram(
            "mapi_machine_phase_transition_seconds",
            "Number of seconds between Machine creation and Machine phase transition",
            ["phase"], buckets=_PHASE_BUCKETS, registry=registry)
        labels = ["name", "namespace", "reason"]
        self.create_failed = Counter("mapi_instance_create_failed",
                                     "Number of times provider instance create has failed.", labels, registry=registry)
        self.update_failed = Counter("mapi_instance_update_failed",
                                     "Number of times provider instance update has failed.", labels, registry=registry)
        self.delete_failed = Counter("mapi_instance_delete_failed",
                                     "Number of times provider instance delete has failed.", labels, registry=registry)

    @classmethod
    def of(cls, registry: CollectorRegistry | None) -> "MachineMetrics":
        """One set per registry, shared by the controllers that change a Machine's phase (the Machine controller,
        and nodelink when it writes Running, docs/compatibility.md#nodelink)."""
        return family(registry, "mapi_machine_phase_transition_seconds", cls)

    def observe_phase(self, phase: str, created: str | None) -> None:
        if created:
            age = dt.datetime.now(dt.timezone.utc).timestamp() - timestamp_seconds(created)
            self.phase_transition.labels(phase).observe(max(age, 0.0))


ITEMS = "mapi_machine_items"


def machine_families(machines: list[dict]) -> list[Metric]:
    items = GaugeMetricFamily(ITEMS, "Count of machine objects currently at the apiserver")
    created = GaugeMetricFamily(
        "mapi_machine_created_timestamp_seconds", "Timestamp of the mapi managed Machine creation time",
        labels=["name", "namespace", "spec_provider_id", "node", "api_version", "phase"])
    items.add_metric([], len(machines))
    for m in machines:
        status = m.get("status") or {}
        phase = status.get("phase")
        if not phase:
            continue  # MAO reports only Machines that were reconciled at least once
        meta = m["metadata"]
        created.add_metric([
            meta["name"], meta.get("namespace", ""), (m.get("spec") or {}).get("providerID") or "",
            (status.get("nodeRef") or {}).get("name", ""), m.get("apiVersion", ""), phase,
        ], timestamp_seconds(meta.get("creationTimestamp")))
    return [items, created]
