"""A Node's volumes, once its VM can write through them no more: what still holds them there, and the out-of-service
taint that makes Kubernetes release them at once (non-graceful node shutdown; docs/fencing.md#one-cycle).

Kubernetes detaches a volume from a Node that cannot confirm the unmount (it is unreachable, or deleted) only
after six minutes (the attach-detach controller's maxWaitForUnmountDuration), and a ReadWriteOnce volume attaches
nowhere else until then. The taint says the node is shut down: its pods are deleted and its volumes detached now.
It is put on only when the VM is confirmed off (fencing) or removed (a Machine's deletion), never on a guess.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable

from api.meta import format_time, now, parse_time
from api.remediation import OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_VALUE
from machine_controller.controllers.resources import NODES, PODS, VOLUME_ATTACHMENTS
from machine_controller.runtime.controller import Result
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.kube import Rest, is_conflict, is_not_found

# The VM is gone whatever happens: a Node whose volumes Kubernetes has not released this long after the taint is
# deleted all the same (its attachments then wait out Kubernetes' own six minutes).
RELEASE_TIMEOUT_S = 300.0
RELEASE_POLL_S = 2.0


class TaintsChanged(Exception):
    """The Node's taints changed since they were read: read the Node again and retry."""


def volume_attachments(rest: Rest, node_name: str) -> list[dict]:
    """The VolumeAttachments that attach a volume to `node_name`."""
    items = rest.request("GET", VOLUME_ATTACHMENTS.path()).get("items", [])
    return [a for a in items if (a.get("spec") or {}).get("nodeName") == node_name]


def out_of_service_taint(time_added: str) -> dict[str, str]:
    return {"key": OUT_OF_SERVICE_TAINT_KEY, "value": OUT_OF_SERVICE_TAINT_VALUE, "effect": "NoExecute",
            "timeAdded": time_added}


def patch_taints(rest: Rest, node_name: str, old: list[dict], new: list[dict]) -> None:
    """Replace the Node's taints `old` (as read) by `new`. A JSON patch that tests the taints it read: a concurrent
    change of the taints (not a heartbeat) raises TaintsChanged. A Node gone meanwhile has nothing to patch."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/spec/taints", "value": old}] if old else []
    ops.append({"op": "add", "path": "/spec/taints", "value": new})
    try:
        rest.request("PATCH", NODES.path(None, node_name), body=ops, content_type="application/json-patch+json")
    except Exception as e:
        if is_not_found(e):
            return
        if is_conflict(e) or getattr(e, "status", None) == 422:  # the test op failed: taints changed meanwhile
            raise TaintsChanged() from None
        raise


@dataclass(frozen=True)
class Release:
    held: int  # VolumeAttachments the Node still has
    tainted_now: bool  # this call put the out-of-service taint on
    waited_s: float  # since the taint was put on (its timeAdded)

    @property
    def done(self) -> bool:
        """The Node may be deleted: nothing is attached to it any more, or it was given RELEASE_TIMEOUT_S."""
        return not self.held or self.waited_s >= RELEASE_TIMEOUT_S


def release_volumes(rest: Rest, node: dict, clock: Callable[[], dt.datetime] = now,
                    attached: list[dict] | None = None) -> Release:
    """For a Node whose VM is gone (removed, or no longer exists): the out-of-service taint if it still has
    VolumeAttachments, so that Kubernetes deletes its pods and detaches them now. The taint's timeAdded says since
    when, for every controller and across restarts. Raises TaintsChanged when its taints changed since `node` was
    read. `attached`: the Node's VolumeAttachments when the caller has just listed them."""
    name = node["metadata"]["name"]
    if attached is None:
        attached = volume_attachments(rest, name)
    if not attached:
        return Release(0, False, 0.0)
    taints = list((node.get("spec") or {}).get("taints") or [])
    mine = next((t for t in taints if t.get("key") == OUT_OF_SERVICE_TAINT_KEY and t.get("effect") == "NoExecute"),
                None)
    if mine is None:
        patch_taints(rest, name, taints, [*taints, out_of_service_taint(format_time(clock()))])
        return Release(len(attached), True, 0.0)
    added = parse_time(mine["timeAdded"]) if mine.get("timeAdded") else clock()
    return Release(len(attached), False, (clock() - added).total_seconds())


