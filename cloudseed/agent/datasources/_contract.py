"""The contract of a datasource file (``cloudseed/agent/datasources/<name>.py``), for tests and tools.

Never imported at boot (it imports typing). The file sets ``DATASOURCE`` to a ``Datasource``
subclass; ``DatasourcePlugin`` is what that class declares. Detection is one hook, ``why``,
declared by the class itself (the fallback datasource excepted, which is never detected);
``detect`` is derived from it and never overridden.
"""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar, Optional, Protocol

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext, datasource_class
from cloudseed.core.contracts import problems as protocol_problems


class DatasourcePlugin(Protocol):
    """What a datasource class declares."""

    name: ClassVar[str]  # as written in datasource_list ("NoCloud"); the file is its lower case
    stages: ClassVar[tuple[str, ...]]  # "local" (no network needed) and/or "network"
    platform: ClassVar[str]
    sensitive_keys: ClassVar[tuple[str, ...]]  # instance-data keys only root may read
    fallback: ClassVar[bool]  # the last resort (None): used when nothing answered, never detected

    @classmethod
    def why(cls, ctx: DatasourceContext) -> Optional[str]: ...

    def fetch(self) -> bool: ...


def problems(plugin: ModuleType, stem: str) -> list[str]:
    """Every way the datasource file ``stem``.py breaks its contract."""
    cls = getattr(plugin, "DATASOURCE", None)
    if not (isinstance(cls, type) and issubclass(cls, Datasource)):
        return [f"DATASOURCE is {cls!r}, not a Datasource subclass"]
    found = protocol_problems(cls, DatasourcePlugin, "DATASOURCE")
    if found:
        return found
    try:
        resolved = datasource_class(cls.name)
    except (ImportError, AttributeError) as e:
        resolved = None
        found.append(f"DATASOURCE.name {cls.name!r} does not lead back to this file ({e})")
    if resolved is not None and resolved is not cls:
        found.append(f"DATASOURCE.name {cls.name!r} leads to {resolved.__module__}, not {stem}.py")
    if not cls.stages or any(stage not in (LOCAL, NETWORK) for stage in cls.stages):
        found.append(f"DATASOURCE.stages {cls.stages!r}: one or both of {LOCAL!r}, {NETWORK!r}")
    if "detect" in vars(cls):
        found.append("DATASOURCE overrides detect(); declare why(ctx) -> reason | None instead")
    if not cls.fallback and not _declared(cls, "why"):
        found.append("DATASOURCE declares no why(ctx): how is it detected?")
    if not _declared(cls, "fetch"):
        found.append("DATASOURCE declares no fetch()")
    return found


def _declared(cls: type, hook: str) -> bool:
    """``hook`` is declared by the class or a shared base of its own (such as
    ``_metadata_service.MetadataServiceDatasource``), not only by ``Datasource`` itself."""
    return any(hook in vars(k) for k in cls.__mro__ if k is not Datasource and issubclass(k, Datasource))
