"""A self-signed TLS certificate for 127.0.0.1, for local stand-ins of cloud and fabric-manager APIs (Nebius,
UFM): the real clients talk to them with verification on, given the certificate as their CA bundle."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Certificate:
    """A self-signed certificate for 127.0.0.1: the server's key pair and the CA bundle a client trusts."""

    key_pem: bytes
    cert_pem: bytes

    @classmethod
    def create(cls) -> "Certificate":
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()), cert.public_bytes(serialization.Encoding.PEM))

    def bundle(self, directory: Path) -> Path:
        """The certificate as a CA bundle file a client is given."""
        path = directory / "test-ca.pem"
        path.write_bytes(self.cert_pem)
        return path
