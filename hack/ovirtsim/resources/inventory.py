"""The API root and the read-mostly inventory: data centers, clusters, hosts, storage domains, networks, vNIC
profiles, templates, instance types, tags and jobs (docs/compatibility.md#listing-and-search)."""

from __future__ import annotations

import datetime
from typing import Any, Callable

from ovirtsdk4 import types

from hack.ovirtsim import xmlio
from hack.ovirtsim.errors import Msg, bad_parameters, conflict, incomplete
from hack.ovirtsim.resources.common import entity, get_or_404, listing, ref, removed, resolve, shallow, wants
from hack.ovirtsim.router import ApiRequest, ApiResponse, EngineView, route
from hack.ovirtsim.scheduler import free_memory, vms_on_host
from hack.ovirtsim.seed import BLANK_ID, ROOT_TAG_ID
from hack.ovirtsim.statemachine import RUNNING
from hack.ovirtsim.store import Store, href, new_id

PRODUCT_VERSION = types.Version(major=4, minor=5, build=7, revision=0, full_version="4.5.7-1.el9")
_INSTANCE_ID = "c0ffee00-0000-4000-8000-000000000001"
COLLECTIONS = ("clusters", "datacenters", "disks", "hosts", "instancetypes", "jobs", "networks", "storagedomains",
               "tags", "templates", "vms", "vnicprofiles")
SEARCHABLE = {"clusters", "datacenters", "disks", "hosts", "instancetypes", "jobs", "storagedomains", "templates",
              "vms"}


def _named(store: Store) -> dict[str, Callable[[Any], Any]]:
    return {"name": lambda o: o.name, "id": lambda o: o.id, "description": lambda o: o.description,
            "status": lambda o: getattr(o, "status", None)}


def _cluster_name(store: Store, obj: Any) -> str | None:
    c = store.clusters.get(obj.cluster.id) if getattr(obj, "cluster", None) else None
    return c.name if c else None


def _dc_name(store: Store, dc_refs: list[Any]) -> list[str]:
    return [dc.name for dc in (store.data_centers.get(r.id) for r in dc_refs) if dc]


