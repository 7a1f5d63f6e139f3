"""Protected metrics (--metrics-secure, docs/architecture.md#protected-metrics) against the real API server: HTTPS
with the serving certificate of a directory, re-read when rotated; a token allowed to GET /metrics gets 200, a
token without that right 403, no token or a token the API server rejects 401. The controller runs as a
ServiceAccount holding only the `manager` and `metrics-auth` groups of config/rbac, so the TokenReview and
SubjectAccessReview rights the process needs are those shipped."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
import uuid

import pytest

from hack.controller_process import ControllerProcess
from hack.controlplane.certs import self_signed_serving
from identities import bind_groups, token, token_kubeconfig, unbind


def _get(port: int, ca_file, bearer: str | None = None) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if bearer is not None:
        request.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _wait_listening(proc: ControllerProcess, ca_file, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _get(proc.metrics_port, ca_file)
            return
        except (urllib.error.URLError, ConnectionError, ssl.SSLError):
            assert proc.proc.poll() is None, proc.log_text()[-3000:]
            assert time.monotonic() < deadline, proc.log_text()[-3000:]
            time.sleep(0.1)


@pytest.fixture(scope="module")
def secure(cluster, tmp_path_factory):
    """One controller with protected metrics for the module (starting one costs seconds), in a namespace of its own,
    running as a ServiceAccount bound to the shipped `manager`, `ovirt-nodes` and `metrics-auth` groups only."""
    namespace = f"e2e-metrics-auth-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(namespace)
    tmp = tmp_path_factory.mktemp("metrics-auth")
    bound = bind_groups(cluster, ("manager", "ovirt-nodes", "metrics-auth"), namespace, "controller")
    kubeconfig = token_kubeconfig(cluster, namespace, "controller", tmp / "controller.kubeconfig")
    cert_dir = tmp / "tls"
    self_signed_serving(cert_dir)
    proc = ControllerProcess(kubeconfig, tmp / "controller.log", namespace=namespace, extra_args=(
        "--controllers=ovirt-nodes", f"--credentials-namespace={namespace}",
        "--metrics-secure", f"--metrics-cert-dir={cert_dir}"))
    proc.start()
    try:
        _wait_listening(proc, cert_dir / "tls.crt")
        yield namespace, proc, cert_dir
    finally:
        proc.stop()
        unbind(cluster, bound)
        cluster.delete_namespace(namespace)


def test_metrics_answer_by_token_review_and_subject_access_review(cluster, secure):
    namespace, proc, cert_dir = secure
    ca = cert_dir / "tls.crt"
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "scraper")
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "stranger")
    # The shipped reader role (config/rbac/metrics-auth, renamed for this test by bind_groups) granted to one.
    reader = f"metrics-scraper-{namespace}"
    cluster.kubectl("create", "clusterrolebinding", reader,
                    f"--clusterrole=ovirt-machine-controller-metrics-reader-{namespace}",
                    f"--serviceaccount={namespace}:scraper")
    try:
        status, body = _get(proc.metrics_port, ca, token(cluster, namespace, "scraper"))
        assert status == 200, body
        assert 'workqueue_adds_total{name="ovirt-node"}' in body  # the process's own registry

        status, body = _get(proc.metrics_port, ca, token(cluster, namespace, "stranger"))
        assert status == 403, body
        assert f"system:serviceaccount:{namespace}:stranger" in body

        assert _get(proc.metrics_port, ca)[0] == 401
        assert _get(proc.metrics_port, ca, "not-a-token")[0] == 401
        assert "forbidden" not in proc.log_text().lower(), proc.log_text()[-3000:]
    finally:
        cluster.kubectl("delete", "clusterrolebinding", reader, "--ignore-not-found", check=False)


def test_metrics_are_https_only_and_follow_a_rotated_certificate(secure):
    _, proc, cert_dir = secure
    with pytest.raises(OSError):  # the server hangs up on plain HTTP: no metrics without TLS
        urllib.request.urlopen(f"http://127.0.0.1:{proc.metrics_port}/metrics", timeout=5)

    old = (cert_dir / "tls.crt").read_bytes()
    self_signed_serving(cert_dir)  # what the service CA does when it rotates the Secret
    assert (cert_dir / "tls.crt").read_bytes() != old
    served = ssl.get_server_certificate(("127.0.0.1", proc.metrics_port)).encode()
    assert ssl.PEM_cert_to_DER_cert(served.decode()) == ssl.PEM_cert_to_DER_cert((cert_dir / "tls.crt").read_text())
    assert _get(proc.metrics_port, cert_dir / "tls.crt")[0] == 401  # the new CA verifies, no token: refused

