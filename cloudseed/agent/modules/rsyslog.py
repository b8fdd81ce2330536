"""rsyslog: rsyslog configuration snippets (``configs``), remote log targets (``remotes``), reload.

Each ``configs`` entry is a string (written to ``config_filename``) or ``{content, filename}``;
entries naming the same file are joined in order, and a relative filename is taken inside
``config_dir`` (default ``/etc/rsyslog.d``, file ``20-cloud-config.conf`` as cloud-init).
``remotes`` maps a name to ``[filter] [@|@@]host[:port]`` (udp ``@`` by default, ``*.*`` as the
filter), written as one more snippet between ``# begin remotes`` and ``# end remotes``. Every file
is checked whole before any is written, and each is written atomically. Then the service is
reloaded on the running system: ``service_reload_command: auto`` (systemctl try-reload-or-restart
of ``rsyslog``), a command list, or a shell string. ``install_rsyslog`` installs ``packages``
(rsyslog) with the distro's package manager when ``check_exe`` (rsyslogd) is missing. The legacy
forms (a top-level list under ``rsyslog``, ``rsyslog_filename``, ``rsyslog_dir``) still work and
are reported as deprecated.
"""

from __future__ import annotations

import re

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_DIR = "/etc/rsyslog.d"
DEFAULT_FILENAME = "20-cloud-config.conf"
_CONFIG_ENTRY = {"oneOf": [{"type": "string"}, {
    "type": "object", "required": ["content"], "additionalProperties": False,
    "properties": {"filename": {"type": "string"}, "content": {"type": "string"}}}]}
_REMOTE = re.compile(r"^(?P<proto>@{0,2})(\[(?P<bracketed>[^\]]*)\]|(?P<addr>[^:\[\]]*))(:(?P<port>[0-9]+))?$")

MODULE = ModuleSpec(
    name="rsyslog", stage=STAGE_INIT, activate_by=("rsyslog",),
    title="Configure rsyslog (snippets, remote targets)",
    schema={"properties": {
        "rsyslog": {"oneOf": [
            {"type": "object", "additionalProperties": False, "properties": {
                "config_dir": {"type": "string", "description": "Where snippets go (default /etc/rsyslog.d)."},
                "config_filename": {"type": "string",
                                    "description": "File of entries without one (default 20-cloud-config.conf)."},
                "configs": {"type": "array", "items": _CONFIG_ENTRY},
                "remotes": {"type": "object", "additionalProperties": {"type": ["string", "null"]},
                            "description": "name: '[filter] [@|@@]host[:port]'"},
                "service_reload_command": {"oneOf": [{"type": "string"},
                                                     {"type": "array", "items": {"type": "string"}}],
                                           "description": "auto, a command list, or a shell command."},
                "install_rsyslog": {"type": "boolean", "description": "Install rsyslog when check_exe is missing."},
                "check_exe": {"type": "string", "description": "The rsyslog binary to look for (rsyslogd)."},
                "packages": {"type": "array", "items": {"type": "string"},
                             "description": "Packages to install for install_rsyslog (rsyslog)."},
            }},
            {"type": "array", "items": _CONFIG_ENTRY,
             "description": "Deprecated: a list of configs (use rsyslog.configs)."},
        ]},
        "rsyslog_filename": {"type": "string", "deprecated": True,
                             "deprecated_description": "use rsyslog.config_filename"},
        "rsyslog_dir": {"type": "string", "deprecated": True, "deprecated_description": "use rsyslog.config_dir"},
    }},
    examples=(
        "rsyslog:\n  remotes:\n    maas: 192.168.1.1\n    juju: 10.0.4.1\n  service_reload_command: auto\n",
        "rsyslog:\n  config_dir: /etc/rsyslog.d\n  config_filename: 99-late-cloud-config.conf\n  configs:\n"
        "    - \"*.* @@192.0.2.1\"\n    - content: \"*.*   @@192.0.2.2:10514\"\n      filename: 01-example.conf\n"
        "    - content: |\n        *.*   @@syslogd.example.com\n  remotes:\n    maas: 192.168.1.1\n"
        "    juju: 10.0.4.1\n  service_reload_command: [your, syslog, restart, command]\n",
    ),
)


def settings(ctx: ModuleContext) -> dict[str, Any]:
    """The rsyslog settings with defaults, the legacy list form turned into the documented one."""
    cfg = ctx.cfg
    raw = cfg.get("rsyslog")
    if isinstance(raw, list):
        ctx.warn("rsyslog: a list under 'rsyslog' is deprecated; use rsyslog.configs")
        raw = {"configs": raw}
        if "rsyslog_filename" in cfg:
            raw["config_filename"] = cfg["rsyslog_filename"]
        if "rsyslog_dir" in cfg:
            raw["config_dir"] = cfg["rsyslog_dir"]
    elif not isinstance(raw, dict):
        raise ModuleError(f"rsyslog: expected a mapping (configs, remotes, ...), got {type(raw).__name__}")
    else:
        for legacy in ("rsyslog_filename", "rsyslog_dir"):
            if legacy in cfg:
                ctx.warn(f"{legacy}: deprecated and only read with the list form of rsyslog; "
                         f"use rsyslog.{'config_filename' if legacy.endswith('filename') else 'config_dir'}")
    out = dict(raw)
    for key, default, kinds in (("configs", [], (list,)), ("config_dir", DEFAULT_DIR, (str,)),
                                ("config_filename", DEFAULT_FILENAME, (str,)),
                                ("service_reload_command", "auto", (str, list)), ("remotes", {}, (dict,)),
                                ("install_rsyslog", False, (bool,)), ("check_exe", "rsyslogd", (str,)),
                                ("packages", ["rsyslog"], (list,))):
        if out.get(key) is None:
            out[key] = default
        elif not isinstance(out[key], kinds):
            raise ModuleError(f"rsyslog.{key}: expected {' or '.join(k.__name__ for k in kinds)}, "
                              f"got {type(out[key]).__name__} {out[key]!r}")
    return out


