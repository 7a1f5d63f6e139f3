"""In-memory stand-ins for what the reconcilers talk to, so their unit tests run in milliseconds.

- `FakeApi` duck-types `runtime.kube.Rest` (get, create, replace, merge_patch, delete, request) over a dict of
  objects, with the API server behaviours the reconcilers rely on: resourceVersion preconditions (409 Conflict),
  404 NotFound with the server's Status body, finalizers that turn a delete into a deletionTimestamp, the status
  subresource, pods listed by node and evicted (429 when a PodDisruptionBudget refuses). It keeps the informer
  `Store`s it is given in step with its writes, unless a test freezes one to play a lagging cache.
- `RecordingEvents` records what an `EventRecorder` would send.
- `FakeActuator` implements both `Actuator` and `Instances`: each verb answers from a script the test writes and
  counts its calls; a call the test did not script fails the test.
- `FakePower` implements `PowerControl` over one VM whose power state the test sets, and records the actions sent.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from kubernetes.client.exceptions import ApiException

from api.machine import Machine
from api.meta import format_time, now
from machine_controller.controllers.provider import (
    InstanceNotOwned,
    InstanceStatus,
    NodeInstance,
    Power,
    PowerState,
    Progress,
)
from machine_controller.controllers.resources import EVICTION_SUBRESOURCE, MACHINES, NODES, PODS, VOLUME_ATTACHMENTS
from machine_controller.runtime.informer import Store
from machine_controller.runtime.kube import EVENTS, Resource, object_key

KNOWN = {r.plural: r for r in (MACHINES, NODES, PODS, EVENTS, VOLUME_ATTACHMENTS)}
# Kinds whose status is a subresource: a write to the main resource leaves status alone, and a write to /status
# leaves everything but status alone, as the API server does.
WITH_STATUS_SUBRESOURCE = {MACHINES.plural, NODES.plural, PODS.plural}
_HTTP_REASONS = {404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
                 500: "Internal Server Error"}


def api_error(status: int, reason: str, message: str, details: dict | None = None) -> ApiException:
    """An ApiException shaped as the kubernetes client raises it: the server's metav1.Status as the body."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": status}
    return ApiException(status=status, reason=_HTTP_REASONS.get(status, reason), body=json.dumps(body))


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch: null removes a key, objects merge recursively, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass
class _Fault:
    method: str
    plural: str
    name: str | None
    error: ApiException
    times: int


