"""ubuntu_autoinstall: hand ``autoinstall:`` to Ubuntu's live installer (subiquity), checked first.

The installer reads the key itself; this module only checks that one of the installer snaps is
present and that the section has its required ``version``, so a mistake shows up in the status
instead of as an installer that quietly ignores it. Ubuntu only.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

INSTALLER_SNAPS = ("subiquity", "ubuntu-desktop-installer")

MODULE = ModuleSpec(
    name="ubuntu_autoinstall", stage=STAGE_CONFIG, activate_by=("autoinstall",), distros=("ubuntu",),
    title="Check autoinstall configuration for Ubuntu's live installer",
    schema={"properties": {"autoinstall": {
        "type": "object",
        "required": ["version"],
        "additionalProperties": True,
        "description": "Configuration for Ubuntu's live installer (subiquity), which reads it itself.",
        "properties": {"version": {"type": "integer", "description": "Autoinstall format version (1)."}},
    }}},
    examples=(
        """\
#cloud-config
autoinstall:
  version: 1
  identity:
    hostname: server1
    username: ubuntu
    password: "$6$exDY1mhS4KUYCE/2$zmn9ToZwTKLhCw.b4/b.ZRTIZM30JZ4QrOQ2aOXJ8yk96xpcCof0kxKwu"
""",
    ),
)


def installer_present(ctx: ModuleContext) -> str | None:
    """The name of the installer snap in the target, if one is installed."""
    if not ctx.root.which("snap"):
        return None
    try:
        listing = ctx.root.run(["snap", "list"], timeout=60).stdout
    except CommandError:
        return None
    names = {line.split()[0] for line in listing.splitlines()[1:] if line.split()}
    return next((snap for snap in INSTALLER_SNAPS if snap in names), None)


def handle(ctx: ModuleContext) -> None:
    section = ctx.cfg.get("autoinstall")
    if not isinstance(section, dict):
        raise ModuleError("autoinstall: expected a mapping (the installer's configuration)")
    if not isinstance(section.get("version"), int) or isinstance(section.get("version"), bool):
        raise ModuleError("autoinstall.version: missing or not an integer (use 1)")
    installer = installer_present(ctx)
    if installer is None:
        raise ModuleError(f"autoinstall: none of the installer snaps ({', '.join(INSTALLER_SNAPS)}) is "
                          "installed, so nothing will read it (autoinstall is for Ubuntu's live installer)")
    ctx.log.info("autoinstall configuration left for %s", installer)
