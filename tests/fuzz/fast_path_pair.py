"""Two real metadata servers on loopback for the fast path's differential fuzzing (fast_path_streams.py).

One with the C fast path, one with ``fast_path: false``; both hold the same instance, and both
have answered it from its cached routes once (so C has its routes and header lines). No rate
limit and no per-source cap: the streams are many, and those limits have their own tests.
"""

from __future__ import annotations

import os
import tempfile

from tests.fuzz.fast_path_streams import SENTINEL, head
from tests.provider.server.server_support import ServerProcess, new_address


class ServerPair:
    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix=f"fast-path-fuzz-{os.getpid()}-")
        self.servers: dict[bool, ServerProcess] = {}
        self.source = new_address()
        self.ports: dict[bool, int] = {}

    def __enter__(self) -> ServerPair:
        try:
            for fast in (True, False):
                server = ServerProcess(f"{self.tmp.name}/{fast}.db", f"{self.tmp.name}/{fast}", ["127.0.0.1:0"],
                                       config={"fast_path": fast, "rate_limit": 0, "max_connections_per_source": 0,
                                               "idle_timeout": 30})
                self.servers[fast] = server
                self.ports[fast] = server.port
                name = "i-" + self.source.replace(".", "-")
                server.add(instance_id=name, hostname=name.removeprefix("i-"),
                           addresses=[{"address": self.source, "network": "n"}],
                           ssh_keys=[{"name": "k", "data": "ssh-ed25519 AAAA " + name}],
                           user_data="#cloud-config\n{}\n")
            from tests.fuzz.fast_path_streams import exchange
            for fast in (True, False):  # the instance's routes cached, the header lines verified
                exchange(self.ports[fast], self.source, [head("/latest/meta-data/")], held=False)
                exchange(self.ports[fast], self.source, [SENTINEL], held=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def answered_in_c(self) -> int:
        text = self.servers[True].admin("GET", "/metrics", token=None).text
        for line in text.splitlines():
            if line.startswith("cloudseed_fast_path_answered_total "):
                return int(line.split()[1])
        return -1

    def alive(self) -> bool:
        """The fast server still runs and answers."""
        from tests.fuzz.fast_path_streams import exchange
        server = self.servers[True]
        if server.proc.poll() is not None:
            return False
        data, _ = exchange(server.port, self.source, [], held=False)
        return data.startswith(b"HTTP/1.1 200")

    def __exit__(self, *exc) -> None:
        for server in self.servers.values():
            server.stop()
        self.tmp.cleanup()