class FakeApi:
    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str], dict] = {}
        self._rv = itertools.count(1000)
        self._uids = itertools.count(1)
        self._stores: dict[str, Store] = {}
        self._frozen: set[str] = set()
        self._faults: list[_Fault] = []
        self.refused_evictions: set[str] = set()  # "namespace/name" of pods a PodDisruptionBudget protects
        self.evictions: list[str] = []  # eviction requests that were accepted
        self.requests: list[tuple[str, str, str | None]] = []  # (method, plural, name) of every call

    # --- test set-up and inspection -------------------------------------------------------------------------
    def cache(self, resource: Resource, store: Store) -> Store:
        """Keep `store` in step with this API's objects of `resource`, as an informer would."""
        self._stores[resource.plural] = store
        for (plural, _, _), obj in self._objects.items():
            if plural == resource.plural:
                store.put(copy.deepcopy(obj))
        return store

    def cached(self, resource: Resource) -> Store:
        """The store `cache` keeps in step for `resource` (for a second controller reading the same informer)."""
        return self._stores[resource.plural]

    def freeze_cache(self, resource: Resource) -> None:
        """From now on the store does not see writes: a cache lagging behind the API server."""
        self._frozen.add(resource.plural)

    def seed(self, resource: Resource, obj: dict) -> dict:
        """Put an object in place, as if created earlier (no request recorded)."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta['name']}-{next(self._uids)}")
        meta.setdefault("creationTimestamp", format_time(now()))
        meta["resourceVersion"] = str(next(self._rv))
        obj.setdefault("kind", resource.kind)
        obj.setdefault("apiVersion", resource.api_version)
        self._store(resource, obj)
        return copy.deepcopy(obj)

    def touch(self, resource: Resource, name: str, namespace: str | None = None, change: dict | None = None) -> None:
        """Another client writes the object (a new resourceVersion, and `change` merged in)."""
        obj = self._require(resource, name, namespace)
        obj = merge_patch(obj, change or {})
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._store(resource, obj)

    def remove(self, resource: Resource, name: str, namespace: str | None = None) -> None:
        """The object disappears (deleted by someone else)."""
        self._drop(resource, name, namespace)

    def object(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        obj = self._objects.get(self._key(resource, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def fail(self, method: str, resource: Resource, status: int, name: str | None = None, times: int = 1,
             reason: str = "InternalError", message: str = "injected failure") -> None:
        """The next `times` `method` requests on `resource` (and `name`, if given) fail with `status`."""
        self._faults.append(_Fault(method, resource.plural, name, api_error(status, reason, message), times))

    def writes(self, resource: Resource | None = None) -> list[tuple[str, str, str | None]]:
        return [r for r in self.requests if r[0] != "GET" and (resource is None or r[1] == resource.plural)]

    def terminate_pods(self) -> None:
        """What the kubelet does: pods whose deletion started are gone."""
        for key, obj in list(self._objects.items()):
            if key[0] == PODS.plural and obj["metadata"].get("deletionTimestamp"):
                self._drop(PODS, key[2], key[1])

    # --- the Rest verbs -------------------------------------------------------------------------------------
    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict:
        self._begin("GET", resource, name)
        return copy.deepcopy(self._require(resource, name, namespace))

    def create(self, resource: Resource, body: dict, namespace: str | None = None) -> dict:
        name = body["metadata"]["name"]
        self._begin("POST", resource, name)
        namespace = namespace or body["metadata"].get("namespace")
        if self._key(resource, name, namespace) in self._objects:
            raise api_error(409, "AlreadyExists", f'{self._what(resource)} "{name}" already exists')
        obj = copy.deepcopy(body)
        if resource.namespaced:
            obj["metadata"]["namespace"] = namespace
        return self.seed(resource, obj)

    def replace(self, resource: Resource, body: dict) -> dict:
        meta = body["metadata"]
        self._begin("PUT", resource, meta["name"])
        current = self._require(resource, meta["name"], meta.get("namespace"))
        self._check_version(resource, current, meta.get("resourceVersion"))
        obj = copy.deepcopy(body)
        if resource.plural in WITH_STATUS_SUBRESOURCE:
            obj["status"] = copy.deepcopy(current.get("status"))
        for kept in ("uid", "creationTimestamp", "deletionTimestamp"):
            if kept in current["metadata"]:
                obj["metadata"][kept] = current["metadata"][kept]
        return self._write(resource, obj)

    def merge_patch(self, resource: Resource, name: str, patch: dict, namespace: str | None = None,
                    subresource: str | None = None) -> dict:
        self._begin("PATCH", resource, name, subresource)
        current = self._require(resource, name, namespace)
        patch = copy.deepcopy(patch)
        self._check_version(resource, current, (patch.get("metadata") or {}).pop("resourceVersion", None))
        if subresource == "status":
            patch = {"status": patch["status"]} if "status" in patch else {}
        elif subresource is not None:
            raise api_error(404, "NotFound", f"no subresource {subresource!r} on {self._what(resource)}")
        elif resource.plural in WITH_STATUS_SUBRESOURCE:
            patch.pop("status", None)
        for protected in ("uid", "creationTimestamp", "deletionTimestamp", "name", "namespace"):
            (patch.get("metadata") or {}).pop(protected, None)
        finalizers = (patch.get("metadata") or {}).get("finalizers")
        if current["metadata"].get("deletionTimestamp") and finalizers is not None:
            added = set(finalizers) - set(current["metadata"].get("finalizers") or [])
            if added:
                raise api_error(422, "Invalid", f"{self._what(resource)} \"{name}\" is invalid: metadata.finalizers:"
                                " Forbidden: no new finalizers can be added if the object is being deleted")
        return self._write(resource, merge_patch(current, patch))

    def delete(self, resource: Resource, name: str, namespace: str | None = None) -> dict:
        self._begin("DELETE", resource, name)
        current = self._require(resource, name, namespace)
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(current)
            obj = copy.deepcopy(current)
            obj["metadata"]["deletionTimestamp"] = format_time(now())
            return self._write(resource, obj)
        self._drop(resource, name, namespace)
        return copy.deepcopy(current)

    def request(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json") -> dict:
        resource, namespace, name, subresource = self._parse(path)
        if method == "GET" and name is None:
            return self._list(resource, namespace, query or {})
        if method == "GET":
            return self.get(resource, name, namespace)
        if method == "POST" and subresource == EVICTION_SUBRESOURCE:
            return self._evict(namespace, name)
        if method == "POST":
            return self.create(resource, body, namespace)
        if method == "PUT":
            return self.replace(resource, body)
        if method == "PATCH" and content_type == "application/json-patch+json":
            return self._json_patch(resource, name, body, namespace)
        if method == "PATCH":
            return self.merge_patch(resource, name, body, namespace, subresource)
        if method == "DELETE":
            return self.delete(resource, name, namespace)
        raise AssertionError(f"FakeApi cannot serve {method} {path}")

    # --- internals ------------------------------------------------------------------------------------------
    def _json_patch(self, resource: Resource, name: str, ops: list[dict], namespace: str | None) -> dict:
        """RFC 6902's `test` and `add` on object members, as the API server applies them (a failed test: 422)."""
        self._begin("PATCH", resource, name)
        obj = copy.deepcopy(self._require(resource, name, namespace))
        for op in ops:
            *parents, last = op["path"].lstrip("/").split("/")
            target = obj
            for part in parents:
                target = target.setdefault(part, {}) if op["op"] == "add" else target.get(part, {})
            if op["op"] == "test" and target.get(last) != op["value"]:
                raise api_error(422, "Invalid", f"the test of {op['path']} failed")
            if op["op"] == "add":
                target[last] = copy.deepcopy(op["value"])
            elif op["op"] != "test":
                raise AssertionError(f"FakeApi cannot apply the JSON patch op {op['op']!r}")
        return self._write(resource, obj)

    def _list(self, resource: Resource, namespace: str | None, query: dict[str, Any]) -> dict:
        self._begin("GET", resource, None)
        wanted_node = None
        selector = query.get("fieldSelector")
        if selector:
            field, _, value = selector.partition("=")
            if field != "spec.nodeName":
                raise AssertionError(f"FakeApi understands only the spec.nodeName field selector, not {selector!r}")
            wanted_node = value
        items = [copy.deepcopy(obj) for (plural, ns, _), obj in sorted(self._objects.items())
                 if plural == resource.plural and (namespace is None or ns == namespace)
                 and (wanted_node is None or (obj.get("spec") or {}).get("nodeName") == wanted_node)]
        return {"kind": f"{resource.kind}List", "apiVersion": resource.api_version,
                "metadata": {"resourceVersion": str(next(self._rv))}, "items": items}

    def _evict(self, namespace: str | None, name: str) -> dict:
        self._begin("POST", PODS, name, EVICTION_SUBRESOURCE)
        pod = self._require(PODS, name, namespace)
        if f"{namespace}/{name}" in self.refused_evictions:
            raise api_error(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption "
                            "budget.", {"causes": [{"reason": "DisruptionBudget"}]})
        self.evictions.append(f"{namespace}/{name}")
        if not pod["metadata"].get("deletionTimestamp"):
            obj = copy.deepcopy(pod)
            obj["metadata"]["deletionTimestamp"] = format_time(now())  # graceful: the kubelet finishes it
            obj["metadata"]["resourceVersion"] = str(next(self._rv))
            self._store(PODS, obj)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _parse(self, path: str) -> tuple[Resource, str | None, str | None, str | None]:
        parts = path.strip("/").split("/")
        parts = parts[2:] if parts[0] == "api" else parts[3:]  # /api/v1/... or /apis/group/version/...
        namespace = None
        if parts[0] == "namespaces" and len(parts) > 2:
            namespace, parts = parts[1], parts[2:]
        resource = KNOWN[parts[0]]
        name = parts[1] if len(parts) > 1 else None
        subresource = parts[2] if len(parts) > 2 else None
        return resource, namespace, name, subresource

    def _begin(self, method: str, resource: Resource, name: str | None, subresource: str | None = None) -> None:
        self.requests.append((method, resource.plural, name if subresource is None else f"{name}/{subresource}"))
        for fault in self._faults:
            if fault.times > 0 and fault.method == method and fault.plural == resource.plural and (
                    fault.name is None or fault.name == name):
                fault.times -= 1
                raise fault.error

    @staticmethod
    def _key(resource: Resource, name: str, namespace: str | None) -> tuple[str, str, str]:
        return resource.plural, (namespace or "") if resource.namespaced else "", name

    @staticmethod
    def _what(resource: Resource) -> str:
        return f"{resource.plural}.{resource.group}" if resource.group else resource.plural

    def _require(self, resource: Resource, name: str, namespace: str | None) -> dict:
        obj = self._objects.get(self._key(resource, name, namespace))
        if obj is None:
            raise api_error(404, "NotFound", f'{self._what(resource)} "{name}" not found',
                            {"name": name, "group": resource.group, "kind": resource.plural})
        return obj

    def _check_version(self, resource: Resource, current: dict, expected: str | None) -> None:
        if expected is not None and expected != current["metadata"]["resourceVersion"]:
            name = current["metadata"]["name"]
            raise api_error(409, "Conflict", f'Operation cannot be fulfilled on {self._what(resource)} "{name}": '
                            "the object has been modified; please apply your changes to the latest version "
                            "and try again", {"name": name, "group": resource.group, "kind": resource.plural})

    def _write(self, resource: Resource, obj: dict) -> dict:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # The last finalizer of a deleted object is gone: the API server removes it.
            self._drop(resource, meta["name"], meta.get("namespace"))
            return copy.deepcopy(obj)
        meta["resourceVersion"] = str(next(self._rv))
        self._store(resource, obj)
        return copy.deepcopy(obj)

    def _store(self, resource: Resource, obj: dict) -> None:
        meta = obj["metadata"]
        self._objects[self._key(resource, meta["name"], meta.get("namespace"))] = obj
        store = self._stores.get(resource.plural)
        if store is not None and resource.plural not in self._frozen:
            store.put(copy.deepcopy(obj))

    def _drop(self, resource: Resource, name: str, namespace: str | None) -> None:
        self._objects.pop(self._key(resource, name, namespace), None)
        store = self._stores.get(resource.plural)
        if store is not None and resource.plural not in self._frozen:
            store.remove(object_key({"metadata": {"name": name, "namespace": namespace if resource.namespaced
                                                  else None}}))


