"""The Machine API operator's MachineSet metrics (reference machine-api.md 3.5), computed from the informer cache at
scrape time as MAO's collector lists MachineSets, so OpenShift's dashboards and the
MachineAPIOperatorMetricsCollectionFailing alert work unchanged.

`mapi_mao_collector_up` is one family for both kinds in MAO. A registry must not hold two families of one name
(OpenMetrics parsers, which Prometheus negotiates by default, reject the whole scrape with "Clashing name"), and
the Machine collector (`machine_metrics.py`) already yields that family for kind `mapi_machine_items`. So this
collector reports its kind only when asked to (`report_up`, for a registry without the Machine collector) until
both kinds come from one collector.
"""

from __future__ import annotations

from typing import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from api.meta import parse_time

ITEMS = "mapi_machineset_items"


class MachineSetCollector(Collector):
    def __init__(self, machinesets: Callable[[], Iterable[dict]], report_up: bool = True):
        self._machinesets = machinesets
        self._report_up = report_up

    def collect(self):
        up = GaugeMetricFamily("mapi_mao_collector_up",
                               "Machine API Operator metrics are being collected successfully", labels=["kind"])
        try:
            machinesets = list(self._machinesets())
        except Exception:  # noqa: BLE001 - a scrape must never fail; collector_up says it did not work
            up.add_metric([ITEMS], 0)
            if self._report_up:
                yield up
            return
        items = GaugeMetricFamily(ITEMS, "Count of machinesets at the apiserver")
        created = GaugeMetricFamily("mapi_machineset_created_timestamp_seconds",
                                    "Timestamp of the mapi managed Machineset creation time",
                                    labels=["name", "namespace", "api_version"])
        names = ["name", "namespace"]
        replicas = GaugeMetricFamily("mapi_machine_set_status_replicas",
                                     "Information of the mapi managed Machineset's status for replicas", labels=names)
        ready = GaugeMetricFamily("mapi_machine_set_status_replicas_ready",
                                  "Information of the mapi managed Machineset's status for ready replicas",
                                  labels=names)
        available = GaugeMetricFamily("mapi_machine_set_status_replicas_available",
                                      "Information of the mapi managed Machineset's status for available replicas",
                                      labels=names)
        items.add_metric([], len(machinesets))
        for ms in machinesets:
            meta = ms["metadata"]
            status = ms.get("status") or {}
            ident = [meta["name"], meta.get("namespace", "")]
            created.add_metric([*ident, ms.get("apiVersion", "")], _created(meta.get("creationTimestamp")))
            replicas.add_metric(ident, status.get("replicas") or 0)
            ready.add_metric(ident, status.get("readyReplicas") or 0)
            available.add_metric(ident, status.get("availableReplicas") or 0)
        up.add_metric([ITEMS], 1)
        if self._report_up:
            yield up
        yield items
        yield created
        yield replicas
        yield ready
        yield available


def _created(value: str | None) -> float:
    return parse_time(value).timestamp() if value else 0.0
