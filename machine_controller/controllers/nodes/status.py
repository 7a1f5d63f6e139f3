"""Reading a Node's Ready condition: one home for the controllers that care (drain, nodelink, MachineSet
readiness, and the event filters that let heartbeats pass by); and what of a Node's status the Node cache keeps."""

from __future__ import annotations

from typing import Any

from machine_controller.runtime.informer import compact

# The parts of a Node's status any controller here reads: its conditions (Ready, the health checks' rules) and its
# addresses (nodelink's InternalIP). Nothing writes a Node from the cache (every Node write is a patch), so the
# rest is not kept: the kubelet's list of the images it holds (up to 50, each with its names and digests), nodeInfo,
# capacity and allocatable are most of a real Node, and the cache holds one per Machine.
CACHED_NODE_STATUS = ("conditions", "addresses")


def cached_node(node: dict[str, Any]) -> dict[str, Any]:
    """The Node informer's transform: `compact`, with only CACHED_NODE_STATUS of the status."""
    status = node.get("status")
    if status:
        node["status"] = {k: status[k] for k in CACHED_NODE_STATUS if k in status}
    return compact(node)


def ready_condition(node: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def node_ready(node: dict[str, Any]) -> str | None:
    """"True", "False", "Unknown" (unreachable), or None before the kubelet first reports."""
    cond = ready_condition(node)
    return cond.get("status") if cond else None