@dataclass
class Recorded:
    type: str
    reason: str
    message: str
    involved: str  # Kind namespace/name


class RecordingEvents:
    """What an EventRecorder would have sent, in order."""

    def __init__(self) -> None:
        self.recorded: list[Recorded] = []

    def event(self, obj: dict, type_: str, reason: str, message: str) -> None:
        self.recorded.append(Recorded(type_, reason, message, f"{obj.get('kind', '')} {object_key(obj)}"))

    def normal(self, obj: dict, reason: str, message: str) -> None:
        self.event(obj, "Normal", reason, message)

    def warning(self, obj: dict, reason: str, message: str) -> None:
        self.event(obj, "Warning", reason, message)

    def reasons(self) -> list[tuple[str, str]]:
        return [(e.type, e.reason) for e in self.recorded]


Answer = Progress | InstanceStatus | NodeInstance | None | BaseException


class FakeActuator:
    """An `Actuator` and `Instances` answering from scripts: each call takes the next answer of its verb, the last
    one repeats; an exception in the script is raised. A verb with no script fails the test when called."""

    def __init__(self, provision: Iterable[Answer] = (), status: Iterable[Answer] = (), delete: Iterable[Answer] = (),
                 find: Iterable[Answer] = (), scheme: str = "ovirt://") -> None:
        self.scripts: dict[str, list[Answer]] = {"provision": list(provision), "status": list(status),
                                                 "delete": list(delete), "find": list(find)}
        self.scheme = scheme
        self.calls: Counter[str] = Counter()
        self.seen: list[tuple[str, Any]] = []  # (verb, what it was asked about)

    def _answer(self, verb: str, about: Any) -> Any:
        self.calls[verb] += 1
        self.seen.append((verb, about))
        script = self.scripts[verb]
        if not script:
            raise AssertionError(f"unexpected actuator call: {verb}({about!r}); the test scripted none")
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, BaseException):
            raise answer
        return copy.deepcopy(answer)

    # Actuator
    def provision(self, machine: Machine) -> Progress:
        return self._answer("provision", machine.metadata.name)

    def status(self, machine: Machine, fresh: bool = False) -> InstanceStatus | None:
        if fresh:
            self.calls["status fresh"] += 1
        return self._answer("status", machine.metadata.name)

    def delete(self, machine: Machine) -> Progress:
        return self._answer("delete", machine.metadata.name)

    def forget(self, key: str) -> None:
        self.calls["forget"] += 1
        self.seen.append(("forget", key))

    # Instances
    def owns(self, provider_id: str) -> bool:
        self.calls["owns"] += 1
        return provider_id.startswith(self.scheme)

    def find(self, node_name: str, provider_id: str | None) -> NodeInstance | None:
        return self._answer("find", (node_name, provider_id))


