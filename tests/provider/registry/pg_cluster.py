"""A throwaway PostgreSQL 15 server for tests: initdb into a temp dir, unix socket only.

Started once per test session (``PgCluster.start``); each test gets a fresh database from
``new_database()``. Runs as the ``postgres`` user when the tests run as root.
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

    def __init__(self, bindir: str, base: str):
        self.bindir = bindir
        self.base = base
        self.data = os.path.join(base, "data")
        self.socket_dir = base
        self.port = 5432
        self._counter = itertools.count()

    def _run(self, *cmd: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(prefix + list(cmd), check=True, capture_output=True, timeout=120)

    @classmethod
    def start(cls) -> PgCluster:
        bindir = _pg_bin()
        if bindir is None:
            pytest.skip("PostgreSQL is not installed (scripts/setup.sh installs it)")
        base = tempfile.mkdtemp(prefix="cloudseed-pg-")
        if os.geteuid() == 0:
            shutil.chown(base, "postgres", "postgres")
        cluster = cls(bindir, base)
        cluster._run(f"{bindir}/initdb", "-D", cluster.data, "-U", "postgres", "-A", "trust", "--no-sync")
        options = f"-k {base} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
        cluster._run(f"{bindir}/pg_ctl", "-D", cluster.data, "-o", options, "-w", "-l",
                     os.path.join(base, "log"), "start")
        return cluster

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
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
