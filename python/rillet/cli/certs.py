"""``rillet certs``: a test CA, and keystores and truststores signed by it.

Kafka ships no such tool (its docs use keytool and openssl); this makes the same material in
one step with :mod:`rillet.security.certs`. ``--create-ca --dir DIR`` writes ``DIR/ca.pem``
(the truststore) and ``DIR/ca.key``; ``--create --dir DIR --name NAME`` writes NAME's
certificate chain, private key and PEM keystore (and with ``--pkcs12-password`` a PKCS12
keystore), then prints the ``server.properties`` lines and the kafka-python settings that use
them. For tests and for trying TLS, not for production.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rillet.security.certs import DEFAULT_HOSTS, CertFiles, make_ca, make_cert

HELP = "Make a test CA, and PEM and PKCS12 keystores and truststores for TLS"

# The options of --create that --create-ca would otherwise ignore, by dest.
_CREATE_ONLY = ("ca", "host", "subject", "key_password", "pkcs12_password")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rillet certs``: an action (``--create-ca``, ``--create``) and its
    settings."""
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--create-ca",
        action="store_true",
        help="create a CA: DIR/ca.pem (its certificate, the truststore) and DIR/ca.key",
    )
    action.add_argument(
        "--create",
        action="store_true",
        help="create NAME's certificate, signed by the CA, and its keystores",
    )
    p.add_argument("--dir", required=True, help="the directory to write to (created if missing)")
    p.add_argument(
        "--name",
        help="the files' name: NAME.pem, NAME.key, NAME.keystore.pem, NAME.p12 "
        "(required with --create; ca with --create-ca)",
    )
    p.add_argument(
        "--ca",
        metavar="CA_PEM",
        help="the CA certificate, its key beside it as .key (default DIR/ca.pem)",
    )
    p.add_argument(
        "--host",
        action="append",
        help="a host name or IP address the certificate is for, repeatable "
        "(default localhost and 127.0.0.1)",
    )
    p.add_argument(
        "--common-name",
        metavar="CN",
        help="the subject's CN (default 'Rillet test CA' for the CA, NAME for a certificate)",
    )
    p.add_argument(
        "--subject",
        metavar="DN",
        help="the full subject in RFC 4514, like 'CN=alice,OU=eng,O=Rillet' "
        "(the principal the broker sees)",
    )
    p.add_argument(
        "--days", type=int, default=365, help="days the certificate is valid (default 365)"
    )
    p.add_argument(
        "--key-password",
        metavar="PASSWORD",
        help="encrypt the private key with this password (ssl.key.password); Java clients "
        "cannot read an encrypted PEM key (JDK-8231581), so give them the PKCS12 keystore",
    )
    p.add_argument(
        "--pkcs12-password",
        metavar="PASSWORD",
        help="also write NAME.p12, a PKCS12 keystore with this password",
    )
    p.add_argument("--overwrite", action="store_true", help="replace files that exist")


def run(args: argparse.Namespace) -> int:
    """Run the action; bad input and file errors are one ``Error:`` line and exit status 1."""
    try:
        if args.create_ca:
            return create_ca(args)
        return create(args)
    except FileExistsError as e:
        print(f"Error: refusing to overwrite {e.filename} (--overwrite replaces)", file=sys.stderr)
    except (OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
    return 1


def create_ca(args: argparse.Namespace) -> int:
    """``--create-ca``: write the CA's certificate and key and say where."""
    given = [o for o in _CREATE_ONLY if getattr(args, o) is not None]
    if given:
        flags = ", ".join("--" + o.replace("_", "-") for o in given)
        raise ValueError(f"--create-ca does not take {flags} (only --create does)")
    ca = make_ca(
        Path(args.dir),
        name=args.name if args.name is not None else "ca",
        common_name=args.common_name if args.common_name is not None else "Rillet test CA",
        days=args.days,
        overwrite=args.overwrite,
    )
    print(f"CA certificate (truststore): {ca.resolve()}")
    print(f"CA private key:              {ca.with_suffix('.key').resolve()}")
    return 0


def create(args: argparse.Namespace) -> int:
    """``--create``: write NAME's certificate and keystores and print the configs using them."""
    if not args.name:
        raise ValueError("--create needs --name NAME")
    if args.subject is not None and args.common_name is not None:
        raise ValueError("--subject and --common-name cannot be given together")
    directory = Path(args.dir)
    files = make_cert(
        Path(args.ca) if args.ca is not None else directory / "ca.pem",
        directory,
        args.name,
        hosts=args.host or DEFAULT_HOSTS,
        common_name=args.common_name,
        subject=args.subject,
        days=args.days,
        key_password=args.key_password,
        pkcs12_password=args.pkcs12_password,
        overwrite=args.overwrite,
    )
    print_files(files)
    print()
    print("# server.properties (Kafka's PEM keystore and truststore)")
    for line in broker_properties(files, args.key_password, args.pkcs12_password):
        print(line)
    print()
    print("# kafka-python (KafkaProducer, KafkaConsumer, KafkaAdminClient keywords)")
    for line in client_settings(files, args.key_password):
        print(line)
    return 0


def print_files(files: CertFiles) -> None:
    """The files written, by what Kafka calls them."""
    rows = [
        ("Certificate chain:", files.cert),
        ("Private key:", files.key),
        ("PEM keystore:", files.keystore),
        *([("PKCS12 keystore:", files.pkcs12)] if files.pkcs12 is not None else []),
        ("Truststore (CA):", files.ca),
    ]
    for label, path in rows:
        print(f"{label:<19}{path.resolve()}")


def broker_properties(
    files: CertFiles, key_password: str | None, pkcs12_password: str | None
) -> list[str]:
    """The ``ssl.*`` lines of a broker using ``files``: the PEM keystore, and as comments the
    PKCS12 keystore when there is one."""
    lines = [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={files.keystore.resolve()}",
        *([f"ssl.key.password={key_password}"] if key_password is not None else []),
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={files.ca.resolve()}",
    ]
    if files.pkcs12 is not None:
        lines += [
            "# or, with the PKCS12 keystore (its key has the keystore's password):",
            "# ssl.keystore.type=PKCS12",
            f"# ssl.keystore.location={files.pkcs12.resolve()}",
            f"# ssl.keystore.password={pkcs12_password}",
            f"# ssl.key.password={pkcs12_password}",
        ]
    return lines


def client_settings(files: CertFiles, key_password: str | None) -> list[str]:
    """The kafka-python keywords of a client using ``files``."""
    return [
        "security_protocol=SSL",
        f"ssl_cafile={files.ca.resolve()}",
        f"ssl_certfile={files.cert.resolve()}",
        f"ssl_keyfile={files.key.resolve()}",
        *([f"ssl_password={key_password}"] if key_password is not None else []),
    ]
