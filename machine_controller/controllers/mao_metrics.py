"""The Machine API operator's cache-derived gauges (docs/compatibility.md#metrics), computed at scrape time from
the informer caches, as MAO's collector lists objects.

`mapi_mao_collector_up{kind}` is one family for every kind: a registry must not yield two families of one name
(OpenMetrics parsers, which Prometheus negotiates by default, reject the whole scrape with "Clashing name"), so
one collector owns it and each kind plugs in its object source and the families it derives.
"""

from __future__ import annotations

from typing import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.meta import parse_time


def timestamp_seconds(value: str | None) -> float:
    """A metav1.Time as the Unix seconds MAO's `*_created_timestamp_seconds` gauges carry (0 when unset)."""
    return parse_time(value).timestamp() if value else 0.0


Objects = Callable[[], Iterable[dict]]
Families = Callable[[list[dict]], list[Metric]]


class MaoCollector(Collector):
    def __init__(self) -> None:
        self._kinds: list[tuple[str, Objects, Families]] = []

    def add(self, kind: str, objects: Objects, families: Families) -> None:
        """`kind` is MAO's label value, e.g. `mapi_machine_items`."""
        self._kinds.append((kind, objects, families))

    def collect(self):
        up = GaugeMetricFamily("mapi_mao_collector_up",
                               "Machine API Operator metrics are being collected successfully", labels=["kind"])
        out: list[Metric] = []
        for kind, objects, families in self._kinds:
            try:
                out += families(list(objects()))
            except Exception:  # noqa: BLE001 - a scrape must never fail; collector_up says this kind did not work
                up.add_metric([kind], 0)
                continue
            up.add_metric([kind], 1)
        yield up
        yield from out