class FakePower:
    """A `PowerControl` over one VM whose state a test sets. Every power action asked for is recorded in `sent`
    (verb, VM name), a refused one too (it left); `refuse` makes the next ones raise, `stop_under_way`
    plays a stop of ours the engine is still carrying out (a stop asked for then answers False: nothing was sent),
    `late_stop` a stop of ours that reached the engine after our last start, `owner` the name the VM bears (a call
    naming another target raises InstanceNotOwned), and a state of None a VM that no longer exists. `answers`
    scripts the next answers to a verb, one per call: True sent, False nothing sent (one of ours still under way),
    an exception raised after the request left (a lost answer)."""

    def __init__(self, state: PowerState | None = PowerState.ON, owner: str | None = None) -> None:
        self.state = state
        self.owner = owner
        self.stop_under_way = False
        self.late_stop = False
        self.refuse: dict[str, Exception] = {}  # verb -> what the engine answers instead of taking it
        self.answers: dict[str, list[bool | Exception]] = {}
        self.sent: list[tuple[str, str]] = []

    @property
    def verbs(self) -> list[str]:
        """The verbs of the actions sent, in order."""
        return [verb for verb, _ in self.sent]

    def _own(self, name: str, provider_id: str = "") -> None:
        if self.owner is not None and name != self.owner:
            raise InstanceNotOwned(f"the VM is named {self.owner!r}, not {name!r}", provider_id.rpartition("/")[2],
                                   provider_id)

    def power(self, provider_id: str, name: str) -> Power | None:
        self._own(name, provider_id)
        return None if self.state is None else Power(self.state, self.state.value.lower())

    def power_off_under_way(self, provider_id: str, name: str) -> bool:
        self._own(name)
        return self.stop_under_way

    def stopped_by_late_power_off(self, provider_id: str, name: str) -> bool:
        self._own(name)
        return self.late_stop

    def power_off(self, provider_id: str, name: str) -> bool:
        self._own(name)
        if self.stop_under_way:
            return False  # the provider sends nothing while a stop of ours is being carried out
        return self._act("power_off", name)

    def power_on(self, provider_id: str, name: str) -> bool:
        return self._act("power_on", name)

    def _act(self, verb: str, name: str) -> bool:
        self._own(name)
        answer = self.answers[verb].pop(0) if self.answers.get(verb) else True
        if answer is False:
            return False
        self.sent.append((verb, name))
        if isinstance(answer, Exception):
            raise answer
        if verb in self.refuse:
            raise self.refuse[verb]
        return True


