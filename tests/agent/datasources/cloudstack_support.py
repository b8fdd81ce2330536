"""What the CloudStack tests share with the clouds built the same way (Exoscale, Aliyun): a password
hash check, and a raw TCP server in the lab's cloud namespace for hostile replies."""

from __future__ import annotations

from tests.agent.datasources.cloudlab import PYTHON


def matches(password: str, hashed: str) -> bool:
    """Does ``hashed`` (yescrypt, SHA-512...) hash ``password``? (libcrypt, through Python's crypt)"""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    return crypt.crypt(password, hashed) == hashed


class RawServer:
    """A TCP server in the cloud namespace answering each connection with ``reply`` (bytes, or None:
    accept and say nothing), on ``port`` of ``host`` (default: the cloud's address on the link)."""

    CODE = """
import socket, sys, time
reply = bytes.fromhex(sys.argv[2]) if sys.argv[2] != "-" else None
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[3]))); s.listen(16); print("ready", flush=True)
held = []
while True:
    c, _ = s.accept()
    c.recv(65536)
    if reply is None:
        held.append(c); continue
    c.sendall(reply); c.close()
"""

    def __init__(self, cloud, port: int, reply: bytes | None, host: str | None = None):
        self.proc = cloud.lab.start_in_cloud(PYTHON, "-c", self.CODE, host or cloud.lab.cloud_ip,
                                             reply.hex() if reply is not None else "-", str(port), ready="ready")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)
