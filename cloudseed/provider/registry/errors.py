"""The registry's two errors, below everything else in the registry so every part can raise them.

``RecordError``: instance data that does not validate (raised by ``record`` and the per-cloud field
checks ``ec2_fields`` and ``cloud_fields``). ``RegistryError``: an operation the registry cannot do
(raised by the SQL stores, ``events`` included). Both used to live beside their main raiser, which
made the field checks and the event store import back up into it.
"""

from __future__ import annotations

from typing import Optional


class RecordError(ValueError):
    """Invalid instance data; ``field`` names where (``addresses[1].address``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class RegistryError(Exception):
    """A registry operation that cannot be done (duplicate id, address in use, unknown instance)."""

    def __init__(self, message: str, field: Optional[str] = None, status: int = 400):
        super().__init__(message)
        self.field = field
        self.status = status