class FakeEngines:
    """An `Engines` (several engines, Cluster API's front end) handing out one scripted actuator for every identity.
    It records the identities asked for and, for each, whether `check()` held then (a test's probe of the API, e.g.
    "the finalizer is written"); `missing` is the set of oVirt cluster ids no engine has, `error` what asking raises
    (an identity Secret missing, an engine down)."""

    def __init__(self, actuator: FakeActuator | None = None, missing: Iterable[str] = (),
                 error: BaseException | None = None) -> None:
        self.fake = actuator or FakeActuator()
        self.missing = set(missing)
        self.error = error
        self.asked: list[Any] = []  # the EngineIdentity of each call
        self.checked: list[bool] = []
        self.check: Any = lambda: True
        self.forgotten: list[str] = []

    def _ask(self, identity: Any) -> None:
        self.asked.append(identity)
        self.checked.append(bool(self.check()))
        if self.error is not None:
            raise self.error

    def actuator(self, identity: Any) -> FakeActuator:
        self._ask(identity)
        return self.fake

    def missing_clusters(self, identity: Any, cluster_ids: Iterable[str]) -> list[str]:
        self._ask(identity)
        return [c for c in cluster_ids if c in self.missing]

    def forget(self, key: str) -> None:
        self.forgotten.append(key)


def run_passes(reconcile: Any, key: str, results: list) -> None:
    """Reconcile `key` once per entry of `results`, as the work queue would (a lost race ended as the controller loop
    ends it), checking each pass: what it returns, or the exception class it raises."""
    import pytest

    from machine_controller.runtime.controller import settle

    for i, expected in enumerate(results):
        if isinstance(expected, type) and issubclass(expected, BaseException):
            with pytest.raises(expected):
                settle(reconcile, key)
        else:
            assert settle(reconcile, key) == expected, f"pass {i}"


def check_conditions(status: dict, want: dict[str, str]) -> dict[str, dict]:
    """Each condition type of `want` is in `status` with the status ("True") or status and reason ("False/Reason")
    given; returns the conditions by type."""
    got = {c["type"]: c for c in status.get("conditions") or []}
    for ctype, expected in want.items():
        assert ctype in got, f"no {ctype} condition: {sorted(got)}"
        have = got[ctype]["status"] + (f"/{got[ctype]['reason']}" if "/" in expected else "")
        assert have == expected, ctype
    return got


class RecordingQueue:
    """A work queue that records the keys added (for tests of the event handlers a controller registers)."""

    def __init__(self, name: str = "test") -> None:
        self.name = name
        self.added: list[str] = []

    def add(self, key: str) -> None:
        self.added.append(key)


class StubManager:
    """What an `add_<name>_controller` asks of the Manager: a registry, and the controller it adds (not started)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry()
        self.controllers: list[Any] = []

    def add_controller(self, controller: Any) -> None:
        self.controllers.append(controller)
