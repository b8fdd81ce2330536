"""resolv_conf: write /etc/resolv.conf from ``resolv_conf`` when ``manage_resolv_conf`` is true.

``resolv_conf: {nameservers, searchdomains, domain, sortlist, options}``; option values of true
become flags (``rotate``), false ones are dropped, others ``name:value``. A template
``resolv.conf.tmpl`` in ``/etc/cloudseed/templates`` replaces the built-in layout.
"""

from __future__ import annotations

import ipaddress

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_templates import USER_TEMPLATE_DIRS, TemplateError, render
from cloudseed.core.values import as_bool

RESOLV_CONF = "/etc/resolv.conf"

MODULE = ModuleSpec(
    name="resolv_conf", stage=STAGE_INIT, activate_by=("manage_resolv_conf",),
    title="Write /etc/resolv.conf",
    schema={"properties": {
        "manage_resolv_conf": {"type": "boolean"},
        "resolv_conf": {"type": "object", "properties": {
            "nameservers": {"type": "array", "items": {"type": "string"}},
            "searchdomains": {"type": "array", "items": {"type": "string"}},
            "domain": {"type": "string"},
            "sortlist": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"},
        }, "additionalProperties": False},
    }},
    examples=(
        """\
#cloud-config
manage_resolv_conf: true
resolv_conf:
  nameservers:
    - 192.0.2.53
    - "2001:db8::53"
  searchdomains:
    - corp.example.org
    - example.org
  domain: corp.example.org
  sortlist:
    - 192.0.2.0/255.255.255.0
  options:
    edns0: true
    attempts: 2
""",
    ),
)


def parameters(settings: dict) -> dict:
    params = dict(settings)
    options = dict(params.get("options") or {})
    params["flags"] = [k for k, v in options.items() if v is True]
    params["options"] = {k: v for k, v in options.items() if not isinstance(v, bool)}
    for index, server in enumerate(params.get("nameservers") or []):
        try:
            ipaddress.ip_address(str(server))
        except ValueError:
            raise ModuleError(f"resolv_conf.nameservers[{index}]: {server!r} is not an IP address") from None
    return params


def builtin_layout(params: dict) -> str:
    lines = ["# Written by cloudseed because 'manage_resolv_conf' is true."]
    lines += [f"nameserver {s}" for s in params.get("nameservers") or []]
    if params.get("searchdomains"):
        lines.append("search " + " ".join(str(s) for s in params["searchdomains"]))
    if params.get("domain"):
        lines.append(f"domain {params['domain']}")
    if params.get("sortlist"):
        lines.append("sortlist " + " ".join(str(s) for s in params["sortlist"]))
    opts = list(params["flags"]) + [f"{k}:{v}" for k, v in sorted(params["options"].items())]
    if opts:
        lines.append("options " + " ".join(opts))
    return "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    if not as_bool(ctx.cfg.get("manage_resolv_conf"), False):
        return
    settings = ctx.cfg.get("resolv_conf")
    if not isinstance(settings, dict) or not settings:
        raise ModuleError("resolv_conf: manage_resolv_conf is true but no resolv_conf settings are given")
    params = parameters(settings)
    override = next((f"{d}/resolv.conf.tmpl" for d in USER_TEMPLATE_DIRS[:1]
                     if ctx.root.isfile(f"{d}/resolv.conf.tmpl")), None)
    if override:
        try:
            content = render(ctx.root.read_text(override), params, override)
        except TemplateError as e:
            raise ModuleError(f"resolv_conf: {e}") from None
    else:
        content = builtin_layout(params)
    if ctx.root.islink(RESOLV_CONF):
        ctx.warn(f"{RESOLV_CONF} was a link (systemd-resolved?); replaced by a file")
    ctx.root.write(RESOLV_CONF, content, mode=0o644)
