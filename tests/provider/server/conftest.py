"""Server fixtures: a real ``cloudseed serve`` process on loopback, over SQLite and PostgreSQL.

``server`` is module-scoped and parametrized over both backends; tests register their own
instances (``server.add(...)``) with fresh loopback source addresses from ``server.address()``,
so they do not see each other's data. ``http(...)`` is a plain standard-library client that
binds the source address it is told to, so one test can be several instances.
"""

from __future__ import annotations

import pytest

from tests.provider.registry.pg_cluster import PgCluster
from tests.provider.server import reference_netns
from tests.provider.server.server_support import ServerProcess


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = PgCluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request, tmp_path_factory):
    if request.param == "sqlite":
        return str(tmp_path_factory.mktemp("db") / "server.db")
    return request.getfixturevalue("pg_cluster").new_database()


@pytest.fixture(scope="module")
def server(db_url, tmp_path_factory):
    """One server per module and backend: a default listener and two network-scoped ones."""
    proc = ServerProcess(db_url, str(tmp_path_factory.mktemp("server")),
                         ["127.0.0.1:0", "127.0.0.1:0=net-a", "127.0.0.1:0=net-b"],
                         config={"rate_limit": 0})
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def router_namespaces():
    """``srv``, ``gst``, a router ``rtr`` and ``far`` behind it (``reference_netns.py``)."""
    with reference_netns.router_namespaces() as names:
        yield names
