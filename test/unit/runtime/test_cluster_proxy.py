"""The proxy and trust of the Kubernetes client are client-go's (Go's ProxyFromEnvironment, the system roots where no
CA is configured), as machine-api-operator's pod gives them (docs/compatibility.md#cluster-wide-trust-and-proxy).
A real request through a proxy is in test/e2e/test_engine_proxy.py."""

from __future__ import annotations

import base64

import pytest
import urllib3
import yaml

from machine_controller.runtime.cluster_proxy import Proxy, libcurl_environment, proxy_for
from machine_controller.runtime.kube import load_api_client

P = "http://proxy.test:3128"


@pytest.mark.parametrize("url,env,expected", [
    ("https://api.example.com:6443", {"HTTPS_PROXY": P}, P),
    ("https://api.example.com:6443", {"https_proxy": P}, P),
    ("https://api.example.com:6443", {"HTTPS_PROXY": P, "https_proxy": "http://other:1"}, P),  # Go: upper first
    ("https://api.example.com:6443", {"HTTP_PROXY": P}, None),  # an https URL uses only HTTPS_PROXY
    ("http://api.example.com", {"HTTP_PROXY": P}, P),
    ("http://api.example.com", {"HTTP_PROXY": P, "REQUEST_METHOD": "GET"}, None),  # CGI: httpoxy
    ("https://api.example.com:6443", {"HTTPS_PROXY": "proxy.test:3128"}, P),  # no scheme: http
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": P}, None),  # loopback never
    ("https://127.8.0.1:6443", {"HTTPS_PROXY": P}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": P}, None),
    ("https://localhost:6443", {"HTTPS_PROXY": P}, None),
    ("https://api.example.com:6443", {"HTTPS_PROXY": P, "NO_PROXY": "*"}, None),
    ("https://10.0.5.1:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/16"}, None),
    ("https://10.1.0.1:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/16"}, P),
    ("https://192.0.2.10", {"HTTPS_PROXY": P, "NO_PROXY": "192.0.2.10"}, None),
    ("https://192.0.2.11", {"HTTPS_PROXY": P, "NO_PROXY": "192.0.2.10"}, P),
    ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, None),
    ("https://example.com", {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, None),
    ("https://notexample.com", {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, P),
    ("https://example.com", {"HTTPS_PROXY": P, "NO_PROXY": ".example.com"}, P),  # subdomains only
    ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": ".example.com"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "*.example.com"}, None),
    ("https://API.Example.com", {"HTTPS_PROXY": P, "NO_PROXY": " other.org , EXAMPLE.com "}, None),
    ("https://api.example.com:6443", {"HTTPS_PROXY": P, "NO_PROXY": "api.example.com:6443"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "api.example.com:6443"}, P),  # port 443
    ("https://api.example.com", {"HTTPS_PROXY": P, "no_proxy": "example.com"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "other.org", "no_proxy": "example.com"}, P),
])
def test_the_proxy_is_chosen_as_gos_proxy_from_environment_does(url, env, expected):
    got = proxy_for(url, env)
    assert (got.url if got else None) == expected


def test_credentials_in_the_proxy_url_are_taken_out_and_decoded():
    assert proxy_for("https://api.example.com", {"HTTPS_PROXY": "http://us%40r:p%3Ass@proxy.test:3128"}) == \
        Proxy("http://proxy.test:3128", "us@r", "p:ss")


def _kubeconfig(tmp_path, server: str, ca: str | None = None) -> str:
    cluster = {"server": server, **({"certificate-authority": ca} if ca else {})}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def _proxy_used(api) -> str | None:
    """The proxy the client's connections go through, as its urllib3 pool manager holds it (None: direct)."""
    manager = api.rest_client.pool_manager
    return manager.proxy.url if isinstance(manager, urllib3.ProxyManager) else None


