"""set_hostname: give the instance its hostname (files and the running system) once per instance.

The name comes from ``fqdn``/``hostname`` in the config or the datasource's local-hostname
(see ``cloudseed.agent.hostnames``). ``preserve_hostname: true`` leaves the system alone;
``prefer_fqdn_over_hostname`` writes the FQDN; ``create_hostname_file: false`` does not create a
missing ``/etc/hostname``. What was set is recorded in ``<data>/data/set-hostname`` so that an
unchanged name is not re-applied.
"""

from __future__ import annotations

import json

from cloudseed.agent.hostnames import HostnameError, choose, resolve
from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.state import PER_INSTANCE
from cloudseed.core.values import as_bool

HOSTNAME_SCHEMA = {
    "hostname": {"type": "string", "description": "The short host name (or an FQDN)."},
    "fqdn": {"type": "string", "description": "The fully qualified domain name."},
    "prefer_fqdn_over_hostname": {"type": "boolean"},
    "preserve_hostname": {"type": "boolean"},
    "create_hostname_file": {"type": "boolean"},
}

MODULE = ModuleSpec(
    name="set_hostname", stage=STAGE_INIT, frequency=PER_INSTANCE,
    title="Set the hostname and FQDN",
    schema={"properties": HOSTNAME_SCHEMA},
    examples=(
        """\
#cloud-config
hostname: web01
fqdn: web01.example.org
""",
        """\
#cloud-config
# Use the FQDN as the system hostname.
fqdn: web01.example.org
prefer_fqdn_over_hostname: true
""",
        """\
#cloud-config
# Keep the hostname the image has.
preserve_hostname: true
""",
    ),
)


def record_file(ctx: ModuleContext) -> str:
    return f"{ctx.paths.data_dir}/data/set-hostname"


def previous_hostname_file(ctx: ModuleContext) -> str:
    return f"{ctx.paths.data_dir}/data/previous-hostname"


def apply_hostname(ctx: ModuleContext, name: str) -> None:
    """Write the hostname file (unless it must not be created) and set the running name."""
    distro = ctx.distro
    if not ctx.root.exists(distro.hostname_file) and not as_bool(ctx.cfg.get("create_hostname_file"), True):
        ctx.log.info("%s does not exist and create_hostname_file is false: not created", distro.hostname_file)
    else:
        distro.write_hostname(name)
    distro.apply_hostname_live(name)


def handle(ctx: ModuleContext) -> None:
    if as_bool(ctx.cfg.get("preserve_hostname"), False):
        ctx.log.info("preserve_hostname is true: hostname left as it is")
        return
    distro = ctx.distro
    try:
        names = resolve(ctx.cfg, ctx.datasource, distro.read_hostname())
    except HostnameError as e:
        raise ModuleError(str(e)) from None
    prefer = as_bool(ctx.cfg.get("prefer_fqdn_over_hostname"), distro.prefer_fqdn)
    chosen = choose(names, prefer)
    record = {"hostname": names.hostname, "fqdn": names.fqdn}
    try:
        previous = json.loads(ctx.root.read_text(record_file(ctx), default="{}"))
    except ValueError:
        previous = {}
    if previous == record and distro.read_hostname() == chosen:
        ctx.log.info("hostname %s already set", chosen)
        return
    apply_hostname(ctx, chosen)
    ctx.root.write(record_file(ctx), json.dumps(record) + "\n", mode=0o644)
    ctx.root.write(previous_hostname_file(ctx), chosen + "\n", mode=0o644)
    ctx.log.info("hostname set to %s (fqdn %s)", chosen, names.fqdn)
