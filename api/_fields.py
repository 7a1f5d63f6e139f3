"""Field declarations shared by the JSON codec (`api._codec`) and the CRD generator (`hack/gen_crds.py`).

Every API dataclass declares its fields with `prop(...)`, which records the exact JSON key, Go's `omitempty`
behaviour and the OpenAPI constraints OpenShift puts on the field. One declaration thus drives parsing,
serialisation and the CRD schema, so the three cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

_MISSING: Any = dataclasses.MISSING


def prop(
    key: str,
    *,
    default: Any = _MISSING,
    default_factory: Any = _MISSING,
    doc: str = "",
    omitempty: bool = True,
    required: bool = False,
    schema: Mapping[str, Any] | None = None,
) -> Any:
    """Declare a dataclass field serialised under the JSON name `key`.

    omitempty: like Go's `json:",omitempty"`, leave the key out of `to_dict()` when the value is None or the
    zero value of its type. Fields without it (e.g. `MachineSetStatus.replicas`) are always written, which is
    what lets a merge patch set a count back to 0.
    required: listed under `required` in the generated CRD schema.
    schema: extra OpenAPI keywords for the CRD (enum, pattern, default, minimum, x-kubernetes-* ...).
    """
    metadata = {
        "key": key,
        "doc": doc,
        "omitempty": omitempty,
        "required": required,
        "schema": dict(schema or {}),
    }
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def json_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of an API dataclass that are declared with `prop` (in declaration order)."""
    return [f for f in dataclasses.fields(cls) if "key" in f.metadata]
