"""Draining a Node before its VM goes, as `kubectl drain --force --ignore-daemonsets --delete-emptydir-data`
does and MAO configures it (docs/compatibility.md#machine-phases): cordon, then evict every pod through the Eviction
API so PodDisruptionBudgets are honoured. Never waits: each call makes progress and says whether the node is
empty yet; the caller requeues.

An unreachable node (Ready=Unknown) gets a 1 s grace period, and its pods count as gone one second after
their deletion started: no kubelet is left to confirm it (MAO's SkipWaitForDeleteTimeoutSeconds=1).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from api.meta import parse_time
from machine_controller.controllers.nodes.status import node_ready
from machine_controller.controllers.resources import EVICTION_SUBRESOURCE, NODES, PODS
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import ErrorKind, Rest, classify, is_not_found

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
UNREACHABLE_GRACE_S = 1


@dataclass
class DrainProgress:
    done: bool
    message: str = ""


def node_unreachable(node: dict) -> bool:
    return node_ready(node) == "Unknown"


def _owned_by_daemonset(pod: dict) -> bool:
    return any(r.get("kind") == "DaemonSet" and r.get("controller")
               for r in pod["metadata"].get("ownerReferences", []) or [])


def _finished(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def _deletion_older_than(pod: dict, seconds: float) -> bool:
    ts = pod["metadata"].get("deletionTimestamp")
    if not ts:
        return False
    return (dt.datetime.now(dt.timezone.utc) - parse_time(ts)).total_seconds() > seconds


class Drainer:
    def __init__(self, rest: Rest, nodes: Store | None = None):
        """`nodes`: the Node informer's cache, read for the Node as MAO's drain reads it (controller-runtime's
        cached client); a Node not in it yet is asked of the API server."""
        self._rest = rest
        self._nodes = nodes

    def drain(self, node_name: str) -> DrainProgress:
        node = self._nodes.get(node_name) if self._nodes is not None else None
        try:
            if node is None:
                node = self._rest.get(NODES, node_name)
            if not node.get("spec", {}).get("unschedulable"):
                self._rest.merge_patch(NODES, node_name, {"spec": {"unschedulable": True}})
        except Exception as e:
            if is_not_found(e):
                return DrainProgress(True, "node already gone")  # MAO: a missing node counts as drained
            raise
        unreachable = node_unreachable(node)
        pods = self._rest.request("GET", PODS.path(), query={"fieldSelector": f"spec.nodeName={node_name}"})
        remaining, blocked = [], []
        for pod in pods.get("items", []):
            meta = pod["metadata"]
            if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}) or _owned_by_daemonset(pod):
                continue
            if meta.get("deletionTimestamp"):
                if not (unreachable and _deletion_older_than(pod, UNREACHABLE_GRACE_S)):
                    remaining.append(meta["name"])
                continue
            if _finished(pod):
                self._delete(pod)
                continue
            if not self._evict(pod, unreachable):
                blocked.append(f"{meta['namespace']}/{meta['name']}")
            remaining.append(meta["name"])
        if blocked:
            return DrainProgress(False, "eviction refused by a PodDisruptionBudget for " + ", ".join(sorted(blocked)))
        if remaining:
            return DrainProgress(False, f"waiting for {len(remaining)} pod(s) to terminate")
        return DrainProgress(True, f"Node {node_name!r} drained")

    def _evict(self, pod: dict, unreachable: bool) -> bool:
        meta = pod["metadata"]
        body: dict = {"apiVersion": "policy/v1", "kind": "Eviction",
                      "metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
        if unreachable:
            body["deleteOptions"] = {"gracePeriodSeconds": UNREACHABLE_GRACE_S}
        try:
            self._rest.request("POST", PODS.path(meta["namespace"], meta["name"], EVICTION_SUBRESOURCE), body=body)
        except Exception as e:
            kind = classify(e)
            if kind is ErrorKind.TOO_MANY_REQUESTS:  # a PodDisruptionBudget says not now
                return False
            if kind is not ErrorKind.NOT_FOUND:
                raise
        return True

    def _delete(self, pod: dict) -> None:
        meta = pod["metadata"]
        try:
            self._rest.request("DELETE", PODS.path(meta["namespace"], meta["name"]))
        except Exception as e:
            if not is_not_found(e):
                raise
