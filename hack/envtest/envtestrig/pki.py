"""Throw-away credentials for one rig: serving CA and certificate, client CA and admin certificate, tokens,
and the service-account signing key. Made with the openssl command line so the rig needs no Python package.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

ADMIN_USER = "gitopsq-envtest-admin"
NOBODY_USER = "gitopsq-envtest-nobody"  # authenticated, in no group: every request is Forbidden under RBAC


class PkiError(RuntimeError):
    """openssl failed."""


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the generated files and the bearer tokens."""

    serving_ca: Path
    serving_cert: Path
    serving_key: Path
    client_ca: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    token_file: Path
    admin_token: str
    nobody_token: str


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PkiError(f"openssl {args[0]} failed: {done.stderr.strip()[-400:]}")


def _ec_key(name: str, cwd: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name, cwd=cwd)


def _self_signed_ca(stem: str, common_name: str, cwd: Path) -> None:
    _ec_key(f"{stem}.key", cwd)
    _openssl(
        "req", "-x509", "-new", "-key", f"{stem}.key", "-out", f"{stem}.crt", "-days", "3650",
        "-subj", f"/CN={common_name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=cwd,
    )  # fmt: skip


def _signed_leaf(stem: str, ca: str, subject: str, extensions: str, cwd: Path) -> None:
    _ec_key(f"{stem}.key", cwd)
    _openssl("req", "-new", "-key", f"{stem}.key", "-out", f"{stem}.csr", "-subj", subject, cwd=cwd)
    (cwd / f"{stem}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{stem}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-set_serial", str(secrets.randbits(63)), "-days", "3650", "-sha256",
        "-out", f"{stem}.crt", "-extfile", f"{stem}.ext",
        cwd=cwd,
    )  # fmt: skip


def generate(directory: Path) -> Pki:
    """Write a complete set of credentials into ``directory`` (created, private to the user)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    _self_signed_ca("serving-ca", "gitopsq-envtest-serving-ca", directory)
    _signed_leaf(
        "apiserver",
        "serving-ca",
        "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default.svc\n",
        directory,
    )
    _self_signed_ca("client-ca", "gitopsq-envtest-client-ca", directory)
    _signed_leaf(
        "admin",
        "client-ca",
        f"/O=system:masters/CN={ADMIN_USER}",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
        directory,
    )
    _openssl("genrsa", "-out", "service-account.key", "2048", cwd=directory)
    admin_token, nobody_token = secrets.token_hex(24), secrets.token_hex(24)
    token_file = directory / "tokens.csv"
    # static token file format: token,user,uid,"group1,group2"
    token_file.write_text(
        f'{admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n{nobody_token},{NOBODY_USER},{NOBODY_USER}\n'
    )
    for secret in directory.glob("*.key"):
        secret.chmod(0o600)
    token_file.chmod(0o600)
    return Pki(
        serving_ca=directory / "serving-ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        client_ca=directory / "client-ca.crt",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "service-account.key",
        token_file=token_file,
        admin_token=admin_token,
        nobody_token=nobody_token,
    )
