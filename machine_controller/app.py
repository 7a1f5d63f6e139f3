"""Wiring: the only module that knows both the generic controllers and the oVirt provider
(docs/architecture.md#layers). Each controller is added by one `add_<name>_controller(...)` call."""

from __future__ import annotations

import functools

import structlog
from prometheus_client import CollectorRegistry

from machine_controller.config import CAPI_CONTROLLER_NAMES, Config
from machine_controller.controllers.healthcheck.reconciler import add_machinehealthcheck_controller
from machine_controller.controllers.infrastructure.ovirtcluster import add_ovirtcluster_controller
from machine_controller.controllers.infrastructure.ovirtmachine import add_ovirtmachine_controller
from machine_controller.controllers.infrastructure.ovirtmachinetemplate import add_ovirtmachinetemplate_controller
from machine_controller.controllers.infrastructure.resources import (
    CAPI_CLUSTERS,
    CAPI_MACHINES,
    INDEX_CLUSTER,
    OVIRT_CLUSTERS,
    OVIRT_MACHINE_TEMPLATES,
    OVIRT_MACHINES,
    cluster_index,
)
from machine_controller.controllers.machine.reconciler import MachineReconciler, add_machine_controller
from machine_controller.controllers.machineset.capacity_controller import add_machineset_capacity_controller
from machine_controller.controllers.machineset.reconciler import add_machineset_controller
from machine_controller.controllers.mao_metrics import MaoCollector
from machine_controller.controllers.nodes.lifecycle import (
    NodeInstanceReconciler,
    add_node_instance_controller,
    wake_on_provider_id,
)
from machine_controller.controllers.nodes.matching import (
    INDEX_INTERNAL_IP,
    INDEX_NAME,
    INDEX_PROVIDER_ID,
    NodeMachineMatching,
    internal_ip_index,
    name_index,
    provider_id_index,
)
from machine_controller.controllers.nodes.nodelink import add_nodelink_controller
from machine_controller.controllers.nodes.status import cached_node
from machine_controller.controllers.remediation.reconciler import (
    ClusterApiSources,
    RemediationTiming,
    add_remediation_controller,
)
from machine_controller.controllers.resources import MACHINES, MACHINESETS, NODES, SECRETS
from machine_controller.ovirt.actuator import OvirtActuator
from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.cluster_inputs import ClusterVips, CredentialsWatch, UserData
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.engines import OvirtEngines
from machine_controller.ovirt.instances import OvirtInstances
from machine_controller.ovirt.power import OvirtPower
from machine_controller.ovirt.request_metrics import RequestMetrics
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.informer import Informer, compact
from machine_controller.runtime.kube import Rest, load_api_client
from machine_controller.runtime.leader_election import LeaderElectionConfig
from machine_controller.runtime.logging import configure_logging
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.metrics_auth import MetricsAuth
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.server import ServingCert
from machine_controller.runtime.workqueue import WorkQueue

log = structlog.get_logger("app")
COMPONENT = "ovirt-machine-controller"


