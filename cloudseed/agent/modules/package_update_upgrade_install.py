"""package_update_upgrade_install: refresh the package index, upgrade, install packages, reboot if needed.

The distro's package manager (``package_manager`` of the distro family: apt-get on Debian, dnf or
yum on RHEL) does the work; see ``cloudseed/agent/package_managers/``. The index is refreshed
before an upgrade or an install even without ``package_update`` (once per run). ``packages``
items are a name, ``name=version``, ``[name, version]``, or a mapping by package manager
(``{apt: [...], snap: [...]}``). Every step is tried even when an earlier one failed; the
module then fails with every failure named (``packages: apt-get install failed: E: Unable to
locate package nosuchpkg``). With ``package_reboot_if_required`` and a reboot required after an
upgrade or install (Debian: ``/var/run/reboot-required``, RHEL: ``needs-restarting -r``) the
module marks itself done first, so the next boot goes on with the modules after it, then
reboots; on a root other than the running system it logs the reboot it would do instead.
"""

from __future__ import annotations

import time

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.state import PER_INSTANCE
from cloudseed.core.values import as_bool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "package_update_upgrade_install"
REBOOT_WAIT = 60.0  # seconds to wait for the reboot to take us down before calling it failed

_PACKAGE_ITEM = {"oneOf": [
    {"type": "string"},
    {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
]}
_PACKAGE_LIST = {"type": "array", "items": _PACKAGE_ITEM, "minItems": 1}
_WRAPPER = {"type": "object", "additionalProperties": False, "properties": {
    "command": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    "enabled": {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["auto", "true", "false"]}]},
}}

MODULE = ModuleSpec(
    name=NAME, stage=STAGE_FINAL, frequency=PER_INSTANCE,
    activate_by=("packages", "package_update", "package_upgrade", "apt_update", "apt_upgrade"),
    title="Update, upgrade and install packages",
    schema={"properties": {
        "packages": {"type": "array", "minItems": 1, "items": {"oneOf": [
            _PACKAGE_ITEM["oneOf"][0], _PACKAGE_ITEM["oneOf"][1],
            {"type": "object", "minProperties": 1, "additionalProperties": False,
             "properties": {"apt": _PACKAGE_LIST, "snap": _PACKAGE_LIST}},
        ]}},
        "package_update": {"type": "boolean", "description": "Refresh the package index."},
        "package_upgrade": {"type": "boolean", "description": "Upgrade the installed packages."},
        "package_reboot_if_required": {"type": "boolean",
                                       "description": "Reboot when an upgrade or install requires it."},
        "apt_update": {"type": "boolean", "deprecated": True, "deprecated_version": "22.2",
                       "deprecated_description": "Use package_update."},
        "apt_upgrade": {"type": "boolean", "deprecated": True, "deprecated_version": "22.2",
                        "deprecated_description": "Use package_upgrade."},
        "apt_reboot_if_required": {"type": "boolean", "deprecated": True, "deprecated_version": "22.2",
                                   "deprecated_description": "Use package_reboot_if_required."},
        # how apt-get is run (cloud-init reads these from system_info; the top level works too)
        "apt_get_command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "apt_get_upgrade_subcommand": {"type": "string"},
        "apt_get_wrapper": _WRAPPER,
        # cloudseed's own package command settings (docs/packages.md; system_info or the top level)
        "package_lock_timeout": {"type": "number", "minimum": 0,
                                 "description": "Seconds to wait for a dpkg/apt lock another process holds."},
        "package_retries": {"type": "integer", "minimum": 0,
                            "description": "Retries of a transient package manager failure."},
        "package_retry_delay": {"type": "number", "minimum": 0, "description": "Seconds between retries."},
        "package_command_timeout": {"type": "number", "minimum": 0,
                                    "description": "Seconds one package command may take."},
    }},
    examples=(
        "packages:\n  - curl\n  - [jq, 1.6-2.1]\n  - htop=3.2.2-2\npackage_update: true\npackage_upgrade: true\n"
        "package_reboot_if_required: true\n",
        "packages:\n  - apt: [git, [tmux, 3.3a-3]]\n    snap: [hello-world]\n",
        "package_upgrade: true\napt_get_upgrade_subcommand: upgrade\n"
        "apt_get_wrapper:\n  command: eatmydata\n  enabled: auto\n",
    ),
)


def _item(value: Any, where: str) -> tuple[str, str | None]:
    """One package as (name, version or None)."""
    if isinstance(value, (list, tuple)):
        if not 1 <= len(value) <= 2 or not all(isinstance(v, (str, int, float)) for v in value):
            raise ModuleError(f"{where}: expected [name, version]")
        name = str(value[0]).strip()
        version = str(value[1]).strip() if len(value) == 2 and value[1] is not None else None
    elif isinstance(value, str):
        name, sep, version_text = value.strip().partition("=")
        version = version_text.strip() if sep else None
    else:
        raise ModuleError(f"{where}: expected a package name, name=version or [name, version]")
    if not name or any(c.isspace() for c in name) or name.startswith("-"):
        raise ModuleError(f"{where}: {name!r} is not a package name")
    return name, version or None


