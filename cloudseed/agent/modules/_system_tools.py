"""What the modules that drive a system tool share (configuration management: ansible, chef,
puppet, salt_minion, mcollective; platforms and vendors: lxd, fan, landscape, ubuntu_pro,
rh_subscription, spacewalk...).

- ``checked``: the module's section checked against the module's own schema fragment before
  anything is done; a wrong type is a ModuleError naming the key path and the type, never the
  value (tokens, passwords, keys and certificates live under these keys).
- ``install`` / ``install_packages``: packages through the distro's package manager plugin; a
  failure names the packages and what to do (some tools are not in the distro's archive).
- ``fetch_script`` / ``run_script``: an installer script fetched with ``cloudseed.core.http``
  (total deadline, size limit, bounded retries) and run on the target from a private temporary
  directory that is removed afterwards.
- ``reason``: the telling line of a failed command's output, with given secrets masked.
- ``enable_service`` / ``restart_service``: ``systemctl`` on the target; the restart only where
  systemd runs in that root (``/run/systemd/system``), so an offline image is never touched live.
"""

from __future__ import annotations

from cloudseed.agent.modules import ModuleContext, ModuleError
from cloudseed.core.root import CommandError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

SCRIPT_MAX_BYTES = 4 * 1024 * 1024  # installer scripts are a few tens of kilobytes
SCRIPT_FETCH_SECONDS = 60.0  # the whole fetch, retries included
SCRIPT_RUN_SECONDS = 1800.0
SERVICE_SECONDS = 90.0


def checked(ctx: ModuleContext, key: str, schema: dict) -> dict:
    """``ctx.cfg[key]`` (a mapping; {} when null), checked against ``schema``'s fragment for ``key``."""
    from cloudseed.agent.config import validator

    value = ctx.cfg.get(key)
    if value is None:
        value = {}
    validator._SHOW_VALUES[0] = False  # messages go to the status: types only, never values
    try:
        problems = [p for p in validator.check(value, schema["properties"][key], key) if p.level == "error"]
    finally:
        validator._SHOW_VALUES[0] = True
    if problems:
        raise ModuleError("; ".join(f"{p.path}: {p.message}" for p in problems[:5]))
    if not isinstance(value, dict):
        raise ModuleError(f"{key}: expected a mapping")
    return value


def install_packages(ctx: ModuleContext, key: str, packages: Sequence[tuple[str, str | None]],
                     hint: str = "") -> None:
    """Install ``packages`` (name, version or None) through the distro's package manager."""
    from cloudseed.agent.package_managers import for_distro
    from cloudseed.agent.package_managers.base import PackageError

    names = ", ".join(f"{n}={v}" if v else n for n, v in packages)
    manager = for_distro(ctx)
    if manager is None:
        raise ModuleError(f"{key}: {names} is not installed and this distro has no package manager"
                          + (f" ({hint})" if hint else ""))
    try:
        manager.update()
        manager.install(list(packages))
    except PackageError as e:
        raise ModuleError(f"{key}: installing {names}: {e}" + (f" ({hint})" if hint else "")) from None
    ctx.log.info("%s: installed %s", key, names)


def install(ctx: ModuleContext, key: str, packages: Sequence[str], hint: str = "") -> None:
    """``install_packages`` for names without versions."""
    install_packages(ctx, key, [(name, None) for name in packages], hint)


def fetch_script(key: str, url: str, attempts: int = 3) -> bytes:
    """The body of ``url`` (an installer script), within a bounded time and size."""
    from cloudseed.core.http import FetchError, fetch

    if not url.startswith(("http://", "https://")):
        raise ModuleError(f"{key}: expected an http:// or https:// URL for the installer")
    try:
        return fetch(url, timeout=15.0, retries=max(0, attempts - 1), max_bytes=SCRIPT_MAX_BYTES,
                     max_wait=SCRIPT_FETCH_SECONDS)
    except FetchError as e:
        raise ModuleError(f"{key}: cannot fetch the installer: {e}") from None


def run_script(ctx: ModuleContext, key: str, content: bytes, name: str, args: Sequence[str],
               timeout: float = SCRIPT_RUN_SECONDS) -> None:
    """Run ``content`` as ``name`` with ``args`` on the target (a 0700 directory under /var/tmp)."""
    import os

    directory = f"/var/tmp/cloudseed-{name}-{os.getpid()}"
    ctx.root.remove_tree(directory)
    ctx.root.makedirs(directory, mode=0o700)
    path = f"{directory}/{name}"
    try:
        ctx.root.write(path, content, mode=0o700)
        shell = ["/bin/sh"] if not content.startswith(b"#!") else []
        ctx.root.run([*shell, path, *args], timeout=timeout)
    except CommandError as e:
        raise ModuleError(f"{key}: the installer {name} failed: {reason(e)}") from None
    finally:
        ctx.root.remove_tree(directory)
    ctx.log.info("%s: installer %s finished", key, name)


def systemd_running(ctx: ModuleContext) -> bool:
    return ctx.root.exists("/run/systemd/system")


def enable_service(ctx: ModuleContext, key: str, service: str) -> None:
    """``systemctl enable`` the service, so it starts at every boot."""
    if not ctx.root.which("systemctl"):
        raise ModuleError(f"{key}: cannot enable {service}: systemctl is not on the target")
    argv = ["systemctl", "enable", service] if systemd_running(ctx) else ["systemctl", "--quiet", "enable", service]
    try:
        ctx.root.run(argv, timeout=SERVICE_SECONDS)
    except CommandError as e:
        raise ModuleError(f"{key}: enabling {service} failed: {reason(e)}") from None


def restart_service(ctx: ModuleContext, key: str, service: str) -> bool:
    """Restart the service where systemd runs; False (logged) in an offline root."""
    if not systemd_running(ctx):
        ctx.log.info("%s: not restarting %s: systemd is not running in this root", key, service)
        return False
    try:
        ctx.root.run(["systemctl", "restart", service], timeout=SERVICE_SECONDS)
    except CommandError as e:
        raise ModuleError(f"{key}: restarting {service} failed: {reason(e)} "
                          f"(see journalctl -u {service})") from None
    return True


def reason(error: CommandError, secrets: Iterable[str] = ()) -> str:
    """The last non-empty line of a failed command's output (200 characters), secrets masked."""
    lines = [line.strip() for line in (error.stderr + "\n" + error.stdout).splitlines() if line.strip()]
    text = lines[-1][:200] if lines else f"exit status {error.returncode}"
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[secret]")
    return text


def require_absolute(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise ModuleError(f"{key}: expected an absolute path")
    return value
