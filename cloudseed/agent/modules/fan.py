"""fan: Ubuntu FAN networking (``fan: {config, config_path}``). Ubuntu only.

The configuration text is written (atomically, 0644) to ``config_path`` (default
``/etc/network/fan``); ``ubuntu-fan`` is installed through the package manager when ``fanctl`` is
missing; the ``ubuntu-fan`` service is enabled and, where systemd runs in the root, restarted so
the new configuration takes effect. A failing restart fails the module with the unit to look at.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec

SERVICE = "ubuntu-fan"
DEFAULT_PATH = "/etc/network/fan"

MODULE = ModuleSpec(
    name="fan", stage=STAGE_FINAL, activate_by=("fan",), distros=("ubuntu",),
    title="Configure Ubuntu FAN networking",
    schema={"properties": {"fan": {
        "type": "object", "required": ["config"], "additionalProperties": False,
        "description": "Ubuntu FAN overlay networking: the configuration file ubuntu-fan reads.",
        "properties": {
            "config": {"type": "string",
                       "description": "The whole FAN configuration, as the text of the file (one mapping a line)."},
            "config_path": {"type": "string", "default": DEFAULT_PATH,
                            "description": f"Where the configuration is written. Default: ``{DEFAULT_PATH}``."},
        },
    }}},
    examples=(
        """\
#cloud-config
fan:
  config: |
    # fan 240
    10.0.0.0/8 eth0/16 dhcp
    10.0.0.0/8 eth1/16 dhcp off
    # fan 241
    241.0.0.0/8 eth0/16 dhcp
  config_path: /etc/network/fan
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked, enable_service, install, restart_service

    cfg = checked(ctx, "fan", MODULE.schema)
    text = cfg.get("config") or ""
    if not text.strip():
        ctx.log.info("fan: no configuration text; nothing to do")
        return
    path = cfg.get("config_path") or DEFAULT_PATH
    if not path.startswith("/"):
        raise ModuleError("fan.config_path: expected an absolute path")
    if not ctx.root.which("fanctl"):
        install(ctx, "fan", ["ubuntu-fan"])
    ctx.root.write(path, text if text.endswith("\n") else text + "\n", mode=0o644)
    ctx.log.info("fan: configuration written to %s", path)
    enable_service(ctx, "fan", SERVICE)
    restart_service(ctx, "fan", SERVICE)
