"""The contract of a distro file (``cloudseed/agent/distros/<family>.py``), for tests and tools.

Never imported at boot (it imports typing). The file sets ``DISTRO`` to a ``Distro`` subclass;
``DistroPlugin`` is what that class declares: its family (the file's name), the os-release IDs
it serves, the network renderers it looks for (in order), its paths and defaults, and how it
sets the timezone and the locale and lays out CA certificates.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar, Optional, Protocol

from cloudseed.agent.distros import Distro

# what the base class leaves to each family (it raises NotImplementedError)
MUST_IMPLEMENT = ("set_timezone", "set_locale", "ca_certs_layout")


class DistroPlugin(Protocol):
    """What a distro class declares."""

    family: ClassVar[str]
    os_ids: ClassVar[tuple[str, ...]]  # os-release IDs (ID or ID_LIKE words) served besides the family
    renderers: ClassVar[tuple[str, ...]]  # network renderer names, in the order to look for them
    hostname_file: ClassVar[str]
    hosts_template: ClassVar[str]
    localhost_ip: ClassVar[str]
    prefer_fqdn: ClassVar[bool]
    ssh_service: ClassVar[str]
    sudoers_file: ClassVar[str]
    locale_file: ClassVar[str]
    zoneinfo_dir: ClassVar[str]
    ssh_keys_group: ClassVar[Optional[str]]
    default_users: ClassVar[dict[str, dict[str, Any]]]

    def set_timezone(self, tz: str) -> None: ...

    def set_locale(self, locale: str, config_file: Optional[str] = None) -> None: ...

    def ca_certs_layout(self) -> dict[str, Any]: ...


# what tests/architecture/protocol_check.py checks first: (the part of the file, its Protocol)
PROTOCOLS = (("DISTRO", DistroPlugin),)


def problems(plugin: ModuleType, stem: str, renderer_names: list[str] | None = None) -> list[str]:
    """Every way the distro file ``stem``.py breaks its contract (``renderer_names``: the network renderers)."""
    cls = getattr(plugin, "DISTRO", None)
    if not (isinstance(cls, type) and issubclass(cls, Distro)):
        return [f"DISTRO is {cls!r}, not a Distro subclass"]
    found: list[str] = []
    if cls.family != stem:
        found.append(f"DISTRO.family is {cls.family!r}, the file is {stem}.py")
    for os_id in cls.os_ids:
        if os_id != os_id.lower() or not os_id:
            found.append(f"DISTRO.os_ids: {os_id!r} is not a lower-case os-release ID")
    if not cls.renderers:
        found.append("DISTRO.renderers is empty: which network renderer does this family use?")
    for name in cls.renderers:
        if renderer_names is not None and name not in renderer_names:
            found.append(f"DISTRO.renderers names {name!r}, which is no network renderer")
    for method in MUST_IMPLEMENT:
        if getattr(cls, method) is getattr(Distro, method):
            found.append(f"DISTRO does not implement {method}()")
    return found


def claimed_twice(classes: dict[str, type]) -> list[str]:
    """os-release IDs (or family names) that more than one distro file claims."""
    owner: dict[str, str] = {}
    found = []
    for stem, cls in sorted(classes.items()):
        for os_id in (stem, *getattr(cls, "os_ids", ())):
            if os_id in owner and owner[os_id] != stem:
                found.append(f"{os_id!r} is claimed by {owner[os_id]}.py and {stem}.py")
            owner.setdefault(os_id, stem)
    return found
