"""What the platform and vendor modules (lxd, fan, landscape, ubuntu_pro, rh_subscription...) share.

- ``checked``: the module's section checked against its own schema fragment first; a problem
  names the key path and the type, never the value (tokens and passwords live under these keys).
- ``install``: packages through the distro's package manager plugin; a failure names them.
- ``reason``: the telling line of a failed command's output with the given secrets masked.
- ``enable_service`` / ``restart_service``: ``systemctl`` on the target; the restart only where
  systemd runs in that root (``/run/systemd/system``), so an offline image is never touched live.
"""

from __future__ import annotations

from cloudseed.agent.modules import ModuleContext, ModuleError
from cloudseed.core.root import CommandError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Sequence

SERVICE_SECONDS = 90.0


def checked(ctx: ModuleContext, key: str, schema: dict) -> dict:
    """``ctx.cfg[key]`` (a mapping; {} when null) after checking it against ``schema``'s fragment for ``key``."""
    from cloudseed.agent import schema as validator

    value = ctx.cfg.get(key)
    if value is None:
        value = {}
    validator._SHOW_VALUES[0] = False  # the status is world-readable: types only, never values
    try:
        problems = [p for p in validator.check(value, schema["properties"][key], key) if p.level == "error"]
    finally:
        validator._SHOW_VALUES[0] = True
    if problems:
        raise ModuleError("; ".join(f"{p.path}: {p.message}" for p in problems[:5]))
    if not isinstance(value, dict):
        raise ModuleError(f"{key}: expected a mapping")
    return value


def install(ctx: ModuleContext, key: str, packages: Sequence[str], hint: str = "") -> None:
    """Install ``packages`` through the distro's package manager, or a ModuleError naming them."""
    from cloudseed.agent.package_managers import for_distro
    from cloudseed.agent.package_managers.base import PackageError

    names = ", ".join(packages)
    extra = f" ({hint})" if hint else ""
    manager = for_distro(ctx)
    if manager is None:
        raise ModuleError(f"{key}: {names} is not installed and this distro has no package manager{extra}")
    try:
        manager.update()
        manager.install([(name, None) for name in packages])
    except PackageError as e:
        raise ModuleError(f"{key}: {names} is not installed and installing it failed: {e}{extra}") from None
    ctx.log.info("%s: installed %s", key, names)


def reason(error: CommandError, secrets: Iterable[str] = ()) -> str:
    """The last non-empty line of a failed command's output (200 characters), secrets masked."""
    lines = [line.strip() for line in (error.stderr + "\n" + error.stdout).splitlines() if line.strip()]
    text = lines[-1][:200] if lines else f"exit status {error.returncode}"
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[secret]")
    return text


def systemd_running(ctx: ModuleContext) -> bool:
    return ctx.root.exists("/run/systemd/system")


def enable_service(ctx: ModuleContext, key: str, service: str) -> None:
    """``systemctl enable`` the service, so it starts at every boot."""
    if not ctx.root.which("systemctl"):
        raise ModuleError(f"{key}: cannot enable {service}: systemctl is not on the target")
    try:
        ctx.root.run(["systemctl", "--quiet", "enable", service], input=b"", timeout=SERVICE_SECONDS)
    except CommandError as e:
        raise ModuleError(f"{key}: enabling {service} failed: {reason(e)}") from None


def restart_service(ctx: ModuleContext, key: str, service: str) -> bool:
    """Restart the service where systemd runs; False (logged) in an offline root."""
    if not systemd_running(ctx):
        ctx.log.info("%s: not restarting %s: systemd is not running in this root", key, service)
        return False
    try:
        ctx.root.run(["systemctl", "restart", service], input=b"", timeout=SERVICE_SECONDS)
    except CommandError as e:
        raise ModuleError(f"{key}: restarting {service} failed: {reason(e)} (see journalctl -u {service})") from None
    return True
