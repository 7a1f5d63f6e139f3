"""Reading a Node's Ready condition: one home for the controllers that care (drain, nodelink, MachineSet
readiness, and the event filters that let heartbeats pass by)."""

from __future__ import annotations

from typing import Any


def ready_condition(node: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def node_ready(node: dict[str, Any]) -> str | None:
    """"True", "False", "Unknown" (unreachable), or None before the kubelet first reports."""
    cond = ready_condition(node)
    return cond.get("status") if cond else None
