"""Kubernetes API requests counted by method and answer code under client-go's name, `rest_client_requests_total`,
so that the throttling alert of config/monitoring (docs/runbooks/OvirtMachineControllerThrottled.md) sees the 429s the
API server's priority and fairness answers.

The count is taken at the generated client's one exit to the wire, `RESTClientObject.request`: every call of every
API class, watches included, passes there.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter

from .metrics import family

# A request that got no HTTP answer at all (refused connection, timeout): client-go's code label says "<error>".
NO_ANSWER = "<error>"


def _requests(registry: CollectorRegistry) -> Counter:
    return Counter("rest_client_requests", "Number of HTTP requests to the Kubernetes API, partitioned by status code "
                   "and method.", ["code", "method"], registry=registry)


def instrument(api_client: ApiClient, registry: CollectorRegistry | None) -> None:
    """Count every request `api_client` sends from now on (once per client, however often it is called)."""
    rest = api_client.rest_client
    if getattr(rest, "_omc_counted", False):
        return
    counter = family(registry, "rest_client_requests", _requests)
    send = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        try:
            response = send(method, url, *args, **kwargs)
        except ApiException as e:
            counter.labels(str(e.status) if e.status else NO_ANSWER, method.upper()).inc()
            raise
        except Exception:
            counter.labels(NO_ANSWER, method.upper()).inc()
            raise
        counter.labels(str(response.status), method.upper()).inc()
        return response

    # The generated client has no hook for this: its one exit to the wire is replaced on this instance.
    setattr(rest, "request", request)  # noqa: B010 - mypy forbids assigning to a method, which is the point here
    setattr(rest, "_omc_counted", True)  # noqa: B010 - a mark of ours on the client's object
