"""The Manager wiring against a real API server: informer -> queue -> workers reconciling from the cache, readiness
and metrics over HTTP, leader election, and a graceful SIGTERM that finishes in-flight work and frees the Lease."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from typing import Callable

from prometheus_client import CollectorRegistry

from machine_controller.runtime.controller import Controller, Result, enqueue_object
from machine_controller.runtime.informer import Informer
from machine_controller.runtime.kube import CONFIG_MAPS, LEASES, Rest, split_key
from machine_controller.runtime.leader_election import LeaderElectionConfig
from machine_controller.runtime.manager import Manager
from machine_controller.runtime.ratelimit import controller_rate_limiter
from machine_controller.runtime.testing import wait_until
from machine_controller.runtime.workqueue import WorkQueue


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def annotate_reconciler(rest: Rest, informer: Informer) -> Callable[[str], Result]:
    """A level-triggered toy: copy data.want into an annotation, reading the object from the cache."""

    def reconcile(key: str) -> Result:
        obj = informer.store.get(key)
        if obj is None:
            return Result()
        want = (obj.get("data") or {}).get("want", "")
        if (obj["metadata"].get("annotations") or {}).get("reconciled") != want:
            namespace, name = split_key(key)
            rest.merge_patch(CONFIG_MAPS, name, {"metadata": {"annotations": {"reconciled": want}}}, namespace)
        return Result()

    return reconcile


def test_manager_reconciles_from_the_cache_and_reports_ready(cluster, namespace):
    api = cluster.api_client()
    rest = Rest(api)
    registry = CollectorRegistry()
    informer = Informer(api, CONFIG_MAPS, namespace=namespace, label_selector="runtime-e2e=yes")
    queue = WorkQueue("configmaps", rate_limiter=controller_rate_limiter(base=0.1, cap=2), registry=registry)
    informer.add_handler(enqueue_object(queue))
    manager = Manager(api, registry=registry, health_address=("127.0.0.1", 0), metrics_address=("127.0.0.1", 0),
                      leader_election=LeaderElectionConfig(namespace, "manager-e2e", "me", 4, 3, 0.5),
                      shutdown_timeout=10)
    manager.add_informer(informer)
    manager.add_controller(Controller("configmaps", queue, annotate_reconciler(rest, informer), workers=2,
                                      registry=registry))
    rest.create(CONFIG_MAPS, {"metadata": {"name": "a", "namespace": namespace, "labels": {"runtime-e2e": "yes"}},
                              "data": {"want": "1"}}, namespace)
    exit_code: list[int] = []
    runner = threading.Thread(target=lambda: exit_code.append(manager.run()))
    runner.start()
    try:
        base = f"http://127.0.0.1:{manager.health.port}"
        assert wait_until(lambda: http_status(base + "/readyz") == 200)
        assert http_status(base + "/healthz") == 200

        def annotation(name: str) -> str | None:
            return (rest.get(CONFIG_MAPS, name, namespace)["metadata"].get("annotations") or {}).get("reconciled")

        assert wait_until(lambda: annotation("a") == "1")
        rest.merge_patch(CONFIG_MAPS, "a", {"data": {"want": "2"}}, namespace)
        assert wait_until(lambda: annotation("a") == "2"), "a change is reconciled again"

        with urllib.request.urlopen(base + "/metrics", timeout=5) as response:
            metrics = response.read().decode()
        assert 'controller_runtime_reconcile_total{controller="configmaps",result="success"}' in metrics
        assert 'workqueue_adds_total{name="configmaps"}' in metrics
        assert rest.get(LEASES, "manager-e2e", namespace)["spec"]["holderIdentity"] == "me"
    finally:
        manager.stop()
        runner.join(30)
    assert exit_code == [0]
    assert not rest.get(LEASES, "manager-e2e", namespace)["spec"].get("holderIdentity"), "lease released"


_SCRIPT = textwrap.dedent('''
    import sys, time
    from machine_controller.runtime.controller import Controller, Result, enqueue_object
    from machine_controller.runtime.informer import Informer
    from machine_controller.runtime.kube import CONFIG_MAPS, Rest, load_api_client, split_key
    from machine_controller.runtime.leader_election import LeaderElectionConfig
    from machine_controller.runtime.logging import configure_logging, get_logger
    from machine_controller.runtime.manager import Manager
    from machine_controller.runtime.workqueue import WorkQueue

    kubeconfig, namespace = sys.argv[1:3]
    configure_logging("info")
    log = get_logger("script")
    api = load_api_client(kubeconfig)
    rest = Rest(api)
    informer = Informer(api, CONFIG_MAPS, namespace=namespace, label_selector="runtime-e2e=yes")
    queue = WorkQueue("slow")
    informer.add_handler(enqueue_object(queue))

    def reconcile(key):
        log.info("reconcile started")
        time.sleep(2)  # an in-flight reconcile that SIGTERM must let finish
        ns, name = split_key(key)
        rest.merge_patch(CONFIG_MAPS, name, {"metadata": {"annotations": {"finished": "yes"}}}, ns)
        log.info("reconcile finished")
        return Result()

    manager = Manager(api, health_address=("127.0.0.1", 0), metrics_address=None, shutdown_timeout=20,
                      leader_election=LeaderElectionConfig(namespace, "sigterm-e2e", "proc", 4, 3, 0.5))
    manager.add_informer(informer)
    manager.add_controller(Controller("slow", queue, reconcile))
    sys.exit(manager.run())
''')


def test_sigterm_finishes_in_flight_reconciles_and_releases_the_lease(cluster, namespace, tmp_path):
    rest = Rest(cluster.api_client())
    rest.create(CONFIG_MAPS, {"metadata": {"name": "slow", "namespace": namespace,
                                           "labels": {"runtime-e2e": "yes"}}}, namespace)
    script = tmp_path / "manager_main.py"
    script.write_text(_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(cluster.kubeconfig), namespace],
                            stderr=subprocess.PIPE, text=True)
    lines: list[dict] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"event": line.strip()})

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert wait_until(lambda: any(r.get("event") == "reconcile started" for r in lines)), lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(5)
    started = next(r for r in lines if r.get("event") == "reconcile started")
    assert started["key"] == f"{namespace}/slow" and started["controller"] == "slow" and started["reconcile_id"]
    assert any(r.get("event") == "reconcile finished" for r in lines)
    annotations = rest.get(CONFIG_MAPS, "slow", namespace)["metadata"].get("annotations") or {}
    assert annotations.get("finished") == "yes", "the in-flight reconcile completed before exit"
    assert not rest.get(LEASES, "sigterm-e2e", namespace)["spec"].get("holderIdentity"), "lease released"
