"""ubuntu_pro: attach Ubuntu Pro and enable its services with the ``pro`` client. Ubuntu only.

``ubuntu_pro`` (``ubuntu_advantage`` is its deprecated name, read when ``ubuntu_pro`` is absent):
- ``config``: ``pro config set KEY=VALUE`` for each entry, ``pro config unset KEY`` for a null
  one (proxies), before attaching;
- ``token``: written with ``enable`` (as ``enable_services``) to a 0600 attach-config file in a
  0700 directory, given to ``pro attach --attach-config FILE`` and removed afterwards, so the
  token is never on a command line, in the log or in the status; a machine already attached
  gets ``pro enable`` for ``enable`` instead;
- ``enable_beta``: ``pro enable --assume-yes --beta SERVICE...`` after attaching;
- without a token: ``pro auto-attach`` (Ubuntu Pro cloud images), unless
  ``features.disable_auto_attach`` is true.
The client (``pro``, or ``ua`` on old releases) is installed as ``ubuntu-advantage-tools``
through the package manager when missing.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

ATTACH_DIR = "/var/lib/cloudseed/ubuntu-pro"
PACKAGE = "ubuntu-advantage-tools"
TIMEOUT = 900


def _proxy(what: str) -> dict:
    return {"type": ["string", "null"], "format": "uri", "description": f"{what}, or null to unset it."}


def _section(deprecated: bool) -> dict:
    section = {
        "type": "object", "additionalProperties": False,
        "description": "Ubuntu Pro: the contract token, the services to enable, the client's settings.",
        "properties": {
            "token": {"type": "string", "description": "The contract token from https://ubuntu.com/pro to attach "
                                                       "with (secret: never logged). Not needed on Ubuntu Pro "
                                                       "cloud images, which attach themselves."},
            "enable": {"type": "array", "items": {"type": "string"},
                       "description": "The services to enable (esm-infra, fips, livepatch...). Given, only these "
                                      "are enabled, instead of the contract's defaults."},
            "enable_beta": {"type": "array", "items": {"type": "string"},
                            "description": "Beta services to enable as well."},
            "features": {"type": "object", "additionalProperties": False,
                         "description": "How the client behaves.",
                         "properties": {"disable_auto_attach": {
                             "type": "boolean", "default": False,
                             "description": "True: no automatic attachment on Ubuntu Pro cloud images. "
                                            "Default: false."}}},
            "config": {"type": "object", "additionalProperties": True,
                       "description": "Settings of the pro client (``pro config set``); null unsets one.",
                       "properties": {
                           "http_proxy": _proxy("The proxy for the client's HTTP requests"),
                           "https_proxy": _proxy("The proxy for the client's HTTPS requests"),
                           "global_apt_http_proxy": _proxy("The HTTP proxy for every APT repository"),
                           "global_apt_https_proxy": _proxy("The HTTPS proxy for every APT repository"),
                           "ua_apt_http_proxy": _proxy("The HTTP proxy for the Ubuntu Pro APT repositories"),
                           "ua_apt_https_proxy": _proxy("The HTTPS proxy for the Ubuntu Pro APT repositories"),
                       }},
        },
    }
    if deprecated:
        section["deprecated"] = True
        section["deprecated_description"] = "Use ubuntu_pro (the same keys)."
    return section


MODULE = ModuleSpec(
    name="ubuntu_pro", stage=STAGE_CONFIG, activate_by=("ubuntu_pro", "ubuntu_advantage"), distros=("ubuntu",),
    title="Attach Ubuntu Pro and enable its services",
    schema={"properties": {"ubuntu_pro": _section(False), "ubuntu_advantage": _section(True)}},
    examples=(
        """\
#cloud-config
ubuntu_pro:
  token: C1NWcZTHLteJXGVMM6YhvHDpGrhyy7
  enable: [esm-infra, livepatch]
  enable_beta: [realtime-kernel]
  config:
    http_proxy: http://proxy.example.com:3128
    https_proxy: null
""",
        """\
#cloud-config
ubuntu_pro:
  features:
    disable_auto_attach: true