def parse_packages(value: Any) -> dict[str, list[tuple[str, str | None]]]:
    """``packages`` by package manager; key ``""`` is the distro's own manager."""
    if value is None:
        return {}
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        raise ModuleError("packages: expected a list")
    out: dict[str, list[tuple[str, str | None]]] = {}
    for index, entry in enumerate(value):
        where = f"packages[{index}]"
        if isinstance(entry, dict):
            for manager, items in entry.items():
                if manager not in ("apt", "snap"):
                    raise ModuleError(f"{where}.{manager}: not a package manager (apt, snap)")
                items = [items] if isinstance(items, str) else items
                if not isinstance(items, list):
                    raise ModuleError(f"{where}.{manager}: expected a list of packages")
                out.setdefault(manager, []).extend(
                    _item(item, f"{where}.{manager}[{i}]") for i, item in enumerate(items))
        else:
            out.setdefault("", []).append(_item(entry, where))
    return out


def _flag(cfg: dict, *keys: str) -> bool:
    return any(as_bool(cfg.get(key), False) for key in keys)


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent import package_managers
    from cloudseed.agent.package_managers.base import PackageError

    cfg = ctx.cfg
    update = _flag(cfg, "package_update", "apt_update")
    upgrade = _flag(cfg, "package_upgrade", "apt_upgrade")
    reboot_if_required = _flag(cfg, "package_reboot_if_required", "apt_reboot_if_required")
    wanted = parse_packages(cfg.get("packages"))
    errors: list[str] = []
    try:
        primary = package_managers.for_distro(ctx)
        settings = package_managers.settings_from(cfg)
        if primary is None:
            raise ModuleError(f"packages: the {ctx.distro.family} family declares no package manager")
        by_manager: list[tuple[Any, list[tuple[str, str | None]]]] = []
        for key, items in wanted.items():
            name = key or primary.name
            if name == primary.name:
                by_manager.append((primary, items))
            elif key == "apt":
                errors.append(f"packages: apt packages asked for, but this system uses {primary.tool}; "
                              f"not installed: {', '.join(n for n, _ in items)}")
            else:
                by_manager.append((package_managers.get(name, ctx.root, settings), items))
    except PackageError as e:
        raise ModuleError(str(e)) from None

    primary_work = update or upgrade or any(m is primary for m, _ in by_manager)
    if primary_work and not primary.available():
        raise ModuleError(f"packages: {primary.tool} is not installed on the target")
    if primary_work:
        try:
            primary.update()
        except PackageError as e:
            errors.append(f"package_update: {e}")
    if upgrade:
        started = time.monotonic()
        try:
            primary.upgrade()
            ctx.log.info("upgraded packages with %s in %.1fs", primary.tool, time.monotonic() - started)
        except PackageError as e:
            errors.append(f"package_upgrade: {e}")
    for manager, items in by_manager:
        names = ", ".join(f"{n}={v}" if v else n for n, v in items)
        if not manager.available():
            errors.append(f"packages: {manager.tool} is not installed on the target; not installed: {names}")
            continue
        started = time.monotonic()
        try:
            manager.install(items)
            ctx.log.info("installed %s with %s in %.1fs", names, manager.tool, time.monotonic() - started)
        except PackageError as e:
            errors.append(f"packages: {e}")

    if reboot_if_required and (upgrade or wanted):
        _maybe_reboot(ctx, primary, errors)
    if errors:
        raise ModuleError("; ".join(errors))


def _maybe_reboot(ctx: ModuleContext, manager: Any, errors: list[str]) -> None:
    from cloudseed.agent.package_managers.base import PackageError
    from cloudseed.agent.state import Semaphores

    try:
        required = manager.reboot_required()
    except PackageError as e:
        errors.append(f"package_reboot_if_required: {e}")
        return
    if not required:
        ctx.log.info("no reboot required")
        return
    if errors:
        errors.append("package_reboot_if_required: a reboot is required but was not done because of the "
                      "failures above")
        return
    argv = ["systemctl", "reboot"] if ctx.root.which("systemctl") else ["/sbin/reboot"]
    # done before rebooting: the next boot goes on with the modules after this one
    Semaphores(ctx.paths, ctx.instance_id).mark(NAME, PER_INSTANCE)
    if not ctx.root.is_live:
        ctx.log.info("a reboot is required; offline root: would run %s now (nothing rebooted)", " ".join(argv))
        return
    ctx.log.warning("a reboot is required after installing packages: running %s", " ".join(argv))
    for handler in _all_handlers():
        handler.flush()
    try:
        ctx.root.run(argv, timeout=60)
    except Exception as e:  # the reboot command itself failed
        raise ModuleError(f"package_reboot_if_required: {argv[0]} failed: {e}") from None
    time.sleep(REBOOT_WAIT)
    raise ModuleError(f"package_reboot_if_required: the reboot did not happen within {REBOOT_WAIT:g}s")


def _all_handlers() -> list:
    import logging

    handlers = list(logging.getLogger().handlers)
    handlers += logging.getLogger("cloudseed").handlers
    return handlers