def build(config: Config, registry: CollectorRegistry | None = None) -> Manager:
    registry = registry if registry is not None else CollectorRegistry()
    api = load_api_client(config.kubeconfig, user_agent=COMPONENT, trusted_ca_bundle=config.trusted_ca_bundle)
    rest = Rest(api)
    leader = None
    if config.leader_elect:
        leader = LeaderElectionConfig(
            namespace=config.leader_election_namespace, name=config.leader_election_id, identity=config.identity,
            lease_duration=config.lease_duration_s, renew_deadline=config.renew_deadline_s,
            retry_period=config.retry_period_s)
    manager = Manager(
        api, registry=registry,
        health_address=(config.bind_address, config.health_port) if config.health_port else None,
        metrics_address=(config.bind_address, config.metrics_port) if config.metrics_port else None,
        leader_election=leader,
        metrics_cert=ServingCert(config.metrics_cert_dir) if config.metrics_secure else None,
        metrics_auth=MetricsAuth(rest) if config.metrics_secure else None)

    # The oVirt provider: one connection pool fed live from the credentials secret.
    pool = ConnectionPool(size=config.ovirt_connections, timeout_s=config.ovirt_timeout_s,
                          trusted_ca_bundle=config.trusted_ca_bundle)
    client = OvirtClient(pool, metrics=RequestMetrics.of(registry))
    creds = CredentialsWatch(pool)
    # Cluster API's controllers alone read no Machine API object nor its credentials secret: a process running only
    # them watches none of those kinds (their CRDs need not exist) and is ready without that secret.
    # The remediation controller fences the Machines of the front ends that run beside it
    # (docs/fencing.md#both-front-ends): named with Cluster API's controllers alone it serves only their Machines, so
    # it makes no process a Machine API one by itself.
    cluster_api = any(name in CAPI_CONTROLLER_NAMES for name in config.controllers)
    machine_api = any(name not in (*CAPI_CONTROLLER_NAMES, "remediation") for name in config.controllers) \
        or not cluster_api
    if machine_api:
        secrets = manager.add_informer(Informer(
            api, SECRETS, namespace=config.credentials_namespace,
            field_selector=f"metadata.name={config.credentials_name}", resync_period=config.resync_s))
        secrets.add_handler(creds.handler())
        if manager.health is not None:
            manager.health.add_readyz_check("ovirt-credentials", lambda: creds.problem is None)
    manager.on_shutdown(pool.close)
    actuator = OvirtActuator(client, UserData(rest), ClusterVips(rest))
    instances = OvirtInstances(client, actuator.vm_lists)  # a new Node's VM is in a recent list
    power = OvirtPower(client)

    # The informers the controllers share.
    indexers = {INDEX_PROVIDER_ID: provider_id_index, INDEX_INTERNAL_IP: internal_ip_index}
    # No reader of Machines or Nodes looks at managedFields (the capacity controller reads a MachineSet's own).
    machines = Informer(api, MACHINES, namespace=config.namespace or None, resync_period=config.resync_s,
                        indexers={**indexers, INDEX_NAME: name_index}, transform=compact)
    nodes = Informer(api, NODES, resync_period=config.resync_s, indexers=indexers, transform=cached_node)
    if machine_api:
        manager.add_informer(machines)
    if machine_api or "remediation" in config.controllers:
        manager.add_informer(nodes)

    # One MachineSet informer for the MachineSet and capacity controllers, made only if one of them runs; it keeps
    # managedFields (the capacity controller reads which annotations it owns).
    @functools.cache
    def machineset_informer() -> Informer:
        return manager.add_informer(Informer(api, MACHINESETS, namespace=config.namespace or None,
                                             resync_period=config.resync_s))

    # Which Machine a Node belongs to and back: one stateless fold over the two stores. Only where this project's
    # nodelink runs in this process do the Machine and node instance controllers fold its part into their own writes;
    # beside MAO's nodelink they leave the link to it (docs/architecture.md#matching-nodes-and-machines).
    matching = NodeMachineMatching(machines.store, nodes.store)
    folds = matching if "nodelink" in config.controllers else None

    events = EventRecorder(api, COMPONENT)
    manager.on_shutdown(events.close)
    mao = MaoCollector()
    registry.register(mao)

    def queue(name: str) -> WorkQueue:
        return WorkQueue(name, controller_rate_limiter(base=config.backoff_base_s, cap=config.backoff_cap_s),
                         registry=registry)

    def machine_controller() -> MachineReconciler:
        machine_queue = queue("machine")
        # A Machine waiting on its cluster's VM list is woken when the list comes (ovirt/cluster_vm_lists.py).
        actuator.wake_with(machine_queue.add)
        return add_machine_controller(manager, rest, machines, nodes, actuator, events, machine_queue,
                                      workers=config.workers, mao=mao, matching=folds)

    def node_instance_controller() -> NodeInstanceReconciler:
        node_queue = queue("ovirt-node")
        reconciler = add_node_instance_controller(manager, rest, nodes, instances, events, node_queue,
                                                  matching=folds)
        if folds is not None:
            wake_on_provider_id(machines, nodes.store, node_queue)  # the Nodes waiting for their Machine's providerID
        return reconciler

    # Cluster API's front end: one actuator per engine identity (ovirt/engines.py), and the informers its two
    # controllers share, made only if one of them runs.
    engines = OvirtEngines(rest, registry, connections=config.ovirt_connections, timeout_s=config.ovirt_timeout_s,
                           trusted_ca_bundle=config.trusted_ca_bundle)
    manager.on_shutdown(engines.close)

    @functools.cache
    def capi_informer(kind: str) -> Informer:
        resource = {r.plural: r for r in (OVIRT_MACHINES, OVIRT_CLUSTERS, OVIRT_MACHINE_TEMPLATES, CAPI_MACHINES,
                                             CAPI_CLUSTERS)}[kind]
        return manager.add_informer(Informer(
            api, resource, namespace=config.namespace or None, resync_period=config.resync_s,
            indexers={INDEX_CLUSTER: cluster_index} if resource == OVIRT_MACHINES else None, transform=compact))

    def ovirtmachine_controller() -> None:
        ovirtmachine_queue = queue("ovirtmachine")
        engines.wake_with(ovirtmachine_queue.add)
        add_ovirtmachine_controller(manager, rest, capi_informer("ovirtmachines"), capi_informer("machines"),
                                    capi_informer("clusters"), capi_informer("ovirtclusters"), engines, events,
                                    ovirtmachine_queue, workers=config.workers)

    adders = {
        "ovirtcluster": lambda: add_ovirtcluster_controller(
            manager, rest, capi_informer("ovirtclusters"), capi_informer("clusters"), capi_informer("ovirtmachines"),
            engines, events, queue("ovirtcluster")),
        "ovirtmachine": ovirtmachine_controller,
        "ovirtmachinetemplate": lambda: add_ovirtmachinetemplate_controller(
            manager, rest, capi_informer("ovirtmachinetemplates"), events, queue("ovirtmachinetemplate"),
            clusters=capi_informer("clusters")),
        "machine": machine_controller,
        "nodelink": lambda: add_nodelink_controller(
            manager, rest, machines, nodes, matching, queue("nodelink"),
            node_part_left_to_provider_id_write="ovirt-nodes" in config.controllers),
        "ovirt-nodes": node_instance_controller,
        "machineset": lambda: add_machineset_controller(manager, rest, machineset_informer(), machines, nodes,
                                                        events, queue("machineset"), mao=mao),
        "machineset-capacity": lambda: add_machineset_capacity_controller(manager, rest, machineset_informer(),
                                                                          events, queue("machineset-capacity")),
        "machinehealthcheck": lambda: add_machinehealthcheck_controller(
            manager, api, rest, machines, nodes, events, queue("machinehealthcheck"),
            namespace=config.namespace or None, resync_s=config.resync_s),
        "remediation": lambda: add_remediation_controller(
            manager, api, rest, machines if machine_api else None, nodes, power if machine_api else None, events,
            queue("remediation"), namespace=config.namespace or None, resync_s=config.resync_s,
            timing=RemediationTiming(max_concurrent_power=config.max_concurrent_power_cycles,
                                     request_timeout_s=config.ovirt_timeout_s),
            cluster_api=ClusterApiSources(capi_informer("machines"), capi_informer("clusters"),
                                          capi_informer("ovirtclusters"), engines) if cluster_api else None),
    }
    for name in config.controllers:
        adders[name]()
    return manager


def run(config: Config) -> int:
    configure_logging(config.log_level)
    manager = build(config)
    log.info("starting", controllers=",".join(config.controllers), namespace=config.namespace or "(all)",
             workers=config.workers,
             leader_elect=config.leader_elect, identity=config.identity)
    return manager.run()
