"""install_hotplug: a udev rule so a network device added later is configured (``updates.network.when: [hotplug]``).

When ``hotplug`` is among ``updates.network.when`` and the datasource can describe devices added
after boot (as in cloud-init: OpenStack, ConfigDrive, Ec2), this writes
``/usr/lib/cloudseed/hook-hotplug`` (0755) and the rule
``/etc/udev/rules.d/90-cloudseed-hook-hotplug.rules``, which runs the hook for every ``add`` and
``remove`` of a ``net`` device; the hook hands the event to ``cloudseed hotplug-hook --subsystem
net handle --devpath DEVPATH --udevaction ACTION`` outside udev's time limit (``systemd-run``
where systemd runs). udev rereads its rules (``udevadm control --reload-rules``) on a live system.
When hotplug is not wanted (or not possible with this datasource) an earlier rule is removed;
hotplug asked for with a datasource that cannot do it is a warning in the status. The module
runs whether or not the key is set, so that removing the setting removes the rule.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

RULE = "/etc/udev/rules.d/90-cloudseed-hook-hotplug.rules"
HOOK = "/usr/lib/cloudseed/hook-hotplug"
AGENT = "/usr/bin/cloudseed"
# the datasources whose metadata describes network devices added after boot (cloud-init 22.4's list)
HOTPLUG_DATASOURCES = ("configdrive", "openstack", "ec2")
EVENTS = ["boot-new-instance", "boot-legacy", "boot", "hotplug"]

RULE_TEXT = f"""\
# Written by cloudseed (install_hotplug) because updates.network.when has hotplug.
# A network device added or removed is handed to `cloudseed hotplug-hook`.
ACTION!="add|remove", GOTO="cloudseed_hotplug_end"
SUBSYSTEM=="net", RUN+="{HOOK}"
LABEL="cloudseed_hotplug_end"
"""

HOOK_TEXT = f"""\
#!/bin/sh
# Written by cloudseed (install_hotplug): run by udev for a network device added or removed.
# The work runs outside udev's worker (its time limit would kill a DHCP wait).
[ -n "$DEVPATH" ] && [ -n "$ACTION" ] || exit 0
case "$ACTION" in add|remove) ;; *) exit 0 ;; esac
set -- {AGENT} hotplug-hook --subsystem "${{SUBSYSTEM:-net}}" handle --devpath "$DEVPATH" --udevaction "$ACTION"
if [ -d /run/systemd/system ] && command -v systemd-run >/dev/null 2>&1; then
    exec systemd-run --no-block --quiet --collect "$@"
fi
"$@" </dev/null >/dev/null 2>&1 &
exit 0
"""

MODULE = ModuleSpec(
    name="install_hotplug", stage=STAGE_FINAL,
    title="Configure network devices added after boot (udev hotplug)",
    schema={"properties": {"updates": {
        "type": "object", "additionalProperties": False,
        "description": "When configuration is applied again after the first boot.",
        "properties": {"network": {
            "type": "object", "required": ["when"], "additionalProperties": False,
            "description": "When the network configuration is applied.",
            "properties": {"when": {
                "type": "array", "items": {"type": "string", "enum": EVENTS},
                "description": "``boot-new-instance``: on a new instance (always); ``boot``/``boot-legacy``: "
                               "every boot; ``hotplug``: when a network device is added or removed (needs a "
                               "datasource that describes it: OpenStack, ConfigDrive, Ec2).",
            }},
        }},
    }}},
    examples=(
        """\
#cloud-config
updates:
  network:
    when: [boot, hotplug]
""",
    ),
)


def hotplug_wanted(cfg: dict) -> bool:
    updates = cfg.get("updates")
    network = updates.get("network") if isinstance(updates, dict) else None
    when = network.get("when") if isinstance(network, dict) else None
    if when is not None and not isinstance(when, list):
        raise ModuleError("updates.network.when: expected a list of events")
    return isinstance(when, list) and "hotplug" in when


def hotplug_supported(datasource) -> str | None:
    """Why ``datasource`` cannot tell about devices added later (None: it can)."""
    if datasource is None:
        return "no datasource was found"
    declared = getattr(datasource, "supports_hotplug", None)
    name = str(getattr(datasource, "name", "?"))
    if declared is True or (declared is None and name.lower() in HOTPLUG_DATASOURCES):
        return None
    return f"the {name} datasource does not describe network devices added after boot"


def handle(ctx: ModuleContext) -> None:
    if ctx.cfg.get("updates") is not None:
        from cloudseed.agent.modules._system_tools import checked

        checked(ctx, "updates", MODULE.schema)
    wanted = hotplug_wanted(ctx.cfg)
    why_not = hotplug_supported(ctx.datasource) if wanted else "not asked for"
    if why_not is not None:
        removed = [p for p in (RULE, HOOK) if ctx.root.remove(p)]
        if removed:
            _reload(ctx)
            ctx.log.info("install_hotplug: removed %s (%s)", ", ".join(removed), why_not)
        if wanted:
            ctx.warn(f"updates.network.when: hotplug not set up: {why_not}")
        return
    if not ctx.root.which("udevadm"):
        raise ModuleError("updates.network.when: hotplug needs udev, and udevadm is not on the target "
                          "(install udev)")
    ctx.root.makedirs("/usr/lib/cloudseed", mode=0o755)
    ctx.root.write(HOOK, HOOK_TEXT, mode=0o755)
    ctx.root.makedirs("/etc/udev/rules.d", mode=0o755)
    ctx.root.write(RULE, RULE_TEXT, mode=0o644)
    _reload(ctx)
    ctx.log.info("install_hotplug: %s installed", RULE)


def _reload(ctx: ModuleContext) -> None:
    """Have a running udev reread its rules (nothing to do in an offline root)."""
    if not ctx.root.is_live or not ctx.root.exists("/run/udev/control") or not ctx.root.which("udevadm"):
        return
    try:
        ctx.root.run(["udevadm", "control", "--reload-rules"], timeout=60)
    except CommandError as e:
        raise ModuleError(f"updates.network.when: udevadm control --reload-rules failed: {e}") from None
