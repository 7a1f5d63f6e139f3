"""MAO's MachineSet metric names and labels (docs/compatibility.md#metrics), computed from the cache at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from machine_controller.controllers.machine.metrics import ITEMS as MACHINE_ITEMS
from machine_controller.controllers.machine.metrics import machine_families
from machine_controller.controllers.machineset.metrics import ITEMS, machineset_families
from machine_controller.controllers.mao_metrics import MaoCollector

MS = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
      "metadata": {"name": "worker", "namespace": "openshift-machine-api", "creationTimestamp": "2026-01-02T03:04:05Z"},
      "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 1}}


def collector(*kinds) -> CollectorRegistry:
    registry = CollectorRegistry()
    mao = MaoCollector()
    for kind in kinds:
        mao.add(*kind)
    registry.register(mao)
    return registry


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_machineset_gauges_carry_maos_names_and_labels():
    got = scrape(collector((ITEMS, lambda: [MS], machineset_families)))
    ident = (("name", "worker"), ("namespace", "openshift-machine-api"))
    assert got[("mapi_machineset_items", ())] == 1
    assert got[("mapi_machineset_created_timestamp_seconds",
                tuple(sorted((*ident, ("api_version", "machine.openshift.io/v1beta1")))))] == 1767323045
    assert got[("mapi_machine_set_status_replicas", ident)] == 3
    assert got[("mapi_machine_set_status_replicas_ready", ident)] == 2
    assert got[("mapi_machine_set_status_replicas_available", ident)] == 1
    assert got[("mapi_mao_collector_up", (("kind", "mapi_machineset_items"),))] == 1


def test_a_failing_cache_read_reports_collector_down_instead_of_failing_the_scrape():
    def broken():
        raise RuntimeError("cache gone")

    assert scrape(collector((ITEMS, broken, machineset_families))) == {
        ("mapi_mao_collector_up", (("kind", "mapi_machineset_items"),)): 0}


def test_both_kinds_report_up_in_one_parseable_family():
    registry = collector((MACHINE_ITEMS, lambda: [], machine_families), (ITEMS, lambda: [MS], machineset_families))
    got = scrape(registry)  # an OpenMetrics parser refuses a family yielded twice
    assert got[("mapi_machineset_items", ())] == 1
    assert got[("mapi_machine_items", ())] == 0
    assert got[("mapi_mao_collector_up", (("kind", "mapi_machine_items"),))] == 1
    assert got[("mapi_mao_collector_up", (("kind", "mapi_machineset_items"),))] == 1
