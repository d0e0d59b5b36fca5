"""Throwaway certificates for the TLS tests, made with the ``openssl`` CLI.

Everything is generated at test time into a temporary directory: a CA, and
certificates it signs (EC P-256 keys, valid for a day). Nothing secret is
kept in the repository.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{result.stderr}")


def require_openssl() -> None:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (scripts/install-deps.sh installs it)")


@dataclass
class Ca:
    cert: Path
    key: Path


@dataclass
class Cert:
    cert: Path      # the certificate (PEM)
    key: Path       # its private key (PEM)
    combined: Path  # certificate + key in one PEM (tlsCertificateKeyFile)
    serial: int


def make_ca(directory: Path, name: str) -> Ca:
    directory.mkdir(parents=True, exist_ok=True)
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    return Ca(cert, key)


def make_cert(directory: Path, name: str, ca: Ca, *, serial: int,
              sans: tuple[str, ...] = ("IP:127.0.0.1", "DNS:localhost"),
              usage: str = "serverAuth") -> Cert:
    """A certificate for ``name`` signed by ``ca``; ``usage`` serverAuth or clientAuth."""
    directory.mkdir(parents=True, exist_ok=True)
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    ext = directory / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE", f"extendedKeyUsage={usage}"]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    ext.write_text("\n".join(lines) + "\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}", cwd=directory)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
             "-set_serial", str(serial), "-days", "1", "-out", str(cert), "-extfile", str(ext),
             cwd=directory)
    combined = directory / f"{name}-combined.pem"
    combined.write_bytes(cert.read_bytes() + key.read_bytes())
    return Cert(cert, key, combined, serial)