# -- API root ----------------------------------------------------------------------------------------------
@route("GET", "/")
def api_root(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    blank = types.Template(id=BLANK_ID)
    blank.href = href("templates", BLANK_ID)
    root_tag = types.Tag(id=ROOT_TAG_ID)
    root_tag.href = href("tags", ROOT_TAG_ID)
    vms = list(store.vms.all())
    api = types.Api(
        product_info=types.ProductInfo(name="oVirt Engine", vendor="ovirt.org", instance_id=_INSTANCE_ID,
                                       version=PRODUCT_VERSION),
        special_objects=types.SpecialObjects(blank_template=blank, root_tag=root_tag),
        summary=types.ApiSummary(
            hosts=types.ApiSummaryItem(active=sum(1 for h in store.hosts.all() if h.status is types.HostStatus.UP),
                                       total=len(store.hosts)),
            storage_domains=types.ApiSummaryItem(active=len(store.storage_domains), total=len(store.storage_domains)),
            users=types.ApiSummaryItem(active=1, total=1),
            vms=types.ApiSummaryItem(active=sum(1 for v in vms if v.status in RUNNING), total=len(vms))),
        time=datetime.datetime.now(datetime.timezone.utc))
    text = xmlio.render(api)
    links = "".join(f'<link href="{href(c)}" rel="{c}"/>'
                    + (f'<link href="{href(c)}?search={{query}}" rel="{c}/search"/>' if c in SEARCHABLE else "")
                    for c in COLLECTIONS)
    text = text.replace("<api>", "<api>" + links, 1)
    return ApiResponse.xml(text)


# -- data centers, clusters, hosts -------------------------------------------------------------------------
@route("GET", "/datacenters")
def list_dcs(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return listing(engine, req, engine.store.data_centers.all(), "data_centers", _named(engine.store))


@route("GET", "/datacenters/{dc}")
def get_dc(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.data_centers, req.params["dc"]))


@route("GET", "/clusters")
def list_clusters(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    fields = dict(_named(store), datacenter=lambda c: _dc_name(store, [c.data_center] if c.data_center else []))
    return listing(engine, req, store.clusters.all(), "clusters", fields)


@route("GET", "/clusters/{cluster}")
def get_cluster(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.clusters, req.params["cluster"]))


def present_host(store: Store, host: types.Host) -> types.Host:
    """Live figures the engine computes: running VMs and the memory still schedulable."""
    view = shallow(host)
    running = vms_on_host(store, host.id)
    view.summary = types.VmSummary(active=len(running), migrating=0, total=len(running))
    view.max_scheduling_memory = max(0, free_memory(store, host))
    return view


@route("GET", "/hosts")
def list_hosts(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    fields = dict(_named(store), cluster=lambda h: _cluster_name(store, h), address=lambda h: h.address,
                  datacenter=lambda h: _dc_name(store, [c.data_center for c in [store.clusters.get(h.cluster.id)]
                                                        if c and c.data_center]))
    hosts = [present_host(store, h) for h in store.hosts.all()]
    return listing(engine, req, hosts, "hosts", fields)


@route("GET", "/hosts/{host}")
def get_host(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    return entity(present_host(store, get_or_404(store.hosts, req.params["host"])))


# -- storage -----------------------------------------------------------------------------------------------
@route("GET", "/storagedomains")
def list_sds(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    fields = dict(_named(store), datacenter=lambda sd: _dc_name(store, sd.data_centers or []),
                  type=lambda sd: sd.type)
    return listing(engine, req, store.storage_domains.all(), "storage_domains", fields)


@route("GET", "/storagedomains/{sd}")
def get_sd(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.storage_domains, req.params["sd"]))


@route("GET", "/storagedomains/{sd}/disks")
def list_sd_disks(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    sd = get_or_404(store.storage_domains, req.params["sd"])
    disks = [d for d in store.disks.all() if any(r.id == sd.id for r in (d.storage_domains or []))]
    return listing(engine, req, disks, "disks")


# -- networks ----------------------------------------------------------------------------------------------
@route("GET", "/networks")
def list_networks(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return listing(engine, req, engine.store.networks.all(), "networks", _named(engine.store))


@route("GET", "/networks/{network}")
def get_network(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.networks, req.params["network"]))


@route("GET", "/networks/{network}/vnicprofiles")
def list_network_profiles(engine: EngineView, req: ApiRequest) -> ApiResponse:
    net = get_or_404(engine.store.networks, req.params["network"])
    return listing(engine, req, [p for p in engine.store.vnic_profiles.all() if p.network.id == net.id],
                   "vnic_profiles")


@route("GET", "/vnicprofiles")
def list_profiles(engine: EngineView, req: ApiRequest) -> ApiResponse:
    """No `search` here, as on the engine: clients filter by name client-side
    (docs/compatibility.md#listing-and-search)."""
    return listing(engine, req, engine.store.vnic_profiles.all(), "vnic_profiles")


@route("GET", "/vnicprofiles/{profile}")
def get_profile(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.vnic_profiles, req.params["profile"]))


# -- templates and instance types --------------------------------------------------------------------------
def _template_follow(store: Store) -> Callable[[Any, list[str]], Any]:
    def follow(t: types.Template, paths: list[str]) -> types.Template:
        view = shallow(t)
        if wants(paths, "disk_attachments"):
            das = []
            for da in store.template_disk_attachments.children(t.id):
                v = shallow(da)
                if "disk_attachments.disk" in paths:
                    v.disk = store.disks.get(da.id) or da.disk
                das.append(v)
            view.disk_attachments = das
        if wants(paths, "nics"):
            view.nics = store.template_nics.children(t.id)
        return view
    return follow


@route("GET", "/templates")
def list_templates(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    fields = dict(_named(store), cluster=lambda t: _cluster_name(store, t),
                  datacenter=lambda t: _template_dcs(store, t))
    return listing(engine, req, store.templates.all(), "templates", fields, present=_template_follow(store))


def _template_dcs(store: Store, template: types.Template) -> list[str]:
    """A template belongs to its cluster's data center; Blank belongs to every data center."""
    cluster = store.clusters.get(template.cluster.id) if template.cluster else None
    if cluster is None:
        return [dc.name for dc in store.data_centers.all()]
    return _dc_name(store, [cluster.data_center] if cluster.data_center else [])


@route("GET", "/templates/{template}")
def get_template(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    return entity(get_or_404(store.templates, req.params["template"]), req, present=_template_follow(store))


@route("GET", "/templates/{template}/diskattachments")
def list_template_das(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    t = get_or_404(store.templates, req.params["template"])

    def follow(da: types.DiskAttachment, paths: list[str]) -> types.DiskAttachment:
        view = shallow(da)
        if "disk" in paths:
            view.disk = store.disks.get(da.id) or da.disk
        return view

    return listing(engine, req, store.template_disk_attachments.children(t.id), "disk_attachments", present=follow)


@route("GET", "/templates/{template}/diskattachments/{disk}")
def get_template_da(engine: EngineView, req: ApiRequest) -> ApiResponse:
    t = get_or_404(engine.store.templates, req.params["template"])
    return entity(get_or_404(engine.store.template_disk_attachments, req.params["disk"], t.id))


@route("GET", "/templates/{template}/nics")
def list_template_nics(engine: EngineView, req: ApiRequest) -> ApiResponse:
    t = get_or_404(engine.store.templates, req.params["template"])
    return listing(engine, req, engine.store.template_nics.children(t.id), "nics")


@route("GET", "/templates/{template}/graphicsconsoles")
def list_template_consoles(engine: EngineView, req: ApiRequest) -> ApiResponse:
    t = get_or_404(engine.store.templates, req.params["template"])
    return listing(engine, req, engine.store.template_consoles.children(t.id), "graphics_consoles")


@route("GET", "/instancetypes")
def list_instance_types(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return listing(engine, req, engine.store.instance_types.all(), "instance_types", _named(engine.store))


@route("GET", "/instancetypes/{it}")
def get_instance_type(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.instance_types, req.params["it"]))


# -- tags --------------------------------------------------------------------------------------------------
@route("GET", "/tags")
def list_tags(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return listing(engine, req, engine.store.tags.all(), "tags")


@route("GET", "/tags/{tag}")
def get_tag(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.tags, req.params["tag"]))


@route("POST", "/tags")
def add_tag(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    tag: types.Tag = req.parse(types.Tag)
    if not tag.name:
        raise incomplete("Tag", "name", "add")
    if store.find_by_name("tags", tag.name) is not None:
        raise conflict(Msg.tag_name_in_use("add"))
    parent = resolve(store, "tags", "Tag", tag.parent) if tag.parent is not None else store.tags.get(ROOT_TAG_ID)
    row = types.Tag(id=new_id(), name=tag.name, description=tag.description or tag.name,
                    parent=ref(parent) if parent is not None else None)
    row.href = href("tags", row.id)
    store.tags.put(row)
    return entity(row, status=201, location=True)


@route("DELETE", "/tags/{tag}")
def remove_tag(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    tag = get_or_404(store.tags, req.params["tag"])
    if tag.id == ROOT_TAG_ID:
        raise bad_parameters("Cannot remove Tag. The root tag cannot be removed.")
    store.tags.remove(tag.id)
    for assigned in store.runtime.vm_tags.values():
        if tag.id in assigned:
            assigned.remove(tag.id)
    return removed()


# -- jobs (docs/compatibility.md#correlation-ids) ----------------------------------------------------------------------
@route("GET", "/jobs")
def list_jobs(engine: EngineView, req: ApiRequest) -> ApiResponse:
    store = engine.store
    fields = {"correlation_id": lambda j: store.runtime.job_correlation.get(j.id), "status": lambda j: j.status,
              "description": lambda j: j.description, "id": lambda j: j.id}
    return listing(engine, req, store.jobs.all(), "jobs", fields)


@route("GET", "/jobs/{job}")
def get_job(engine: EngineView, req: ApiRequest) -> ApiResponse:
    return entity(get_or_404(engine.store.jobs, req.params["job"]))


@route("GET", "/jobs/{job}/steps")
def list_job_steps(engine: EngineView, req: ApiRequest) -> ApiResponse:
    job = get_or_404(engine.store.jobs, req.params["job"])
    step = types.Step(id=job.id, description=job.description, number=0, type=types.StepEnum.EXECUTING,
                      status=types.StepStatus(job.status.value), start_time=job.start_time, end_time=job.end_time,
                      job=ref(job))
    step.href = href("jobs", job.id, "steps", job.id)
    return listing(engine, req, [step], "steps")
