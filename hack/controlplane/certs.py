"""A throwaway PKI for the local control plane: one CA, the API server's serving certificate, the
service-account signing key pair, and client certificates for each identity that talks to the API server.

Identities are client certificates (CN = user, O = groups), the way kubeadm wires its components. The
restricted identity claims the user name of the controller's ServiceAccount, so RBAC bindings written for the
ServiceAccount in `config/rbac` apply to it unchanged: a test can prove the shipped RBAC is sufficient.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=7)


@dataclass(frozen=True)
class Identity:
    name: str  # file stem and kubeconfig user name
    user: str
    groups: tuple[str, ...] = ()


ADMIN = Identity("admin", "kubernetes-admin", ("system:masters",))
CONTROLLER_MANAGER = Identity("controller-manager", "system:kube-controller-manager")
SCHEDULER = Identity("scheduler", "system:kube-scheduler")
# The ServiceAccount the controller's Deployment runs as (config/rbac binds its roles to it).
RESTRICTED = Identity(
    "restricted",
    "system:serviceaccount:openshift-machine-api:machine-api-controllers",
    ("system:serviceaccounts", "system:serviceaccounts:openshift-machine-api"),
)
IDENTITIES = (ADMIN, CONTROLLER_MANAGER, SCHEDULER, RESTRICTED)
# How the API server authenticates to kubelets (logs, exec, port-forward): the real nodes' kubelets run webhook
# authentication with this CA, and authorize it by SubjectAccessReview like any caller (kubeadm names it so too).
KUBELET_CLIENT = Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))
# kube-proxy (proxy.py): the bootstrap ClusterRoleBinding system:node-proxier grants this user what it reads.
KUBE_PROXY = Identity("kube-proxy", "system:kube-proxy")


def node_identity(node: str) -> Identity:
    """A kubelet's identity: the Node authorizer and NodeRestriction know a node by exactly this user and group."""
    return Identity(f"node-{node}", f"system:node:{node}", ("system:nodes",))


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    # A ServiceAccount user name (system:serviceaccount:<ns>:<name>) can exceed the 64 characters RFC 5280
    # allows a CN; Kubernetes reads the CN as it is, so the length check is switched off.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn, _validate=False))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def client_cert(self, ident: Identity) -> Path:
        return self.dir / f"{ident.name}.crt"

    def client_key(self, ident: Identity) -> Path:
        return self.dir / f"{ident.name}.key"


def generate(directory: Path, addresses: tuple[str, ...] = ()) -> Pki:
    """Write every key and certificate the control plane needs into `directory` (mode 0700). The API server's
    serving certificate names `addresses` too (IPs it is reached at beside loopback and its Service's)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    pki = Pki(directory)
    ca_key = _key()
    ca_name = _name("ovirt-machine-controller-local-ca")
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki.ca_cert.write_bytes(_pem_cert(ca))
    pki.ca_key.write_bytes(_pem_key(ca_key))

    serving_key = _key()
    sans = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),  # first address of --service-cluster-ip-range
        *(x509.IPAddress(ipaddress.ip_address(a)) for a in addresses if a != "127.0.0.1"),
    ]
    serving = (
        _builder(_name("kube-apiserver"), ca_name, serving_key.public_key())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pki.serving_cert.write_bytes(_pem_cert(serving))
    pki.serving_key.write_bytes(_pem_key(serving_key))

    # RSA, because every consumer of service-account tokens accepts RS256.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pki.sa_key.write_bytes(_pem_key(sa_key))
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

    for ident in (*IDENTITIES, KUBELET_CLIENT):
        _sign_client(pki, ident, ca_key, ca_name)
    for f in directory.iterdir():
        if f.suffix == ".key":
            f.chmod(0o600)
    return pki


def _sign_client(pki: Pki, ident: Identity, ca_key, ca_name: x509.Name) -> None:
    key = _key()
    cert = (
        _builder(_name(ident.user, ident.groups), ca_name, key.public_key())
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pki.client_cert(ident).write_bytes(_pem_cert(cert))
    pki.client_key(ident).write_bytes(_pem_key(key))
    pki.client_key(ident).chmod(0o600)


def issue_client(pki: Pki, ident: Identity) -> None:
    """Sign a client certificate for `ident` with the CA of an existing PKI (a node that joins a running plane)."""
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    _sign_client(pki, ident, ca_key, ca.subject)


def self_signed_serving(directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Path:
    """`tls.crt` and `tls.key` of a self-signed serving certificate for `hosts` in `directory`, the layout of a
    mounted kubernetes.io/tls Secret (what OpenShift's service CA writes). Writing again rotates it."""
    directory.mkdir(parents=True, exist_ok=True)
    key = _key()
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    name = _name(hosts[0])
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    # Key first, then certificate, each replaced atomically: a reader never pairs a new certificate with an old key
    # for long (ServingCert re-reads when either changes).
    for file, data in (("tls.key", _pem_key(key)), ("tls.crt", _pem_cert(cert))):
        tmp = directory / f".{file}.tmp"
        tmp.write_bytes(data)
        tmp.rename(directory / file)
    return directory / "tls.crt"
