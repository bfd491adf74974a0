"""A test CA and the keystores and truststores of TLS listeners and clients.

Kafka leaves this to keytool and openssl; :func:`make_ca` and :func:`make_cert` (and
``rillet certs``) make the same material in one step, for tests and for trying TLS. Keys are
EC P-256, signatures SHA-256, files PEM (keys PKCS8), plus an optional PKCS12 keystore.

Files, in the directory given:

- ``ca.pem``, ``ca.key``: the CA's self-signed certificate (the truststore) and its
  unencrypted key; :func:`make_cert` finds the key beside the certificate, same stem.
- ``NAME.pem``: the certificate chain, the leaf then the CA.
- ``NAME.key``: the leaf's key, encrypted when a key password is given.
- ``NAME.keystore.pem``: the key then the chain, the one file Kafka's PEM keystore
  (``ssl.keystore.type=PEM``) reads at ``ssl.keystore.location``.
- ``NAME.p12``: with a PKCS12 password, a PKCS12 keystore of the key, leaf and CA.

Every leaf is for serverAuth and clientAuth, so one certificate serves a node as listener and
as client. An encrypted key is PBES2 (AES-256-CBC), which Python, OpenSSL and librdkafka read
but Java's PEM keystore does not (JDK-8231581): give Java clients the PKCS12 keystore.

Key files are written readable by their owner only. Existing files are refused
unless ``overwrite=True``, and every target is checked before any is written. Test material:
no revocation, and the CA key lies unencrypted beside its certificate.
"""

from __future__ import annotations

import errno
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["DEFAULT_HOSTS", "CertFiles", "make_ca", "make_cert"]

DEFAULT_HOSTS = ("localhost", "127.0.0.1")

_PEM = serialization.Encoding.PEM
# One certificate serves a node as listener and as client.
_SERVER_AND_CLIENT_AUTH = x509.ExtendedKeyUsage(
    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
)
_CAKey: TypeAlias = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class CertFiles:
    """The files :func:`make_cert` wrote for one name."""

    cert: Path  # the PEM certificate chain, leaf then CA
    key: Path  # the PEM (PKCS8) private key, encrypted when a key password was given
    ca: Path  # the CA's PEM certificate: the truststore
    keystore: Path  # the key then the chain in one PEM file (Kafka's PEM keystore)
    pkcs12: Path | None = None  # the PKCS12 keystore, when a PKCS12 password was given


