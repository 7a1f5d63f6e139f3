"""hack/bench/machines.py: the passes, queue waits and Kubernetes requests it prints are read from the controller's
own metrics, as a real work queue, controller and request counter export them."""

from prometheus_client import CollectorRegistry, generate_latest

from hack.bench.machines import _controller_totals, _mean_waits, _of
from machine_controller.runtime import rest_metrics
from machine_controller.runtime.controller import Controller
from machine_controller.runtime.metrics import family
from machine_controller.runtime.workqueue import WorkQueue


class Exported:
    """What ControllerProcess.metrics() reads over HTTP, from an in-process registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def metrics(self) -> str:
        return generate_latest(self.registry).decode()


def test_passes_and_mean_waits_are_told_apart_by_controller_and_taken_between_two_readings():
    registry = CollectorRegistry()
    clock = [100.0]
    queues = {name: WorkQueue(name, registry=registry, clock=lambda: clock[0]) for name in ("machine", "nodelink")}
    controllers = {name: Controller(name, q, lambda key: None, registry=registry) for name, q in queues.items()}
    ctl = Exported(registry)
    before = _controller_totals(ctl)
    for key in ("a", "b"):
        queues["machine"].add(key)
    queues["nodelink"].add("n")
    clock[0] += 3.0  # each waited 3 s, then the machine keys 1 s more
    assert queues["nodelink"].get() == "n"
    controllers["nodelink"].process("n")
    clock[0] += 1.0
    for key in (queues["machine"].get(), queues["machine"].get()):
        controllers["machine"].process(key)
    for q in queues.values():
        q.shutdown()
    after = _controller_totals(ctl)
    waits = _mean_waits(after - before)
    assert list(waits) == ["machine", "nodelink"]  # longest first
    assert abs(waits["machine"] - 4.0) < 1e-6 and abs(waits["nodelink"] - 3.0) < 1e-6
    assert _of(after - before, "passes") == {"machine": 2, "nodelink": 1}


def test_kubernetes_requests_are_counted_by_method_between_two_readings_whatever_their_answer():
    registry = CollectorRegistry()
    counted = family(registry, "rest_client_requests", rest_metrics._requests)
    ctl = Exported(registry)
    counted.labels("200", "PATCH").inc(5)
    before = _controller_totals(ctl)
    counted.labels("200", "PATCH").inc(3)
    counted.labels("409", "PATCH").inc()
    counted.labels(rest_metrics.NO_ANSWER, "GET").inc(2)
    counted.labels("201", "POST").inc()
    after = _controller_totals(ctl)
    assert _of(after - before, "requests") == {"PATCH": 4, "GET": 2, "POST": 1}
    assert _of(after - before, "passes") == {}
