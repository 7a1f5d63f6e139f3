"""What a top-level API type declares about its CustomResourceDefinition besides the schema: names, printer
columns and subresources. `hack/gen_crds.py` turns these, with the field declarations, into config/crd."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    type: str  # string | integer | date ...
    json_path: str
    description: str
    priority: int = 0  # 1 = only shown by `kubectl get -o wide`


@dataclass(frozen=True)
class ScaleSubresource:
    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str


@dataclass(frozen=True)
class CRDInfo:
    kind: str
    plural: str
    description: str
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: ScaleSubresource | None = None
    group: str = ""  # empty: the Machine API's group and version (api.keys)
    version: str = ""
    has_status: bool = True  # a status subresource
    labels: tuple[tuple[str, str], ...] = ()  # (key, value) on the CRD itself, e.g. Cluster API's contract label
    categories: tuple[str, ...] = ()  # `kubectl get <category>` lists the kind

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


AGE_COLUMN_PATH = ".metadata.creationTimestamp"