def remote_line(name: str, value: str) -> str:
    """``*.* @@10.0.0.1:514 # name`` for ``'*.* @@10.0.0.1:514'``; ValueError naming the problem."""
    data, _, comment = value.partition("#")
    tokens = data.split()
    if len(tokens) == 1:
        selector, target = "*.*", tokens[0]
    elif len(tokens) == 2:
        selector, target = tokens
    else:
        raise ValueError(f"expected '[filter] [@|@@]host[:port]', got {value!r}")
    match = _REMOTE.match(target)
    if not match:
        raise ValueError(f"{target!r} is not [@|@@]host[:port]")
    address = match.group("bracketed") if match.group("bracketed") is not None else match.group("addr")
    if not address:
        raise ValueError(f"{target!r} has no host")
    proto = "@@" if match.group("proto") == "@@" else "@"
    host = f"[{address}]" if ":" in address else address
    port = f":{int(match.group('port'))}" if match.group("port") else ""
    label = name or comment.strip()
    return f"{selector} {proto}{host}{port}" + (f" # {label}" if label else "")


def plan_files(cfg: dict[str, Any]) -> dict[str, str]:
    """Path (inside the root) -> content of every snippet; ModuleError before anything is written."""
    configs = list(cfg["configs"])
    if cfg["remotes"]:
        lines = ["# begin remotes"]
        for name, value in cfg["remotes"].items():
            if not value:
                continue
            try:
                lines.append(remote_line(str(name), str(value)))
            except ValueError as e:
                raise ModuleError(f"rsyslog.remotes.{name}: {e}") from None
        configs.append("\n".join(lines + ["# end remotes"]) + "\n")
    files: dict[str, str] = {}
    for index, entry in enumerate(configs):
        where = f"rsyslog.configs[{index}]"
        if isinstance(entry, dict):
            if not isinstance(entry.get("content"), str):
                raise ModuleError(f"{where}.content: expected the configuration text, got {entry.get('content')!r}")
            content, filename = entry["content"], entry.get("filename", cfg["config_filename"])
        elif isinstance(entry, str):
            content, filename = entry, cfg["config_filename"]
        else:
            raise ModuleError(f"{where}: expected a string or {{content, filename}}, got {type(entry).__name__}")
        if not isinstance(filename, str) or not filename.strip():
            raise ModuleError(f"{where}.filename: empty file name")
        filename = filename.strip()
        path = filename if filename.startswith("/") else f"{cfg['config_dir'].rstrip('/')}/{filename}"
        files[path] = files.get(path, "") + content + ("" if content.endswith("\n") else "\n")
    return files


def handle(ctx: ModuleContext) -> None:
    cfg = settings(ctx)
    files = plan_files(cfg)
    if not files:
        ctx.log.info("rsyslog: no configs and no remotes; nothing to do")
        return
    if cfg["install_rsyslog"] and ctx.root.which(cfg["check_exe"]) is None and not ctx.root.isfile(cfg["check_exe"]):
        install(ctx, [str(p) for p in cfg["packages"]], cfg["check_exe"])
    for path, content in files.items():
        ctx.root.write(path, content, mode=0o644)
        ctx.log.info("rsyslog: wrote %s", path)
    reload(ctx, cfg["service_reload_command"])


def install(ctx: ModuleContext, packages: list[str], check_exe: str) -> None:
    """Install rsyslog with the distro's package manager before anything is written."""
    from cloudseed.agent.package_managers import for_distro
    from cloudseed.agent.package_managers.base import PackageError

    missing = f"rsyslog.install_rsyslog: {check_exe} is not installed"
    manager = for_distro(ctx)
    if manager is None or not packages:
        raise ModuleError(f"{missing} and there is no package manager or package to install it with")
    try:
        manager.update()
        manager.install([(package, None) for package in packages])
    except PackageError as e:
        raise ModuleError(f"{missing}; installing {' '.join(packages)}: {e}") from None
    ctx.log.info("rsyslog: installed %s", " ".join(packages))


def reload(ctx: ModuleContext, command: str | list) -> None:
    from cloudseed.core.root import CommandError

    if command == "auto":
        service = str((ctx.distro.system_info or {}).get("rsyslog_svcname") or "rsyslog")
        argv = ["systemctl", "try-reload-or-restart", service]
        if ctx.root.is_live and not ctx.root.exists("/run/systemd/system"):
            ctx.log.info("not a running systemd system: rsyslog not reloaded")
            return
    elif isinstance(command, str):
        argv = ["sh", "-c", command]
    else:
        argv = [str(a) for a in command]
    if not ctx.root.is_live:
        ctx.log.info("offline root: not running %s", " ".join(argv))
        return
    try:
        ctx.root.run(argv)
    except CommandError as e:
        raise ModuleError(f"rsyslog.service_reload_command: the files are written but {' '.join(argv)} "
                          f"failed: {e}") from None
    ctx.log.info("ran %s", " ".join(argv))
