"""Upstream Cluster API's own core controllers (v1.14.2) drive this project's OvirtCluster and OvirtMachine
controllers on the simulated engine (issue 40 item 3): a MachineDeployment reaches Running Machines with nodeRefs
(its template telling its capacity),
one VM per OvirtMachine named after it, the same providerID on Machine, OvirtMachine and Node; scaling up and down
creates and removes VMs; a Machine deleted by hand is replaced; a template change rolls the VMs one by one."""

from __future__ import annotations

CLONED_FROM = "cluster.x-k8s.io/cloned-from-name"  # what Cluster API writes on an infra machine cloned from a template


def test_machinedeployment_of_three_reaches_running_machines_with_nodes_and_their_vms(capi):
    capi.controller()
    wc = capi.create_cluster(replicas=3)
    machines = wc.wait_running(3)

    cluster = capi.get("clusters.cluster.x-k8s.io", wc.name)
    init = cluster["status"]["initialization"]
    assert init == {"infrastructureProvisioned": True, "controlPlaneInitialized": True}, init
    vm_by_name = {vm["name"]: vm for vm in wc.vms()}
    assert set(vm_by_name) == {m["spec"]["infrastructureRef"]["name"] for m in machines}
    for m in machines:
        vm = vm_by_name[m["spec"]["infrastructureRef"]["name"]]
        # The VM is the OvirtMachine's own: created with the cloud-config bootstrap data of the Machine.
        assert capi.sim.control.vm(vm["id"])["init_mode"] == "cloud_init"
    # Scaling from zero: the template the MachineDeployment names tells the autoscaler the size of a Machine (1
    # socket x 2 cores, 2048 MiB), written by the time its Machines run (the same controller process).
    template = capi.get("ovirtmachinetemplates.infrastructure.cluster.x-k8s.io", wc.template)
    assert template["status"]["capacity"] == {"cpu": "2", "memory": "2048Mi"}, template.get("status")


def _names(machines: list[dict]) -> set[str]:
    return {m["metadata"]["name"] for m in machines}


def test_scaling_up_and_down_creates_and_removes_vms_and_a_deleted_machine_is_replaced(capi):
    capi.controller()
    wc = capi.create_cluster(replicas=3)
    three = _names(wc.wait_running(3))
    vm_ids = {vm["name"]: vm["id"] for vm in wc.vms()}

    wc.scale(4)
    four = _names(wc.wait_running(4))
    assert three < four

    wc.scale(2)
    two = _names(wc.wait_running(2))
    assert two < four
    gone = four - two
    left_vms = {vm["name"] for vm in wc.vms()}
    assert not gone & left_vms and left_vms == two
    assert not any(vm["id"] == vm_ids.get(name) for name in gone for vm in capi.sim.control.vms())

    victim = sorted(two)[0]
    capi.k("-n", capi.namespace, "delete", "machines.cluster.x-k8s.io", victim, "--wait=false")
    after = _names(wc.wait_running(2))
    assert victim not in after and len(after - two) == 1
    assert victim not in {vm["name"] for vm in capi.sim.control.vms()}


def test_template_change_rolls_the_vms_one_by_one_and_removes_the_old_ones(capi):
    capi.controller()
    wc = capi.create_cluster(replicas=3, memory_mb=2048)
    wc.wait_running(3)
    old = {vm["id"] for vm in wc.vms()}
    new_template = f"{wc.name}-t2"
    capi.apply(wc.machine_template(new_template, memory_mb=3072))

    # maxSurge 1, maxUnavailable 0: at most one VM more than the 3 wanted, and none of the 3 gone before its
    # replacement runs.
    seen: list[tuple[int, int]] = []
    capi.k("-n", capi.namespace, "patch", "machinedeployments.cluster.x-k8s.io", wc.name, "--type=merge", "-p",
           '{"spec":{"template":{"spec":{"infrastructureRef":{"name":"%s"}}}}}' % new_template)
    machines = wc.wait_running(3, also=lambda vms: {v["id"] for v in vms}.isdisjoint(old),
                               on_poll=lambda vms: seen.append((len(vms), sum(v["status"] == "up" for v in vms))))

    infra = wc.ovirt_machines()
    assert {infra[m["spec"]["infrastructureRef"]["name"]]["metadata"]["annotations"][CLONED_FROM]
            for m in machines} == {new_template}
    assert {v["id"] for v in capi.sim.control.vms()}.isdisjoint(old), "an old VM survived the rollout"
    assert all(wc.vm_memory(vm["id"]) == 3072 * 2**20 for vm in wc.vms())
    assert max(total for total, _ in seen) == 4, seen  # one at a time: a fourth VM appeared, never a fifth
    assert min(up for _, up in seen) >= 3, seen
