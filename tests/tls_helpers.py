"""Certificates for the HTTP API's TLS tests, made with the cryptography package: a CA, a
server certificate for 127.0.0.1 and a client certificate, each beside its key."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_certificates(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (CN carol, O ops)."""
    now = datetime.datetime.now(datetime.UTC)

    def issue(
        name: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Name, Any] | None, *, ca: bool
    ) -> x509.Certificate:
        issuer_name, issuer_key = issuer or (name, key)
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        return builder.sign(issuer_key, hashes.SHA256())

    def save(stem: str, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        (folder / f"{stem}.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        (folder / f"{stem}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reconcile test CA")])
    ca = issue(ca_name, ca_key, None, ca=True)
    save("ca", ca, ca_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    save("server", issue(server_name, server_key, (ca_name, ca_key), ca=False), server_key)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ops"),
            x509.NameAttribute(NameOID.COMMON_NAME, "carol"),
        ]
    )
    save("client", issue(client_name, client_key, (ca_name, ca_key), ca=False), client_key)
    return {stem: folder / stem for stem in ("ca", "server", "client")}


def tls_args(paths: dict[str, Path]) -> tuple[str, ...]:
    """serve's options for HTTPS with the server certificate of ``paths``."""
    return ("--tls-cert-file", f"{paths['server']}.crt", "--tls-private-key-file", f"{paths['server']}.key")


__all__: Sequence[str] = ["make_certificates", "tls_args"]
