"""A real FTP (and FTPS, explicit TLS) server on 127.0.0.1 for seed tests: pyftpdlib in a thread.

``FtpServer(directory, tls=...)`` serves ``directory`` read-only to anonymous users and to
``seed``/``s3cret``; with ``tls=True`` it offers ``AUTH TLS`` with a certificate for 127.0.0.1
made for the run (``ca_file``: the file a client must trust), and refuses a login in the clear.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import threading

import pytest

pyftpdlib = pytest.importorskip("pyftpdlib", reason="pyftpdlib (dev extra) runs the FTP server")


def make_certificate(directory: str) -> tuple[str, str]:
    """(certificate file, key file) of a self-signed certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cloudseed test FTPS")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = os.path.join(directory, "ftps.crt"), os.path.join(directory, "ftps.key")
    with open(cert_file, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_file, key_file


class FtpServer:
    def __init__(self, directory: str, tls: bool = False, cert_dir: str | None = None):
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler
        from pyftpdlib.servers import ThreadedFTPServer

        authorizer = DummyAuthorizer()
        authorizer.add_anonymous(directory)
        authorizer.add_user("seed", "s3cret", directory, perm="elr")
        self.ca_file = None
        if tls:
            from pyftpdlib.handlers import TLS_FTPHandler

            handler = type("Handler", (TLS_FTPHandler,), {})
            self.ca_file, handler.keyfile = make_certificate(cert_dir or directory)
            handler.certfile = self.ca_file
            handler.tls_control_required = True
            handler.tls_data_required = True
        else:
            handler = type("Handler", (FTPHandler,), {})
        handler.authorizer = authorizer
        handler.passive_ports = None
        self.server = ThreadedFTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"timeout": 0.2}, daemon=True)

    def __enter__(self) -> FtpServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close_all()
        self.thread.join(timeout=5)
