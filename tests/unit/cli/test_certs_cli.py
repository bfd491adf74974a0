"""``rillet certs``: the files it writes, the broker properties and client settings it prints,
and its refusals (rillet.cli.certs)."""

from __future__ import annotations

import ipaddress
import ssl
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from rillet.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["certs", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def settings(out: str) -> dict[str, str]:
    """The KEY=VALUE lines of the output (comments left out)."""
    pairs = (line.partition("=") for line in out.splitlines() if "=" in line)
    return {k: v for k, sep, v in pairs if not k.startswith("#")}


@pytest.fixture
def tls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A directory with a CA made by ``rillet certs --create-ca``."""
    code, _, err = run(capsys, "--create-ca", "--dir", str(tmp_path / "tls"))
    assert (code, err) == (0, "")
    return tmp_path / "tls"


def test_create_ca(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "tls"
    code, out, _ = run(capsys, "--create-ca", "--dir", str(d), "--common-name", "Ops CA")
    assert code == 0
    assert out.splitlines() == [
        f"CA certificate (truststore): {d / 'ca.pem'}",
        f"CA private key:              {d / 'ca.key'}",
    ]
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    assert ca.subject.rfc4514_string() == "CN=Ops CA"


def test_create_prints_the_broker_properties_and_client_settings(
    tls: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--create", "--dir", str(tls), "--name", "broker")
    assert (code, err) == (0, "")
    assert f"Certificate chain: {tls / 'broker.pem'}" in out
    assert f"Private key:       {tls / 'broker.key'}" in out
    assert f"PEM keystore:      {tls / 'broker.keystore.pem'}" in out
    assert f"Truststore (CA):   {tls / 'ca.pem'}" in out
    assert "PKCS12" not in out
    assert settings(out) == {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls / "broker.keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls / "ca.pem"),
        "security_protocol": "SSL",
        "ssl_cafile": str(tls / "ca.pem"),
        "ssl_certfile": str(tls / "broker.pem"),
        "ssl_keyfile": str(tls / "broker.key"),
    }
    # The printed lines are what a user pastes: the order of Kafka's docs.
    assert out.index("ssl.keystore.type=PEM") < out.index("ssl.truststore.location=")
    leaf = x509.load_pem_x509_certificates((tls / "broker.pem").read_bytes())[0]
    assert leaf.subject.rfc4514_string() == "CN=broker"
    ctx = ssl.create_default_context(cafile=settings(out)["ssl.truststore.location"])
    ctx.load_cert_chain(settings(out)["ssl.keystore.location"])


def test_create_with_passwords_hosts_and_subject(
    tls: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "alice"
    code, out, err = run(
        capsys,
        *("--create", "--dir", str(out_dir), "--name", "alice", "--ca", str(tls / "ca.pem")),
        *("--host", "broker1.example", "--host", "10.0.0.1", "--days", "7"),
        *("--subject", "CN=alice,OU=eng,O=Rillet"),
        *("--key-password", "kp", "--pkcs12-password", "sp"),
    )
    assert (code, err) == (0, "")
    s = settings(out)
    assert s["ssl.key.password"] == "kp"
    assert s["ssl_password"] == "kp"
    assert s["ssl.keystore.location"] == str(out_dir / "alice.keystore.pem")
    assert s["ssl.truststore.location"] == str(tls / "ca.pem")
    assert f"PKCS12 keystore:   {out_dir / 'alice.p12'}" in out
    assert f"# ssl.keystore.location={out_dir / 'alice.p12'}" in out
    assert "# ssl.keystore.password=sp" in out
    ctx = ssl.create_default_context(cafile=tls / "ca.pem")
    ctx.load_cert_chain(s["ssl.keystore.location"], password="kp")
    _, leaf, cas = pkcs12.load_key_and_certificates((out_dir / "alice.p12").read_bytes(), b"sp")
    assert leaf is not None and len(cas) == 1
    assert leaf.subject.rfc4514_string() == "CN=alice,OU=eng,O=Rillet"
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == timedelta(days=7)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(sans) == [
        x509.DNSName("broker1.example"),
        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
    ]


def test_existing_files_need_overwrite(tls: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--create", "--dir", str(tls), "--name", "broker")[0] == 0
    code, out, err = run(capsys, "--create", "--dir", str(tls), "--name", "broker")
    assert (code, out) == (1, "")
    assert err.startswith(f"Error: refusing to overwrite {tls / 'broker.pem'}, ")
    assert "--overwrite replaces" in err
    code, _, err = run(capsys, "--create", "--dir", str(tls), "--name", "broker", "--overwrite")
    assert (code, err) == (0, "")
    code, _, err = run(capsys, "--create-ca", "--dir", str(tls))
    assert code == 1 and "ca.pem" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--create"], "Error: --create needs --name NAME"),
        (["--create", "--name", "x", "--ca", "/nonexistent/ca.pem"], "CA certificate"),
        (["--create", "--name", "x", "--days", "0"], "days must be at least 1"),
        (["--create", "--name", "a/b"], "path separator"),
        (["--create", "--name", "x", "--subject", "nonsense"], "RFC 4514"),
        (["--create-ca", "--host", "h", "--key-password", "p"], "--host, --key-password"),
        (["--create", "--name", "x", "--subject", "CN=x", "--common-name", "y"], "together"),
    ],
)
def test_bad_input_is_an_error_message(
    tls: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, "--dir", str(tls))
    assert (code, out) == (1, "")
    assert err.startswith("Error: ") and message in err
    assert "Traceback" not in err


def test_a_missing_ca_is_reported_without_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "rillet.cli.main", "certs"),
            *("--create", "--dir", str(tmp_path), "--name", "broker"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: CA certificate {tmp_path / 'ca.pem'} not found "
        "(rillet certs --create-ca makes one)\n"
    )


def test_create_or_create_ca_is_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["certs", "--dir", str(tmp_path)])
    assert e.value.code == 2
    assert "one of the arguments --create-ca --create is required" in capsys.readouterr().err
