"""mcollective: install, configure and restart the MCollective server (``mcollective: {conf}``).

The ``mcollective`` package is installed through the distro's package manager. Each ``conf`` key
is set in ``/etc/mcollective/server.cfg``: an existing ``key = value`` line is replaced in
place, a new key is appended, and every other line (comments included) is kept; the previous
file is kept as ``server.cfg.old``. ``public-cert`` and ``private-cert`` are not settings: they
are written to ``/etc/mcollective/ssl/server-public.pem`` (0644) and ``server-private.pem``
(0600), and the settings that point at them (``plugin.ssl_server_public`` /
``plugin.ssl_server_private``, ``securityprovider = ssl``) are set. A boolean is written
``true``/``false``, the spelling MCollective's own parser understands. The service is enabled,
and restarted where systemd runs. A new server.cfg is 0600 (it holds passwords), an existing
one keeps its mode. Certificate contents are never logged.
"""

from __future__ import annotations

import re
import stat

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import checked, enable_service, install_packages, restart_service

KEY = "mcollective"
SERVER_CFG = "/etc/mcollective/server.cfg"
PUBLIC_CERT = "/etc/mcollective/ssl/server-public.pem"
PRIVATE_CERT = "/etc/mcollective/ssl/server-private.pem"
SERVICE = "mcollective"
_SETTING = re.compile(r"^\s*([^#;=\s][^=]*?)\s*=")

MODULE = ModuleSpec(
    name=KEY, stage=STAGE_FINAL, activate_by=(KEY,),
    title="Install, configure and start MCollective",
    schema={"properties": {KEY: {
        "type": "object",
        "additionalProperties": False,
        "description": "Install MCollective, set keys of its server.cfg, write its certificates, restart it.",
        "properties": {"conf": {
            "type": "object",
            "additionalProperties": False,
            "description": "Settings of ``/etc/mcollective/server.cfg`` (merged into the existing file).",
            "properties": {
                "public-cert": {"type": "string", "description": "The server's public certificate, written to "
                                                                 "``/etc/mcollective/ssl/server-public.pem``."},
                "private-cert": {"type": "string", "description": "The server's private key, written 0600 to "
                                                                  "``/etc/mcollective/ssl/server-private.pem``."},
            },
            "patternProperties": {"^.+$": {
                "description": "A server.cfg setting and its value.",
                "oneOf": [{"type": "boolean"}, {"type": "integer"}, {"type": "string"}],
            }},
        }},
    }}},
    examples=(
        """\
#cloud-config
mcollective:
  conf:
    loglevel: debug
    plugin.stomp.host: dbhost
    plugin.stomp.port: 61613
    public-cert: |
      -----BEGIN CERTIFICATE-----
      MIIBexample
      -----END CERTIFICATE-----
    private-cert: |
      -----BEGIN RSA PRIVATE KEY-----
      MIIEexample
      -----END RSA PRIVATE KEY-----
""",
    ),
)


def as_setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if "\n" in text:
        raise ModuleError("a server.cfg value must be one line")
    return text


def merge(existing: str, settings: dict[str, str]) -> str:
    """``existing`` server.cfg text with ``settings`` set: replaced in place (first line), or appended."""
    done: set[str] = set()
    out = []
    for line in existing.splitlines():
        match = _SETTING.match(line)
        name = match.group(1) if match else None
        if name in settings:
            if name not in done:  # a later duplicate line is dropped: it would override the value
                out.append(f"{name} = {settings[name]}")
                done.add(name)
            continue
        out.append(line)
    out += [f"{name} = {value}" for name, value in settings.items() if name not in done]
    return "\n".join(out) + "\n"


def handle(ctx: ModuleContext) -> None:
    cfg = checked(ctx, KEY, MODULE.schema)
    conf = cfg.get("conf") or {}
    settings: dict[str, str] = {}
    certs: list[tuple[str, str, int]] = []
    for name, value in conf.items():
        if name == "public-cert":
            certs.append((PUBLIC_CERT, value, 0o644))
            settings["plugin.ssl_server_public"] = PUBLIC_CERT
            settings["securityprovider"] = "ssl"
        elif name == "private-cert":
            certs.append((PRIVATE_CERT, value, 0o600))
            settings["plugin.ssl_server_private"] = PRIVATE_CERT
            settings["securityprovider"] = "ssl"
        else:
            if "=" in name or name.strip() != name or "\n" in name:
                raise ModuleError(f"{KEY}.conf: {name!r} is not a server.cfg setting name")
            try:
                settings[name] = as_setting(value)
            except ModuleError as e:
                raise ModuleError(f"{KEY}.conf.{name}: {e}") from None

    install_packages(ctx, KEY, [("mcollective", None)])
    for path, content, mode in certs:
        ctx.root.write(path, content, mode=mode, owner="root", group="root")
        ctx.log.info("%s: certificate written to %s", KEY, path)
    if settings:
        existing = ctx.root.read_text(SERVER_CFG) if ctx.root.isfile(SERVER_CFG) else None
        if existing is not None:  # the previous file, kept with its own mode (it may hold a psk)
            ctx.root.write(f"{SERVER_CFG}.old", existing, mode=stat.S_IMODE(ctx.root.stat(SERVER_CFG).st_mode))
        ctx.root.write(SERVER_CFG, merge(existing or "", settings), mode=0o600, owner="root", group="root",
                       keep_mode=existing is not None)
        ctx.log.info("%s: set %s in %s", KEY, ", ".join(settings), SERVER_CFG)
    enable_service(ctx, KEY, SERVICE)
    restart_service(ctx, KEY, SERVICE)
