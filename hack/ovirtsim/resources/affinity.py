"""Affinity groups of a cluster and their VM lists (docs/compatibility.md#affinity-groups).

The engine inlines member VMs as `<vms><vm id href/></vms>`; enforcement happens in `scheduler` at start.
Adding a VM answers 200 with the `<vm>` reference (current engine); a duplicate member or name is a 400.
"""

from __future__ import annotations

from ovirtsdk4 import types

from hack.ovirtsim.errors import Msg, bad_parameters, incomplete, not_found
from hack.ovirtsim.resources.common import entity, get_or_404, listing, merge, ref, removed, resolve, shallow
from hack.ovirtsim.router import ApiRequest, ApiResponse, EngineView, route
from hack.ovirtsim.store import Store, href, new_id


def _group(engine: EngineView, req: ApiRequest) -> tuple[types.Cluster, types.AffinityGroup]:
    store = engine.store
    cluster = get_or_404(store.clusters, req.params["cluster"])
    return cluster, get_or_404(store.affinity_groups, req.params["group"], cluster.id)


def _normalise(group: types.AffinityGroup) -> None:
    """Defaults of `AffinityGroupMapper`: rules enabled unless said otherwise; deprecated flags mirror the VM rule."""
    if group.vms_rule is None:
        group.vms_rule = types.AffinityRule(enabled=group.positive is not None,
                                            enforcing=bool(group.enforcing), positive=bool(group.positive))
    if group.vms_rule.enabled is None:
        group.vms_rule.enabled = True
    if group.hosts_rule is None:
        group.hosts_rule = types.AffinityRule(enabled=False, enforcing=False, positive=False)
    group.enforcing = bool(group.vms_rule.enforcing)
    group.positive = bool(group.vms_rule.positive) if group.vms_rule.enabled else None


def _resolve_hosts(store: Store, group: types.AffinityGroup) -> None:
    if group.hosts:
        group.hosts = [ref(resolve(store, "hosts", "Host", h)) for h in group.hosts]


def present(store: Store, group: types.AffinityGroup) -> types.AffinityGroup:
    view = shallow(group)
    view.broken = False
    return view


@route("GET", "/clusters/{cluster}/affinitygroups")
def list_groups(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    cluster = get_or_404(store.clusters, req.params["cluster"])
    return listing(engine, req, [present(store, g) for g in store.affinity_groups.children(cluster.id)],
                   "affinity_groups")


@route("POST", "/clusters/{cluster}/affinitygroups")
def add_group(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    cluster = get_or_404(store.clusters, req.params["cluster"])
    group: types.AffinityGroup = req.parse(types.AffinityGroup)
    if not group.name:
        raise incomplete("AffinityGroup", "name", "add")
    if store.find_by_name("affinity_groups", group.name, cluster.id) is not None:
        raise bad_parameters(Msg.AFFINITY_NAME_EXISTS.format(action="add"))
    group.id = new_id()
    group.href = href("clusters", cluster.id, "affinitygroups", group.id)
    group.cluster = ref(cluster)
    group.vms = [_member(store, cluster, group, v) for v in (group.vms or [])]
    _resolve_hosts(store, group)
    _normalise(group)
    store.affinity_groups.put(group)
    return entity(present(store, group), status=201, location=True)


@route("GET", "/clusters/{cluster}/affinitygroups/{group}")
def get_group(engine: EngineView, req: ApiRequest) -> ApiResponse:
    _, group = _group(engine, req)
    return entity(present(engine.store, group))


@route("PUT", "/clusters/{cluster}/affinitygroups/{group}")
def update_group(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    cluster, group = _group(engine, req)
    patch: types.AffinityGroup = req.parse(types.AffinityGroup)
    if patch.name and patch.name != group.name and store.find_by_name("affinity_groups", patch.name, cluster.id):
        raise bad_parameters(Msg.AFFINITY_NAME_EXISTS.format(action="edit"))
    if patch.vms is not None:
        patch.vms = [_member(store, cluster, None, v) for v in patch.vms]
    _resolve_hosts(store, patch)
    merge(group, patch, skip=("_href", "_id", "_cluster"))
    _normalise(group)
    return entity(present(store, group))


@route("DELETE", "/clusters/{cluster}/affinitygroups/{group}")
def remove_group(engine: EngineView, req: ApiRequest) -> ApiResponse:
    cluster, group = _group(engine, req)
    engine.store.affinity_groups.remove(group.id, cluster.id)
    return removed()


def _member(store: Store, cluster: types.Cluster, group: types.AffinityGroup | None, given: types.Vm) -> types.Vm:
    """The current engine uses only the VM id (docs/compatibility.md#affinity-groups); an unknown VM is the backend's
    400."""
    vm = store.vms.get(given.id) if given.id else None
    if vm is None:
        raise bad_parameters("Cannot add Affinity Group. VM doesn't exist.")
    if group is not None and any(m.id == vm.id for m in (group.vms or [])):
        raise bad_parameters(Msg.AFFINITY_DUPLICATE_VM)
    return ref(vm)


@route("GET", "/clusters/{cluster}/affinitygroups/{group}/vms")
def list_members(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    _, group = _group(engine, req)
    members = []
    for m in group.vms or []:
        vm = store.vms.get(m.id)
        if vm is not None:
            view = types.Vm(id=vm.id, name=vm.name)
            view.href = vm.href
            members.append(view)
    return listing(engine, req, members, "vms")


@route("POST", "/clusters/{cluster}/affinitygroups/{group}/vms")
def add_member(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    cluster, group = _group(engine, req)
    given: types.Vm = req.parse(types.Vm)
    if not given.id:
        raise incomplete("Vm", "id", "add")
    member = _member(store, cluster, group, given)
    group.vms = list(group.vms or []) + [member]
    engine.add_job(req, f"Adding VM to Affinity Group {group.name}")
    return entity(member)


@route("DELETE", "/clusters/{cluster}/affinitygroups/{group}/vms/{vm}")
def remove_member(engine: EngineView, req: ApiRequest) -> ApiResponse:
    _, group = _group(engine, req)
    if not any(m.id == req.params["vm"] for m in (group.vms or [])):
        raise not_found()
    group.vms = [m for m in group.vms if m.id != req.params["vm"]]
    return removed()