def hold_for_volumes(rest: Rest, node: dict, events: EventRecorder, involved: dict, why: str,
                     attached: list[dict] | None = None) -> Result | None:
    """Before deleting a Node whose VM is gone (`why` says how, for the events on `involved`): release its volumes
    (release_volumes, given `attached` if the caller has just listed them) and wait for them. None: the Node may be
    deleted now."""
    name = node["metadata"]["name"]
    try:
        release = release_volumes(rest, node, attached=attached)
    except TaintsChanged:
        return Result(requeue_after=0.2)
    if release.tainted_now:
        events.normal(involved, "ReleasingStorage", f"{why}: node {name} tainted out-of-service, so that Kubernetes "
                      f"detaches its {release.held} volume(s) now")
    if not release.done:
        return Result(requeue_after=RELEASE_POLL_S)
    if release.held:
        events.warning(involved, "StorageReleaseSlow", f"{release.held} volume attachment(s) of node {name} still "
                       f"there {RELEASE_TIMEOUT_S:.0f}s after the out-of-service taint; deleting the node all the same")
    return None


# --- a fenced Node: its taints, its pods, what still holds its storage (docs/fencing.md#one-cycle) ---------------

# Volume sources that live and die with the node (or are only read from the API server): nothing to detach from a
# VM that is off. Any other source (a claim, CSI, FlexVolume, an ephemeral claim, an in-tree network disk, or a
# kind this list does not know) may hold a volume, so its pod is waited for (docs/fencing.md#one-cycle).
_NODE_LOCAL_VOLUMES = frozenset({"emptyDir", "configMap", "secret", "downwardAPI", "projected", "hostPath",
                                 "gitRepo", "image"})


def _holds_storage(pod: dict) -> bool:
    return any(set(volume) - {"name"} - _NODE_LOCAL_VOLUMES for volume in (pod.get("spec") or {}).get("volumes") or [])


def _pods_on(rest: Rest, node_name: str) -> list[dict]:
    return rest.request("GET", PODS.path(), query={"fieldSelector": f"spec.nodeName={node_name}"}).get("items", [])


def held_by(rest: Rest, node_name: str, mirror_annotation: str) -> str:
    """What of the old incarnation still holds storage the Node had, said in words ("" when nothing): its pods with
    volumes to detach (the out-of-service taint has them deleted and force-removed) and its volume attachments.
    Other pods are not waited for: most node agents tolerate every taint and never leave, and what they mount lives
    and dies with the node (docs/fencing.md#one-cycle); mirror pods (those bearing `mirror_annotation`) are the
    kubelet's own."""
    left = [p for p in _pods_on(rest, node_name)
            if mirror_annotation not in (p["metadata"].get("annotations") or {}) and _holds_storage(p)]
    attached = volume_attachments(rest, node_name)
    parts = []
    if left:
        parts.append(f"{len(left)} pod(s) with volumes")
    if attached:
        parts.append(f"{len(attached)} volume attachment(s)")
    return " and ".join(parts)


def force_delete_pods(rest: Rest, node_name: str) -> None:
    """Delete every pod of the Node at once (grace 0): its VM is confirmed off, nothing of them runs any more."""
    for pod in _pods_on(rest, node_name):
        meta = pod["metadata"]
        try:
            rest.request("DELETE", PODS.path(meta["namespace"], meta["name"]), body={"gracePeriodSeconds": 0})
        except Exception as e:
            if not is_not_found(e):
                raise


def add_taint(rest: Rest, node: dict | None, taint: dict[str, str]) -> None:
    """Add `taint` to `node` (as read) unless a taint of its key and effect is there already. Raises TaintsChanged
    when its taints changed since it was read."""
    if node is None:
        return
    taints = list((node.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"] for t in taints):
        return
    patch_taints(rest, node["metadata"]["name"], taints, [*taints, taint])


def remove_taints(rest: Rest, node_name: str, keys: tuple[str, ...]) -> None:
    """Remove the Node's taints of `keys`. The Node is read afresh, not from a cache: a pass that tainted it a
    moment ago and then ends must see its own taint, which an informer may not have brought yet. Raises
    TaintsChanged when its taints changed between the read and the patch."""
    if not node_name:
        return
    try:
        node = rest.get(NODES, node_name)
    except Exception as e:
        if is_not_found(e):
            return
        raise
    taints = list((node.get("spec") or {}).get("taints") or [])
    kept = [t for t in taints if t.get("key") not in keys]
    if len(kept) != len(taints):
        patch_taints(rest, node_name, taints, kept)
