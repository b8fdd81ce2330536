"""update_etc_hosts: ``manage_etc_hosts`` — render /etc/hosts from a template, or add the hostname.

``true`` (or ``template``): render the distro's template (``hosts.debian`` / ``hosts.redhat``,
overridable in ``/etc/cloudseed/templates``) with ``hostname`` and ``fqdn``. ``localhost``: make
sure the local address (127.0.1.1 on Debian, 127.0.0.1 on RHEL) names the FQDN and host, keeping
everything else in the file. ``false`` or absent: the file is left alone.
"""

from __future__ import annotations

from cloudseed.agent.hostnames import HostnameError, resolve, update_hosts_entry
from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_templates import TemplateError, render_named
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.values import as_bool

HOSTS_FILE = "/etc/hosts"

MODULE = ModuleSpec(
    name="update_etc_hosts", stage=STAGE_INIT, frequency=PER_BOOT,
    activate_by=("manage_etc_hosts",),
    title="Manage /etc/hosts",
    schema={"properties": {
        "manage_etc_hosts": {
            "oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["localhost"]},
                      {"type": "string", "enum": ["template"], "deprecated": True, "deprecated_version": "22.3",
                       "deprecated_description": "Use true."}],
            "description": "true/'template': render /etc/hosts from a template; 'localhost': add the "
                           "hostname to the local address; false: leave /etc/hosts alone.",
        },
        "fqdn": {"type": "string"},
        "hostname": {"type": "string"},
    }},
    examples=(
        """\
#cloud-config
# Render /etc/hosts from the template at every boot, with this name.
manage_etc_hosts: true
hostname: db02
fqdn: db02.example.org
""",
        """\
#cloud-config
# Only make sure the hostname resolves to a local address.
manage_etc_hosts: localhost
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    mode = ctx.cfg.get("manage_etc_hosts")
    if isinstance(mode, str) and mode.strip().lower() in ("template", "localhost"):
        mode = mode.strip().lower()
    elif isinstance(mode, (bool, str)) and as_bool(mode, False):
        mode = "template"
    elif mode in (False, None) or (isinstance(mode, str) and mode.strip().lower() in ("false", "no", "off")):
        ctx.log.info("manage_etc_hosts is false: /etc/hosts left alone")
        return
    else:
        raise ModuleError(f"manage_etc_hosts: {mode!r} is not one of true, false, 'template', 'localhost'")
    distro = ctx.distro
    try:
        names = resolve(ctx.cfg, ctx.datasource, distro.read_hostname())
    except HostnameError as e:
        raise ModuleError(str(e)) from None
    if mode == "template":
        try:
            content = render_named(ctx.root, distro.hosts_template,
                                   {"hostname": names.hostname, "fqdn": names.fqdn})
        except TemplateError as e:
            raise ModuleError(f"manage_etc_hosts: {e}") from None
        ctx.root.write(HOSTS_FILE, content if content.endswith("\n") else content + "\n", mode=0o644)
        ctx.log.info("rendered %s from template %s", HOSTS_FILE, distro.hosts_template)
        return
    current = ctx.root.read_text(HOSTS_FILE, default="")
    updated = update_hosts_entry(current, distro.localhost_ip, names.fqdn, names.hostname)
    if updated is None:
        ctx.log.info("%s already maps %s to %s", HOSTS_FILE, distro.localhost_ip, names.fqdn)
        return
    ctx.root.write(HOSTS_FILE, updated, mode=0o644, keep_mode=True)
    ctx.log.info("added %s %s to %s", distro.localhost_ip, names.fqdn, HOSTS_FILE)
