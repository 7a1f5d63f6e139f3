"""The Machine API operator's MachineSet gauges (docs/compatibility.md#metrics), derived from the informer cache
at scrape time by `mao_metrics.MaoCollector`, so OpenShift's dashboards and alerts work unchanged."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, Metric

from machine_controller.controllers.mao_metrics import timestamp_seconds

ITEMS = "mapi_machineset_items"


def machineset_families(machinesets: list[dict]) -> list[Metric]:
    items = GaugeMetricFamily(ITEMS, "Count of machinesets at the apiserver")
    created = GaugeMetricFamily("mapi_machineset_created_timestamp_seconds",
                                "Timestamp of the mapi managed Machineset creation time",
                                labels=["name", "namespace", "api_version"])
    names = ["name", "namespace"]
    replicas = GaugeMetricFamily("mapi_machine_set_status_replicas",
                                 "Information of the mapi managed Machineset's status for replicas", labels=names)
    ready = GaugeMetricFamily("mapi_machine_set_status_replicas_ready",
                              "Information of the mapi managed Machineset's status for ready replicas", labels=names)
    available = GaugeMetricFamily("mapi_machine_set_status_replicas_available",
                                  "Information of the mapi managed Machineset's status for available replicas",
                                  labels=names)
    items.add_metric([], len(machinesets))
    for ms in machinesets:
        meta = ms["metadata"]
        status = ms.get("status") or {}
        ident = [meta["name"], meta.get("namespace", "")]
        created.add_metric([*ident, ms.get("apiVersion", "")], timestamp_seconds(meta.get("creationTimestamp")))
        replicas.add_metric(ident, status.get("replicas") or 0)
        ready.add_metric(ident, status.get("readyReplicas") or 0)
        available.add_metric(ident, status.get("availableReplicas") or 0)
    return [items, created, replicas, ready, available]

