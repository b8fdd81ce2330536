"""The instance registry: who the instances are and what the provider publishes to each.

``open_registry(url)`` opens a SQLite file (a path or ``sqlite:///path``, created on first use,
WAL mode) or a PostgreSQL database (``postgresql://...``), both with the same ``Registry`` API:
``get``, ``add``, ``add_many``, ``update``, ``delete``, ``list(**filters)``, ``find_by_address``,
the batch reads ``find_by_addresses``, ``get_many`` and ``timelines`` (a storm's new instances),
``set_password_once``, ``clear_password``, ``add_phone_home``, ``phone_home``,
``changes_since``, ``wait_for_change``, ``close``.
"""

from __future__ import annotations

import os

from cloudseed.provider.registry.record import InstanceRecord, RecordError, parse_address_spec
from cloudseed.provider.registry.sql import LIST_FILTERS, RegistryError, RegistryUnavailable, SQLRegistry

Registry = SQLRegistry
DEFAULT_DB = "/var/lib/cloudseed/server.db"

__all__ = ["DEFAULT_DB", "LIST_FILTERS", "InstanceRecord", "RecordError", "Registry", "RegistryError",
           "RegistryUnavailable", "open_registry", "parse_address_spec"]


def open_registry(url: str = DEFAULT_DB, create: bool = True) -> Registry:
    """The registry at ``url``: a SQLite path, ``sqlite:///path`` or ``postgresql://...``.

    A SQLite file is created (0600) unless ``create`` is false, when a missing file is an error.
    The schema is checked (and upgraded) on open; one written by a newer cloudseed is an error."""
    if url.startswith(("postgresql://", "postgres://")):
        from cloudseed.provider.registry.postgres import PostgresRegistry

        return PostgresRegistry(url)
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if path.startswith("/") and path != "/:memory:":
            path = path[1:] if path.startswith("//") else path
        path = ":memory:" if path in ("/:memory:", ":memory:") else path
    elif "://" in url:
        raise RegistryError(f"unsupported database URL {url!r}: give a file path, sqlite:///PATH or "
                            "postgresql://...", "db")
    else:
        path = url
    if not create and path != ":memory:" and not os.path.exists(path):
        raise RegistryError(f"no registry database at {path}", "db")
    from cloudseed.provider.registry.sqlite import SQLiteRegistry

    return SQLiteRegistry(path)
