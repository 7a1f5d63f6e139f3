"""OpenShift's cluster-wide proxy and trust, as machine-api-operator gives them to the provider's container: the
proxy in HTTPS_PROXY/NO_PROXY (here with credentials in its URL, as OpenShift allows) and the cluster's CA bundle
in a file (docs/compatibility.md#cluster-wide-trust-and-proxy). The engine and the API server are addressed by the
machine's address, not loopback, which Go's rules (and so the Kubernetes client's here) never send to a proxy."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from connect_proxy import ConnectProxy  # the e2e helpers sit beside this file
from hack import ovirt_install
from hack.controller_process import ControllerProcess
from hack.controlplane.address import node_ip
from hack.ovirtsim.testing import running_simulator
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials
from machine_controller.runtime.cluster_proxy import TRUSTED_CA_BUNDLE, libcurl_environment
from machine_controller.runtime.kube import NODES, Rest, load_api_client
from machines import MACHINE_API_NS, unique_name

PROXY_USER = ("machine-api", "pr0xy-pass")
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                    "all_proxy")


@pytest.fixture
def proxy(monkeypatch):
    """An authenticating CONNECT proxy, and a process environment that names no other."""
    if node_ip() == "127.0.0.1":
        pytest.skip("this machine has no address but loopback, which is never sent through a proxy")
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with ConnectProxy(credentials=PROXY_USER) as p:
        yield p


def _with_credentials(proxy: ConnectProxy) -> str:
    return proxy.url.replace("http://", f"http://{PROXY_USER[0]}:{PROXY_USER[1]}@")


def _netloc(url: str) -> str:
    return urlsplit(url).netloc


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    with running_simulator(tmp_path_factory.mktemp("engine")) as sim:
        yield sim


def _engine_version(sim, **creds) -> str:
    pool = ConnectionPool(size=1)
    try:
        pool.set_credentials(OvirtCredentials(url=sim.pod_url, username=sim.username, password=sim.password,
                                              insecure=False, ca_file=sim.ca_file, **creds))
        with pool.connection() as conn:
            return conn.system_service().get().product_info.version.full_version
    finally:
        pool.close()


def _started_with(monkeypatch, **variables: str) -> None:
    """The environment as machine-api-operator sets it, then as the controller's start leaves it for libcurl
    (machine_controller/__main__.py); undone after the test."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    for name, value in libcurl_environment().items():
        monkeypatch.setenv(name, value)


def test_the_engine_is_reached_through_https_proxy(engine, proxy, monkeypatch):
    # A stale lower-case variable loses to the upper-case one MAO sets, as in Go.
    _started_with(monkeypatch, HTTPS_PROXY=_with_credentials(proxy), https_proxy="http://127.0.0.1:9",
                  NO_PROXY="localhost,127.0.0.1,.cluster.local,.svc")  # as in OpenShift's noProxy
    assert _engine_version(engine)
    assert proxy.connects(_netloc(engine.pod_url)) >= 2, proxy.targets()  # the SSO login and the request
    assert proxy.refused == []


@pytest.mark.parametrize("entry", ["{ip}", "{ip}:{port}", "{net}.0/24", "*"])
def test_an_engine_named_in_no_proxy_is_reached_directly(engine, proxy, monkeypatch, entry):
    ip, port = node_ip(), urlsplit(engine.pod_url).port
    no_proxy = "localhost,127.0.0.1," + entry.format(ip=ip, port=port, net=ip.rpartition(".")[0]) + ",.svc"
    _started_with(monkeypatch, HTTPS_PROXY=_with_credentials(proxy), NO_PROXY=no_proxy)
    assert _engine_version(engine)
    assert proxy.connects() == 0, proxy.targets()


def _kubeconfig_by_address(cluster, tmp_path: Path) -> Path:
    """The admin kubeconfig with the API server named by the machine's address instead of loopback."""
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    for entry in config["clusters"]:
        server = urlsplit(entry["cluster"]["server"])
        if server.hostname in ("127.0.0.1", "localhost"):
            entry["cluster"]["server"] = f"https://{node_ip()}:{server.port}"
    path = tmp_path / "kubeconfig-by-address"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_kubernetes_client_reaches_the_api_server_through_https_proxy(cluster, proxy, monkeypatch, tmp_path):
    kubeconfig = _kubeconfig_by_address(cluster, tmp_path)
    monkeypatch.setenv("HTTPS_PROXY", _with_credentials(proxy))
    api = load_api_client(str(kubeconfig))
    assert Rest(api).request("GET", NODES.path())["kind"] == "NodeList"
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    assert proxy.connects(_netloc(server)) >= 1, proxy.targets()
    assert proxy.refused == []


def test_the_controller_works_through_the_proxy_with_the_engines_ca_only_in_the_cluster_bundle(
        menv, proxy, monkeypatch, tmp_path):
    sim = menv.sim
    secret = unique_name("creds")
    # The credentials secret carries no CA (ovirt_cafile and ovirt_ca_bundle empty) and verification is on.
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(ovirt_install.credentials_secret(
        sim.pod_url, sim.username, sim.password, ca_pem="", namespace=MACHINE_API_NS, name=secret)))
    bundle = tmp_path / "tls-ca-bundle.pem"
    bundle.write_text(Path(sim.ca_file).read_text())
    kubeconfig = _kubeconfig_by_address(menv.cluster, tmp_path)
    ctl = ControllerProcess(
        kubeconfig, tmp_path / "controller-proxied.log", namespace=menv.namespace,
        extra_args=(f"--credentials-name={secret}", f"--trusted-ca-bundle={bundle}", "--backoff-base=0.2",
                    "--backoff-cap=5", "--log-level=debug"),
        # The stale lower-case variable names a closed port: only a process that prefers the upper-case one, as
        # Go does, reaches anything.
        env={"HTTPS_PROXY": _with_credentials(proxy), "https_proxy": "http://127.0.0.1:9",
             "NO_PROXY": "localhost,127.0.0.1,.svc,.cluster.local"})
    with ctl:
        name = menv.create_machine(unique_name())
        try:
            menv.wait_phase(name, "Running", timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- {ctl.log_path.name}\n{ctl.log_text()[-6000:]}") from None
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert proxy.connects(_netloc(sim.pod_url)) >= 1, proxy.targets()
        assert proxy.connects(_netloc(server)) >= 1, proxy.targets()
        assert proxy.refused == []
        assert PROXY_USER[1] not in ctl.log_text()


def test_the_openshift_overlay_mounts_the_cluster_bundle_where_the_controller_reads_it(cluster):
    repo = Path(__file__).resolve().parents[2]
    objects = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(repo / "config/openshift")).stdout) if d]
    config_map = next(d for d in objects if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("trusted-ca"))
    assert config_map["metadata"]["labels"]["config.openshift.io/inject-trusted-cabundle"] == "true"
    pod = next(d for d in objects if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if (v.get("configMap") or {}).get("name") == config_map["metadata"]["name"])
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    (item,) = volume["configMap"]["items"]
    assert item["key"] == "ca-bundle.crt" and volume["configMap"]["optional"] is True
    assert f"{mount['mountPath']}/{item['path']}" == TRUSTED_CA_BUNDLE
