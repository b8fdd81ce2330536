"""update_hostname: keep the hostname in line with the config at every boot, unless the admin changed it.

The name set last time is kept in ``<data>/data/previous-hostname``. When the system's hostname
file still holds that name (or nothing), the new name is written and applied; when someone
changed the file since, their name is kept. ``preserve_hostname: true`` disables this.
"""

from __future__ import annotations

from cloudseed.agent.hostnames import HostnameError, choose, resolve
from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules.set_hostname import HOSTNAME_SCHEMA, apply_hostname, previous_hostname_file
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.values import as_bool

MODULE = ModuleSpec(
    name="update_hostname", stage=STAGE_INIT, frequency=PER_BOOT,
    title="Update the hostname at every boot",
    schema={"properties": HOSTNAME_SCHEMA},
    examples=(
        """\
#cloud-config
hostname: web01
fqdn: web01.example.org
prefer_fqdn_over_hostname: false
""",
        """\
#cloud-config
# Leave the hostname alone at every boot.
preserve_hostname: true
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    if as_bool(ctx.cfg.get("preserve_hostname"), False):
        ctx.log.info("preserve_hostname is true: hostname left as it is")
        return
    distro = ctx.distro
    system = distro.read_hostname()
    try:
        names = resolve(ctx.cfg, ctx.datasource, system)
    except HostnameError as e:
        raise ModuleError(str(e)) from None
    chosen = choose(names, as_bool(ctx.cfg.get("prefer_fqdn_over_hostname"), distro.prefer_fqdn))
    previous = ctx.root.read_text(previous_hostname_file(ctx), default="").strip()
    if system and previous and system != previous:
        ctx.log.info("%s holds %s, not %s as set last: keeping the administrator's name",
                     distro.hostname_file, system, previous)
        return
    if system != chosen:
        apply_hostname(ctx, chosen)
        ctx.log.info("hostname updated to %s", chosen)
    if previous != chosen:
        ctx.root.write(previous_hostname_file(ctx), chosen + "\n", mode=0o644)
