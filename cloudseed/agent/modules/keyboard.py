"""keyboard: set the keyboard layout (console and X11) from ``keyboard: {layout, model, variant, options}``.

Debian family: ``/etc/default/keyboard`` (read by console-setup and X); RHEL family:
``/etc/vconsole.conf`` (its ``XKB*`` settings) and ``/etc/X11/xorg.conf.d/00-keyboard.conf``. The
files are written directly, so an offline root gets them too; on a running Debian system
console-setup is restarted so the console uses the new layout at once. Values are checked against
the characters XKB names use, since these files are read by shells.
"""

from __future__ import annotations

import re

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

DEFAULT_MODEL = "pc105"
_XKB_VALUE = re.compile(r"^[A-Za-z0-9_,:()+.-]*$")

MODULE = ModuleSpec(
    name="keyboard", stage=STAGE_CONFIG, activate_by=("keyboard",), distros=("debian", "rhel"),
    title="Set the keyboard layout",
    schema={"properties": {"keyboard": {
        "type": "object",
        "description": "Keyboard configuration (X keyboard extension names).",
        "required": ["layout"],
        "additionalProperties": False,
        "properties": {
            "layout": {"type": "string", "description": "Layout, such as 'us' or 'de'."},
            "model": {"type": "string", "description": f"Keyboard model (default {DEFAULT_MODEL!r})."},
            "variant": {"type": "string", "description": "Layout variant, such as 'nodeadkeys'."},
            "options": {"type": "string", "description": "XKB options, such as 'compose:rwin'."},
        },
    }}},
    examples=(
        """\
#cloud-config
keyboard:
  layout: us
""",
        """\
#cloud-config
# A German layout without dead keys, the right Windows key as Compose.
keyboard:
  layout: de
  model: pc105
  variant: nodeadkeys
  options: compose:rwin
""",
    ),
)


def settings(cfg: dict) -> dict[str, str]:
    """The four XKB settings of ``keyboard:``; ModuleError naming the key when one is unusable."""
    section = cfg.get("keyboard")
    if not isinstance(section, dict):
        raise ModuleError("keyboard: expected a mapping with at least 'layout'")
    out = {}
    for key, default in (("layout", None), ("model", DEFAULT_MODEL), ("variant", ""), ("options", "")):
        value = section.get(key, default)
        if value is None:
            raise ModuleError("keyboard.layout: missing (the layout to use, such as 'us')")
        if not isinstance(value, str) or not _XKB_VALUE.match(value):
            raise ModuleError(f"keyboard.{key}: expected an XKB name (letters, digits and _,:()+.-)")
        out[key] = value
    return out


def handle(ctx: ModuleContext) -> None:
    xkb = settings(ctx.cfg)
    if ctx.distro.family == "rhel":
        _write_rhel(ctx, xkb)
    else:
        _write_debian(ctx, xkb)
    ctx.log.info("keyboard layout set to %s (model %s%s)", xkb["layout"], xkb["model"],
                 f", variant {xkb['variant']}" if xkb["variant"] else "")


def _write_debian(ctx: ModuleContext, xkb: dict[str, str]) -> None:
    from cloudseed.agent.distros.debian import update_shell_assignments

    values = {"XKBMODEL": f'"{xkb["model"]}"', "XKBLAYOUT": f'"{xkb["layout"]}"',
              "XKBVARIANT": f'"{xkb["variant"]}"', "XKBOPTIONS": f'"{xkb["options"]}"'}
    if not ctx.root.exists("/etc/default/keyboard"):
        values["BACKSPACE"] = '"guess"'
    update_shell_assignments(ctx.root, "/etc/default/keyboard", values, header="# KEYBOARD CONFIGURATION FILE")
    if any(ctx.root.exists(f"{d}/console-setup.service") for d in ("/lib/systemd/system", "/usr/lib/systemd/system")):
        ctx.distro.manage_service("restart", "console-setup")


def _write_rhel(ctx: ModuleContext, xkb: dict[str, str]) -> None:
    from cloudseed.agent.distros.debian import update_shell_assignments

    update_shell_assignments(ctx.root, "/etc/vconsole.conf", {
        "XKBLAYOUT": xkb["layout"], "XKBMODEL": xkb["model"],
        "XKBVARIANT": xkb["variant"], "XKBOPTIONS": xkb["options"]})
    options = "".join(f'        Option "{name}" "{xkb[key]}"\n' for name, key in (
        ("XkbLayout", "layout"), ("XkbModel", "model"), ("XkbVariant", "variant"), ("XkbOptions", "options"))
        if xkb[key])
    ctx.root.makedirs("/etc/X11/xorg.conf.d", mode=0o755)
    ctx.root.write("/etc/X11/xorg.conf.d/00-keyboard.conf",
                   'Section "InputClass"\n        Identifier "system-keyboard"\n        MatchIsKeyboard "on"\n'
                   f"{options}EndSection\n", mode=0o644)