@pytest.fixture
def proxy_env(monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                 "all_proxy", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_kubernetes_client_sends_the_proxy_credentials_of_the_url(tmp_path, proxy_env):
    proxy_env.setenv("HTTPS_PROXY", "http://machine-api:s3cret@proxy.test:3128")
    api = load_api_client(_kubeconfig(tmp_path, "https://api.cluster.test:6443"))
    assert _proxy_used(api) == "http://proxy.test:3128"
    assert api.rest_client.pool_manager.proxy_headers["proxy-authorization"] == \
        "Basic " + base64.b64encode(b"machine-api:s3cret").decode()


def test_the_kubernetes_client_prefers_the_upper_case_variable_and_never_proxies_loopback(tmp_path, proxy_env):
    proxy_env.setenv("HTTPS_PROXY", P)
    proxy_env.setenv("https_proxy", "http://stale.test:1")
    assert _proxy_used(load_api_client(_kubeconfig(tmp_path, "https://api.cluster.test:6443"))) == P
    assert _proxy_used(load_api_client(_kubeconfig(tmp_path, "https://127.0.0.1:6443"))) is None


def test_the_kubernetes_client_goes_direct_to_a_host_in_no_proxy(tmp_path, proxy_env):
    proxy_env.setenv("HTTPS_PROXY", P)
    proxy_env.setenv("NO_PROXY", ".cluster.test,172.30.0.0/16")
    assert _proxy_used(load_api_client(_kubeconfig(tmp_path, "https://api.cluster.test:6443"))) is None
    assert _proxy_used(load_api_client(_kubeconfig(tmp_path, "https://172.30.0.1:443"))) is None
    assert _proxy_used(load_api_client(_kubeconfig(tmp_path, "https://api.other.test:6443"))) == P


def test_the_cluster_bundle_verifies_an_api_server_for_which_no_ca_is_configured(tmp_path, proxy_env):
    bundle = tmp_path / "tls-ca-bundle.pem"
    bundle.write_text("")
    own_ca = tmp_path / "ca.crt"
    own_ca.write_text("")
    without = load_api_client(_kubeconfig(tmp_path, "https://api.cluster.test:6443"), trusted_ca_bundle=str(bundle))
    assert without.configuration.ssl_ca_cert == str(bundle)
    with_ca = load_api_client(_kubeconfig(tmp_path, "https://api.cluster.test:6443", ca=str(own_ca)),
                              trusted_ca_bundle=str(bundle))
    assert with_ca.configuration.ssl_ca_cert == str(own_ca)  # client-go: the configured CA alone
    absent = load_api_client(_kubeconfig(tmp_path, "https://api.cluster.test:6443"),
                             trusted_ca_bundle=str(tmp_path / "absent.pem"))
    assert absent.configuration.ssl_ca_cert is None


@pytest.mark.parametrize("env,expected", [
    ({}, {}),
    ({"NO_PROXY": "example.com"}, {}),  # no proxy: nothing for libcurl to choose
    ({"HTTPS_PROXY": P, "https_proxy": "http://stale:1"}, {"https_proxy": P, "no_proxy": "localhost,127.0.0.0/8,::1"}),
    ({"HTTP_PROXY": P}, {"http_proxy": P, "no_proxy": "localhost,127.0.0.0/8,::1"}),  # libcurl skips HTTP_PROXY
    ({"HTTP_PROXY": P, "REQUEST_METHOD": "GET"}, {}),
    ({"HTTPS_PROXY": P, "NO_PROXY": ".svc, *.example.com,api.test:6443,[fd00::1]:443,10.0.0.0/16,192.0.2.1:443"},
     {"https_proxy": P,
      "no_proxy": "localhost,127.0.0.0/8,::1,.svc,.example.com,api.test,fd00::1,10.0.0.0/16,192.0.2.1"}),
    ({"HTTPS_PROXY": P, "NO_PROXY": ".svc,*,10.0.0.0/16"}, {"https_proxy": P, "no_proxy": "*"}),
    ({"HTTPS_PROXY": P, "no_proxy": ".svc", "NO_PROXY": ".local"},
     {"https_proxy": P, "no_proxy": "localhost,127.0.0.0/8,::1,.local"}),
])
def test_libcurl_is_given_gos_choice_in_the_variables_it_reads_first(env, expected):
    assert libcurl_environment(env) == expected