def make_ca(
    directory: Path,
    *,
    name: str = "ca",
    common_name: str = "Rillet test CA",
    days: int = 365,
    overwrite: bool = False,
) -> Path:
    """Make a self-signed CA: write ``NAME.pem`` (its certificate, the truststore) and
    ``NAME.key`` (its unencrypted key) to ``directory``; return the certificate's path."""
    directory = Path(directory)
    _check(name, days)
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    _refuse_existing([cert_path, key_path], overwrite)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([_common_name(common_name)])
    not_before = _now()
    cert = (
        _builder(subject, subject, key, not_before, not_before + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    _write(key_path, _key_pem(key, None), private=True)
    _write(cert_path, cert.public_bytes(_PEM), private=False)
    return cert_path


def make_cert(
    ca: Path,
    directory: Path,
    name: str,
    *,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    common_name: str | None = None,
    subject: str | None = None,
    days: int = 365,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    key_password: str | None = None,
    pkcs12_password: str | None = None,
    overwrite: bool = False,
) -> CertFiles:
    """Make a certificate for ``hosts`` signed by the CA at ``ca`` (its key beside it, same
    stem) and write NAME's files to ``directory`` (see the module doc).

    The subject is ``subject`` (RFC 4514, like ``"CN=alice,OU=eng,O=Rillet"``), else
    ``CN=common_name``, else ``CN=name``. ``not_before`` and ``not_after`` (timezone-aware)
    override ``days``: the certificate starts now, or when only ``not_after`` is given,
    ``days`` before it if that is sooner; a ``not_after`` in the past makes an expired one.
    """
    ca, directory = Path(ca), Path(directory)
    _check(name, days)
    subject_name = _subject(name, common_name, subject)
    alt_names = _alt_names(hosts)
    start, end = _validity(days, not_before, not_after)
    for label, password in (("key_password", key_password), ("pkcs12_password", pkcs12_password)):
        if password == "":
            raise ValueError(f"{label} must not be empty (None means no password)")
    ca_cert, ca_key = _load_ca(ca)
    files = CertFiles(
        cert=directory / f"{name}.pem",
        key=directory / f"{name}.key",
        ca=ca,
        keystore=directory / f"{name}.keystore.pem",
        pkcs12=directory / f"{name}.p12" if pkcs12_password is not None else None,
    )
    targets = [files.cert, files.key, files.keystore, *([files.pkcs12] if files.pkcs12 else [])]
    ca_files = {ca.resolve(), ca.with_suffix(".key").resolve()}
    if any(t.resolve() in ca_files for t in targets):
        raise ValueError(f"name {name!r} would overwrite the CA's own files in {directory}")
    _refuse_existing(targets, overwrite)

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(subject_name, ca_cert.subject, key, start, end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(_SERVER_AND_CLIENT_AUTH, critical=False)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(_authority_key_id(ca_cert, ca_key), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(_PEM) + ca_cert.public_bytes(_PEM)
    key_pem = _key_pem(key, key_password)
    directory.mkdir(parents=True, exist_ok=True)
    _write(files.cert, chain, private=False)
    _write(files.key, key_pem, private=True)
    _write(files.keystore, key_pem + chain, private=True)
    if files.pkcs12 is not None and pkcs12_password is not None:
        keystore = pkcs12.serialize_key_and_certificates(
            name.encode(),
            key,
            cert,
            [ca_cert],
            serialization.BestAvailableEncryption(pkcs12_password.encode()),
        )
        _write(files.pkcs12, keystore, private=True)
    return files


def _check(name: str, days: int) -> None:
    """Refuse a file stem that is empty or would leave the directory, and a validity of less
    than a day."""
    if not name:
        raise ValueError("name must not be empty")
    if any(sep and sep in name for sep in ("/", os.sep, os.altsep)):
        raise ValueError(f"name must not contain a path separator, got {name!r}")
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")


def _common_name(value: str) -> x509.NameAttribute[str]:
    """The CN attribute, within X.509's 1 to 64 characters."""
    if not 1 <= len(value) <= 64:
        raise ValueError(f"common name must be 1 to 64 characters, got {value!r}")
    return x509.NameAttribute(NameOID.COMMON_NAME, value)


def _subject(name: str, common_name: str | None, subject: str | None) -> x509.Name:
    """The leaf's subject: the RFC 4514 ``subject``, else ``CN=common_name`` or ``CN=name``."""
    if subject is None:
        return x509.Name([_common_name(common_name if common_name is not None else name)])
    if common_name is not None:
        raise ValueError("give subject or common_name, not both")
    try:
        parsed = x509.Name.from_rfc4514_string(subject)
    except ValueError as e:
        raise ValueError(
            f"subject {subject!r} is not an RFC 4514 name like 'CN=alice,OU=eng,O=Rillet'"
            + (f": {e}" if str(e) else "")
        ) from e
    if not parsed.rdns:
        raise ValueError("subject must not be empty")
    return parsed


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """Each host as an IPAddress if it parses as one, else as a DNSName."""
    if isinstance(hosts, str):
        raise ValueError(f"hosts must be a sequence of hosts, not the string {hosts!r}")
    if not hosts:
        raise ValueError("hosts must name at least one host name or IP address")
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
            continue
        except ValueError:
            pass
        if not host or not host.isascii() or any(c.isspace() for c in host):
            raise ValueError(f"host {host!r} is not a host name (give IDNA 'xn--' names in ASCII)")
        names.append(x509.DNSName(host))
    return names


def _validity(
    days: int, not_before: datetime | None, not_after: datetime | None
) -> tuple[datetime, datetime]:
    """The validity period: ``days`` from now unless ``not_before``/``not_after`` say."""
    for label, t in (("not_before", not_before), ("not_after", not_after)):
        if t is not None and t.utcoffset() is None:
            raise ValueError(f"{label} must be timezone-aware (like datetime.now(UTC)), got {t}")
    if not_before is None:
        not_before = _now() if not_after is None else min(_now(), not_after - timedelta(days=days))
    if not_after is None:
        not_after = not_before + timedelta(days=days)
    if not_after <= not_before:
        raise ValueError(f"not_after ({not_after}) must be after not_before ({not_before})")
    return not_before, not_after


def _now() -> datetime:
    """Now, to the second (X.509 times have no fractions)."""
    return datetime.now(UTC).replace(microsecond=0)


def _load_ca(ca: Path) -> tuple[x509.Certificate, _CAKey]:
    """The CA's certificate and its key (``ca.pem`` -> ``ca.key``), checked to match."""
    key_path = ca.with_suffix(".key")
    if not ca.is_file():
        raise FileNotFoundError(
            f"CA certificate {ca} not found (rillet certs --create-ca makes one)"
        )
    if not key_path.is_file():
        raise FileNotFoundError(f"CA key {key_path} not found beside the CA certificate {ca}")
    try:
        cert = x509.load_pem_x509_certificate(ca.read_bytes())
    except ValueError as e:
        raise ValueError(f"{ca} is not a PEM certificate: {e}") from e
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except TypeError as e:  # an encrypted key
        raise ValueError(f"the CA key {key_path} is encrypted; a test CA's key is not") from e
    except ValueError as e:
        raise ValueError(f"{key_path} is not a PEM private key: {e}") from e
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"the CA key {key_path} is neither EC nor RSA")
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise ValueError(f"{ca} is not a CA certificate (no BasicConstraints ca=True)")
    if key.public_key() != cert.public_key():
        raise ValueError(f"the key {key_path} does not belong to the certificate {ca}")
    return cert, key


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    not_before: datetime,
    not_after: datetime,
) -> x509.CertificateBuilder:
    """A certificate builder with what every certificate here has."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """A CA signs certificates and CRLs; a leaf signs TLS handshakes (ECDHE-ECDSA)."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _authority_key_id(ca_cert: x509.Certificate, ca_key: _CAKey) -> x509.AuthorityKeyIdentifier:
    """The leaf's AuthorityKeyIdentifier: the CA's SubjectKeyIdentifier, else its key's."""
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    """A key as PKCS8 PEM, encrypted with ``password`` when given."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password is not None
        else serialization.NoEncryption()
    )
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, encryption)


def _refuse_existing(paths: Sequence[Path], overwrite: bool) -> None:
    """Raise FileExistsError naming the ``paths`` that exist, unless ``overwrite``."""
    existing = ", ".join(str(p) for p in paths if p.exists())
    if existing and not overwrite:
        reason = "Refusing to overwrite existing files (overwrite=True replaces them)"
        raise FileExistsError(errno.EEXIST, reason, existing)


def _write(path: Path, data: bytes, *, private: bool) -> None:
    """Write ``data`` to ``path``; a private file (a key) is readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        if private:  # the mode of os.open applies only to a file it creates
            os.chmod(path, 0o600)
        f.write(data)
