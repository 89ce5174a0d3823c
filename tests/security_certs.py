"""Test certificates made with the ``openssl`` command line, for TLS tests of any kind.

:func:`make_ca` makes a certificate authority; :meth:`CertificateAuthority.issue` a key and a
certificate signed by it (a broker's with subject alternative names 127.0.0.1 and localhost,
a client's, an expired one with ``days=-1``, a key encrypted with a password). Keys are EC
P-256 in PKCS#8 (what Kafka's PEM keystore reads; quick to make). Each issued
:class:`Certificate` names its files: ``key_path``, ``cert_path`` (the certificate then the
CA's), ``pem_path`` (key and chain in one file: Kafka's ``ssl.keystore.location`` with
``ssl.keystore.type=PEM``) and has the PEM texts (``key_pem``, ``chain_pem``) for
``ssl.keystore.key`` / ``ssl.keystore.certificate.chain``.

Used by tests/server/test_security_tls.py and tests/server/clients/test_tls_clients.py;
reusable by any test that needs a CA (SASL_SSL, ACLs over mutual TLS). Needs ``openssl`` on
PATH; every call is bounded by a timeout.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certificate", "CertificateAuthority", "have_openssl", "make_ca"]

OPENSSL_TIMEOUT_S = 60


def have_openssl() -> bool:
    """Whether the ``openssl`` command is on PATH."""
    return shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True,
                   timeout=OPENSSL_TIMEOUT_S)


def _new_key(path: Path, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(path), cwd=cwd)


@dataclass(frozen=True)
class Certificate:
    """An issued key and certificate (see the module docstring)."""

    name: str
    key_path: Path
    cert_path: Path
    pem_path: Path
    subject: str
    key_password: str | None = None

    @property
    def key_pem(self) -> str:
        """The private key, PEM (PKCS#8; encrypted when ``key_password`` is set)."""
        return self.key_path.read_text()

    @property
    def chain_pem(self) -> str:
        """The certificate then its CA's, PEM."""
        return self.cert_path.read_text()


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA in ``directory``: ``cert_path`` is its certificate (a truststore:
    ``ssl.truststore.location`` with ``ssl.truststore.type=PEM``, or a client's CA file)."""

    directory: Path
    key_path: Path
    cert_path: Path

    @property
    def cert_pem(self) -> str:
        """The CA certificate, PEM (``ssl.truststore.certificates``)."""
        return self.cert_path.read_text()

    def issue(self, name: str, *, subject: str | None = None,
              hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 30,
              key_password: str | None = None) -> Certificate:
        """A key and a certificate signed by this CA, files named after ``name``.
        ``subject``: OpenSSL's ``/O=.../CN=...`` form, most general first (default
        ``/O=seglog/CN=<name>``, whose DN as Java writes it is ``CN=<name>,O=seglog``);
        ``hosts``: the subject alternative names (IP addresses and DNS names); ``days``:
        validity from now (-1: expired yesterday); ``key_password``: encrypt the key."""
        cwd = self.directory
        key = cwd / f"{name}.key"
        csr = cwd / f"{name}.csr"
        cert = cwd / f"{name}.crt"
        ext = cwd / f"{name}.ext"
        subject = subject or f"/O=seglog/CN={name}"
        _new_key(key, cwd)
        _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", subject, cwd=cwd)
        alt = ",".join((f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}")
                       for h in hosts)
        ext.write_text("basicConstraints=CA:FALSE\n"
                       "keyUsage=digitalSignature,keyEncipherment\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n"
                       + (f"subjectAltName={alt}\n" if alt else ""))
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert_path),
                 "-CAkey", str(self.key_path), "-CAcreateserial", "-out", str(cert),
                 "-days", str(days), "-sha256", "-extfile", str(ext), cwd=cwd)
        if key_password is not None:
            plain_key = key.read_text()
            key.unlink()
            plain = cwd / f"{name}.plain.key"
            plain.write_text(plain_key)
            _openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(plain), "-out",
                     str(key), "-passout", f"pass:{key_password}", cwd=cwd)
            plain.unlink()
        chain = cert.read_text() + self.cert_path.read_text()
        cert.write_text(chain)
        pem = cwd / f"{name}.pem"
        pem.write_text(key.read_text() + chain)
        for path in (csr, ext):
            path.unlink()
        return Certificate(name=name, key_path=key, cert_path=cert, pem_path=pem,
                           subject=subject, key_password=key_password)


def make_ca(directory: Path, name: str = "seglog-test-ca", days: int = 30
            ) -> CertificateAuthority:
    """A new self-signed CA, its files in ``directory`` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / f"{name}.key"
    cert = directory / f"{name}.crt"
    _new_key(key, directory)
    _openssl("req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", str(days),
             "-sha256", "-subj", f"/CN={name}/O=seglog tests",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    return CertificateAuthority(directory=directory, key_path=key, cert_path=cert)
