"""The engine connection trusts the cluster-wide CA bundle beside the credentials secret's own CA
(docs/compatibility.md#cluster-wide-trust-and-proxy), and a pool that could never lend a connection is refused."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest

from hack.ovirtsim import tls
from hack.ovirtsim.testing import running_simulator
from machine_controller.config import parse
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.credentials import OvirtCredentials


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with running_simulator(tmp_path_factory.mktemp("trust")) as sim:
        yield sim


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> str:
    """A CA that signed nothing the simulator serves."""
    return tls.generate(tmp_path_factory.mktemp("other-ca")).ca_file.read_text()


def _version(pool: ConnectionPool) -> str:
    with pool.connection() as conn:
        return conn.system_service().get().product_info.version.full_version


@contextlib.contextmanager
def _pool(sim, bundle: Path, *pems: str, **creds: str) -> Iterator[ConnectionPool]:
    """A pool whose cluster bundle file holds `pems` (none: no such file), with verifying credentials `creds`."""
    if pems:
        bundle.write_text("".join(pems))
    pool = ConnectionPool(size=1, trusted_ca_bundle=str(bundle))
    try:
        pool.set_credentials(OvirtCredentials(url=sim.url, username=sim.username, password=sim.password,
                                              insecure=False, **creds))
        yield pool
    finally:
        pool.close()


def test_an_engine_signed_by_a_ca_only_in_the_cluster_bundle_is_trusted(sim, tmp_path, other_ca):
    # The secret has neither ovirt_cafile nor ovirt_ca_bundle; the bundle holds many CAs, the engine's among them.
    with _pool(sim, tmp_path / "tls-ca-bundle.pem", other_ca, Path(sim.ca_file).read_text()) as pool:
        assert _version(pool)


def test_the_secrets_ca_is_still_trusted_beside_a_cluster_bundle_without_it(sim, tmp_path, other_ca):
    with _pool(sim, tmp_path / "tls-ca-bundle.pem", other_ca, ca_bundle=Path(sim.ca_file).read_text()) as pool:
        assert _version(pool)


def test_without_the_engines_ca_anywhere_verification_still_fails(sim, tmp_path, other_ca):
    with _pool(sim, tmp_path / "tls-ca-bundle.pem", other_ca) as pool:
        with pytest.raises(Exception, match="(?i)certificate|SSL"):
            _version(pool)


def test_a_ca_added_to_the_cluster_bundle_is_trusted_by_the_next_request(sim, tmp_path, other_ca):
    bundle = tmp_path / "tls-ca-bundle.pem"
    with _pool(sim, bundle, other_ca) as pool:
        with pytest.raises(Exception, match="(?i)certificate|SSL"):
            _version(pool)
        # The cluster network operator rewrites the mounted bundle when the Proxy's trustedCA changes; the
        # credentials secret stays as it was.
        bundle.write_text(other_ca + Path(sim.ca_file).read_text())
        assert _version(pool)


def test_a_bundle_path_that_is_not_there_is_ignored(sim, tmp_path):
    with _pool(sim, tmp_path / "absent.pem", ca_file=sim.ca_file) as pool:
        assert _version(pool)


def test_the_flag_defaults_to_maos_mount_and_refuses_a_file_that_is_not_there(tmp_path, capsys):
    assert parse([]).trusted_ca_bundle == "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"
    assert parse(["--trusted-ca-bundle="]).trusted_ca_bundle == ""
    with pytest.raises(SystemExit):
        parse([f"--trusted-ca-bundle={tmp_path / 'absent.pem'}"])
    assert "--trusted-ca-bundle" in capsys.readouterr().err


@pytest.mark.parametrize("size", [0, -1])
def test_a_pool_without_connections_is_refused_when_built(size):
    with pytest.raises(ValueError, match=rf"ConnectionPool size must be an integer of at least 1, got {size}"):
        ConnectionPool(size=size)


def test_a_pool_without_a_timeout_is_refused_when_built():
    with pytest.raises(ValueError, match="ConnectionPool timeout_s must be an integer of at least 1 second, got 0"):
        ConnectionPool(size=1, timeout_s=0)
