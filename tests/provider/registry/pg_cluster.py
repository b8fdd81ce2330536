"""A throwaway PostgreSQL 15 server for tests: initdb into a temp dir, unix socket only.

Started once per test session (``PgCluster.start``); each test gets a fresh database from
``new_database()``. Runs as the ``postgres`` user when the tests run as root.

``PgCluster.start(netns=NS, listen=ADDRESS)`` runs it inside network namespace NS, also on TCP at
ADDRESS:5432 (trusting every client: the namespace is the test's own), for servers on other
"hosts"; ``halt()`` and ``resume()`` stop and start that server (the same data) for outages.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time

import pytest


def _pg_bin() -> str | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return os.path.dirname(candidates[0]) if candidates else None


class PgCluster:
    """One private PostgreSQL server listening on a unix socket in its data directory."""

    def __init__(self, bindir: str, base: str, netns: str | None = None, listen: str = ""):
        self.bindir = bindir
        self.base = base
        self.data = os.path.join(base, "data")
        self.socket_dir = base
        self.port = 5432
        self.netns = netns
        self.listen = listen
        self._counter = itertools.count()

    def _run(self, *cmd: str) -> None:
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        if os.geteuid() == 0:
            prefix += ["runuser", "-u", "postgres", "--"]
        subprocess.run(prefix + list(cmd), check=True, capture_output=True, timeout=120)

    @classmethod
    def start(cls, netns: str | None = None, listen: str = "") -> PgCluster:
        bindir = _pg_bin()
        if bindir is None:
            pytest.skip("PostgreSQL is not installed (scripts/setup.sh installs it)")
        base = tempfile.mkdtemp(prefix="cloudseed-pg-")
        if os.geteuid() == 0:
            shutil.chown(base, "postgres", "postgres")
        cluster = cls(bindir, base, netns, listen)
        cluster._run(f"{bindir}/initdb", "-D", cluster.data, "-U", "postgres", "-A", "trust", "--no-sync")
        if listen:
            with open(os.path.join(cluster.data, "pg_hba.conf"), "a") as handle:
                handle.write("host all all 0.0.0.0/0 trust\n")
        cluster.resume()
        return cluster

    def resume(self) -> None:
        """Start the server (again)."""
        options = f"-k {self.base} -c listen_addresses='{self.listen}' -c fsync=off -c full_page_writes=off"
        self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-o", options, "-w", "-l",
                  os.path.join(self.base, "log"), "start")

    def halt(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected), keeping its data."""
        self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def tcp_url(self, database: str) -> str:
        return f"postgresql://postgres@{self.listen}:{self.port}/{database}"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def new_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{next(self._counter)}_{int(time.time() * 1000) % 100000}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass  # not running (halted)
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
