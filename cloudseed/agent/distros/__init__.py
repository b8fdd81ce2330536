"""Distro families: how this system does a thing (users, passwords, hostname, services...).

One file per family (``debian.py``, ``rhel.py``) sets ``DISTRO`` to a ``Distro`` subclass.
The family is chosen from the target root's ``/etc/os-release`` (``ID`` then ``ID_LIKE``);
``system_info: {distro: NAME}`` in the config overrides it.
"""

from __future__ import annotations

import importlib
from typing import Any

from cloudseed.agent.root import TargetRoot

# os-release ID (or ID_LIKE word) -> family file
FAMILIES = {
    "debian": "debian", "ubuntu": "debian", "raspbian": "debian", "linuxmint": "debian",
    "rhel": "rhel", "centos": "rhel", "fedora": "rhel", "rocky": "rhel", "almalinux": "rhel",
    "ol": "rhel", "cloudlinux": "rhel", "eurolinux": "rhel", "virtuozzo": "rhel", "miraclelinux": "rhel",
}


def read_os_release(root: TargetRoot) -> dict[str, str]:
    """``/etc/os-release`` (or ``/usr/lib/os-release``) of the target as a dict."""
    text = root.read_text("/etc/os-release", default="") or root.read_text("/usr/lib/os-release", default="")
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            info[key.strip()] = value.strip().strip("\"'")
    return info


def family_of(os_release: dict[str, str]) -> str:
    words = [os_release.get("ID", "")] + os_release.get("ID_LIKE", "").split()
    for word in words:
        if word.lower() in FAMILIES:
            return FAMILIES[word.lower()]
    return "debian"


class Distro:
    """Base of the distro families; subclasses fill in how things are done."""

    family = "generic"

    def __init__(self, root: TargetRoot, cfg: dict, os_release: dict[str, str]):
        self.root = root
        self.cfg = cfg
        self.os_release = os_release

    @property
    def id(self) -> str:
        return self.os_release.get("ID", self.family)

    @property
    def version(self) -> str:
        return self.os_release.get("VERSION_ID", "")

    @property
    def system_info(self) -> dict[str, Any]:
        info = self.cfg.get("system_info")
        return info if isinstance(info, dict) else {}


def get_distro(root: TargetRoot, cfg: dict) -> Distro:
    os_release = read_os_release(root)
    wanted = str((cfg.get("system_info") or {}).get("distro") or "")
    family = FAMILIES.get(wanted.lower(), "") or family_of(os_release)
    try:
        module = importlib.import_module(f"{__name__}.{family}")
        cls = module.DISTRO
    except (ImportError, AttributeError):
        cls = type(f"{family.title()}Distro", (Distro,), {"family": family})
    return cls(root, cfg, os_release)
