"""Package managers as plugins: one file each (``apt.py``, ``dnf.py``, ``snap.py``), found by name here.

A distro family declares its package manager with one class attribute (``package_manager =
"apt"``); modules ask ``for_distro(ctx)`` for it, or ``get(name, root, settings)`` for another one
(``snap``). Each file sets ``MANAGER`` to a ``base.PackageManager`` subclass. Settings (the
``apt_get_*`` options, lock wait, retries, command timeout) come from ``system_info`` first and the
top level of the config second (``settings_from``).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing is not imported at boot
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.agent.package_managers.base import PackageManager
    from cloudseed.core.root import TargetRoot

# the name a config or distro uses -> the file that implements it
NAMES = {"apt": "apt", "apt-get": "apt", "dnf": "dnf", "yum": "dnf", "snap": "snap"}

SETTING_KEYS = ("apt_get_command", "apt_get_upgrade_subcommand", "apt_get_wrapper",
                "package_lock_timeout", "package_retries", "package_retry_delay", "package_command_timeout")


def settings_from(cfg: dict) -> dict[str, Any]:
    """The package manager settings: ``system_info`` first, then the top level of the config."""
    system_info = cfg.get("system_info") if isinstance(cfg.get("system_info"), dict) else {}
    out: dict[str, Any] = {}
    for key in SETTING_KEYS:
        if key in system_info:
            out[key] = system_info[key]
        elif key in cfg:
            out[key] = cfg[key]
    return out


def get(name: str, root: TargetRoot, settings: dict | None = None) -> PackageManager:
    """The package manager called ``name`` for ``root``; KeyError when cloudseed has none by that name."""
    module = importlib.import_module(f"{__name__}.{NAMES[name]}")
    return module.MANAGER(root, settings or {})


def for_distro(ctx: Any) -> PackageManager | None:
    """The package manager the target's distro family declares (None when it declares none)."""
    name = getattr(ctx.distro, "package_manager", None)
    if not name:
        return None
    return get(name, ctx.root, settings_from(ctx.cfg))
