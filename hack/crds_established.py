"""Waiting until the API server serves a CustomResourceDefinition.

Polled rather than `kubectl wait --for=condition=Established`: that fails outright, instead of waiting, on a CRD
whose status has no conditions yet (kubectl 1.35: ".status.conditions accessor error"), which happens when the
wait follows the apply closely, as it does on a loaded machine.
"""

from __future__ import annotations

import time
from typing import Callable

_ESTABLISHED = "jsonpath={.status.conditions[?(@.type=='Established')].status}"


def wait_established(kubectl: Callable[..., str], *names: str, timeout: float = 60.0) -> None:
    """`kubectl(*args) -> stdout` runs the pinned kubectl; a failing call counts as "not yet"."""
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            try:
                if kubectl("get", "crd", name, "-o", _ESTABLISHED).strip() == "True":
                    break
            except Exception:  # noqa: BLE001 - not there yet, or a transient failure: poll again until the deadline
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established after {timeout:.0f} s")
            time.sleep(0.2)