""",
    ),
)


class Client:
    """The pro client on the target; every message has the token masked."""

    def __init__(self, ctx: ModuleContext, tool: str, token: str):
        self.ctx, self.tool, self.token = ctx, tool, token

    def run(self, args: list[str], what: str, check: bool = True):
        argv = [self.tool, *args]
        try:
            return self.ctx.root.run(argv, input=b"", env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                                     check=check, timeout=TIMEOUT)
        except CommandError as e:
            raise ModuleError(f"ubuntu_pro: {what} failed: {self.reason(e)}") from None

    def reason(self, e: CommandError) -> str:
        lines = [ln.strip() for ln in (e.stderr + "\n" + e.stdout).splitlines() if ln.strip()]
        text = lines[-1][:200] if lines else f"exit status {e.returncode}"
        return text.replace(self.token, "[token]") if self.token else text


def settings(ctx: ModuleContext) -> tuple[str, dict]:
    """(the key used, its section) with ``ubuntu_pro`` winning over the deprecated ``ubuntu_advantage``."""
    from cloudseed.agent.modules._system_tools import checked

    if ctx.cfg.get("ubuntu_pro") not in (None, {}):
        if ctx.cfg.get("ubuntu_advantage") not in (None, {}):
            ctx.warn("both ubuntu_pro and the deprecated ubuntu_advantage are given; ubuntu_advantage is ignored")
        return "ubuntu_pro", checked(ctx, "ubuntu_pro", MODULE.schema)
    return "ubuntu_advantage", checked(ctx, "ubuntu_advantage", MODULE.schema)


def attach_config(token: str, enable: list[str] | None) -> str:
    """The attach-config document ``pro attach --attach-config`` reads (YAML)."""
    import json

    lines = [f"token: {json.dumps(token)}"]
    if enable is not None:
        lines.append(f"enable_services: {json.dumps(list(enable))}")
    return "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    key, cfg = settings(ctx)
    token = str(cfg.get("token") or "")
    tool = ctx.root.which("pro") and "pro" or ctx.root.which("ua") and "ua"
    if not tool:
        from cloudseed.agent.modules._system_tools import install

        install(ctx, key, [PACKAGE], hint="the Ubuntu Pro client")
        tool = "pro" if ctx.root.which("pro") else "ua"
    client = Client(ctx, tool, token)
    for name, value in (cfg.get("config") or {}).items():
        if value is None:
            client.run(["config", "unset", name], f"{key}.config.{name}: pro config unset")
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            client.run(["config", "set", f"{name}={text}"], f"{key}.config.{name}: pro config set")
    enable = cfg.get("enable")
    beta = cfg.get("enable_beta") or []
    if token:
        _attach(ctx, client, key, token, enable)
    elif (cfg.get("features") or {}).get("disable_auto_attach") is True:
        ctx.log.info("%s: no token and features.disable_auto_attach: not attaching", key)
        if enable or beta:
            raise ModuleError(f"{key}.enable: services cannot be enabled without attaching (give {key}.token)")
        return
    else:
        proc = client.run(["auto-attach"], "auto-attach", check=False)
        if proc.returncode != 0:
            raise ModuleError(f"{key}.token: not given, and automatic attachment failed (it works only on "
                              "Ubuntu Pro cloud images; give a token)")
        if enable:
            client.run(["enable", "--assume-yes", *enable], f"{key}.enable: pro enable")
    if beta:
        client.run(["enable", "--assume-yes", "--beta", *beta], f"{key}.enable_beta: pro enable --beta")
    ctx.log.info("%s: attached%s", key, f"; enabled {', '.join([*(enable or []), *beta])}" if enable or beta else "")


def _attach(ctx: ModuleContext, client: Client, key: str, token: str, enable: list[str] | None) -> None:
    import os

    ctx.root.makedirs(ATTACH_DIR, mode=0o700)
    path = f"{ATTACH_DIR}/attach-{os.getpid()}.yaml"
    try:
        ctx.root.write(path, attach_config(token, enable), mode=0o600)
        proc = client.run(["attach", "--attach-config", path], f"{key}.token: pro attach", check=False)
    finally:
        ctx.root.remove(path)
    if proc.returncode == 0:
        return
    output = proc.stdout + proc.stderr
    if "already attached" in output.lower():
        ctx.log.info("%s: this machine is already attached; enabling the services only", key)
        if enable:
            client.run(["enable", "--assume-yes", *enable], f"{key}.enable: pro enable")
        return
    failure = CommandError([client.tool, "attach"], proc.returncode, proc.stdout, proc.stderr)
    raise ModuleError(f"{key}.token: pro attach failed: {client.reason(failure)}")
