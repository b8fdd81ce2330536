"""Registry fixtures: ``db_url`` is parametrized over SQLite and a real PostgreSQL server."""

from __future__ import annotations

import pytest

from tests.provider.registry.pg_cluster import PgCluster


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = PgCluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A fresh, empty registry database URL for each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "registry.db")
    return request.getfixturevalue("pg_cluster").new_database()
