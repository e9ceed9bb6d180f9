"""Certificates made by the tests themselves (EC P-256, valid one day): a CA, and server and
client certificates it signs, each written as PEM files (key in PKCS#8, as Java's keyPath)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class CertFiles:
    cert: str
    key: str


@dataclass
class Pki:
    ca: CertFiles
    server: CertFiles
    client: CertFiles
    stranger: CertFiles  # self-signed: no CA vouches for it


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(directory: str, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertFiles:
    cert_path, key_path = os.path.join(directory, f"{stem}.crt"), os.path.join(directory, f"{stem}.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return CertFiles(cert_path, key_path)


def _issue(cn: str, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey | None, ca: bool
           ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(signer or key, hashes.SHA256()), key


def make_pki(directory: str) -> Pki:
    os.makedirs(directory, exist_ok=True)
    ca_cert, ca_key = _issue("rocketmq-py test CA", _name("rocketmq-py test CA"), None, ca=True)
    server = _issue("broker", ca_cert.subject, ca_key, ca=False)
    client = _issue("client", ca_cert.subject, ca_key, ca=False)
    stranger = _issue("stranger", _name("stranger"), None, ca=False)
    return Pki(_write(directory, "ca", ca_cert, ca_key), _write(directory, "server", *server),
                   _write(directory, "client", *client), _write(directory, "stranger", *stranger))
