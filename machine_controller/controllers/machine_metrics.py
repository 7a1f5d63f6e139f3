"""The Machine API operator's metric names (reference machine-api.md 3.5), so OpenShift's dashboards and alerts
(MachineWithNoRunningPhase, MachineWithoutValidNode, ...) work unchanged."""

from __future__ import annotations

import datetime as dt
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_PHASE_BUCKETS = (5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 360, 480, 600)


def _timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class MachineMetrics:
    def __init__(self, registry: CollectorRegistry | None, machines: Callable[[], Iterable[dict]]):
        self.phase_transition = Histogram(
            "mapi_machine_phase_transition_seconds",
            "Number of seconds between Machine creation and Machine phase transition",
            ["phase"], buckets=_PHASE_BUCKETS, registry=registry)
        labels = ["name", "namespace", "reason"]
        self.create_failed = Counter("mapi_instance_create_failed", "Number of times provider instance create has failed.",
                                     labels, registry=registry)
        self.update_failed = Counter("mapi_instance_update_failed", "Number of times provider instance update has failed.",
                                     labels, registry=registry)
        self.delete_failed = Counter("mapi_instance_delete_failed", "Number of times provider instance delete has failed.",
                                     labels, registry=registry)
        if registry is not None:
            registry.register(_MachineCollector(machines))

    def observe_phase(self, phase: str, created: str | None) -> None:
        if created:
            age = dt.datetime.now(dt.timezone.utc).timestamp() - _timestamp(created)
            self.phase_transition.labels(phase).observe(max(age, 0.0))


class _MachineCollector(Collector):
    """Gauges computed from the informer cache at scrape time, as MAO's collector lists Machines."""

    def __init__(self, machines: Callable[[], Iterable[dict]]):
        self._machines = machines

    def collect(self):
        up = GaugeMetricFamily("mapi_mao_collector_up", "Machine API Operator metrics are being collected successfully",
                               labels=["kind"])
        items = GaugeMetricFamily("mapi_machine_items", "Count of machine objects currently at the apiserver")
        created = GaugeMetricFamily(
            "mapi_machine_created_timestamp_seconds", "Timestamp of the mapi managed Machine creation time",
            labels=["name", "namespace", "spec_provider_id", "node", "api_version", "phase"])
        try:
            machines = list(self._machines())
        except Exception:  # noqa: BLE001 - a scrape must never fail; collector_up says it did not work
            up.add_metric(["mapi_machine_items"], 0)
            yield up
            return
        items.add_metric([], len(machines))
        for m in machines:
            status = m.get("status") or {}
            phase = status.get("phase")
            if not phase:
                continue
            meta = m["metadata"]
            created.add_metric([
                meta["name"], meta.get("namespace", ""), (m.get("spec") or {}).get("providerID") or "",
                (status.get("nodeRef") or {}).get("name", ""), m.get("apiVersion", ""), phase,
            ], _timestamp(meta.get("creationTimestamp")))
        up.add_metric(["mapi_machine_items"], 1)
        yield up
        yield items
        yield created
