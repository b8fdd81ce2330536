"""install_hotplug: a udev rule so a network device added later is configured (``updates.network.when: [hotplug]``).

When ``hotplug`` is among ``updates.network.when`` (or ``hotplug-hook enable`` was run) and the
datasource can describe devices added after boot (as in cloud-init 25.3: OpenStack, ConfigDrive,
Ec2, VMware, Hetzner), this writes ``/usr/lib/cloudseed/hook-hotplug`` (0755) and the rule
``/etc/udev/rules.d/90-cloudseed-hook-hotplug.rules``, which runs the hook for every ``add`` and
``remove`` of a ``net`` device (on Ec2, VMware and Hetzner only of that cloud's devices); the hook
hands the event to ``cloudseed hotplug-hook --subsystem net handle --devpath DEVPATH --udevaction
ACTION`` outside udev's time limit (``systemd-run``
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
# the datasources whose metadata describes network devices added after boot: cloud-init 22.4's
# (ConfigDrive, OpenStack, Ec2), then VMware (24.1) and Hetzner (25.3)
HOTPLUG_DATASOURCES = ("configdrive", "openstack", "ec2", "vmware", "hetzner")
# which devices of those clouds run the hook (as cloud-init 24.x-26.x filters them): Ec2's own NIC
# drivers, VMware's virtual NICs, Hetzner's private networks (MACs 86:...), so a container's veth
# never rewrites the network configuration
DEVICE_FILTERS = {
    "ec2": 'ENV{ID_NET_DRIVER}=="vif|ena|ixgbevf"',
    "vmware": 'ENV{ID_NET_DRIVER}=="e1000|e1000e|vlance|vmxnet2|vmxnet3|vrdma"',
    "hetzner": 'ATTR{address}=="86:*"',
}
# ``hotplug-hook enable`` (cloud-init 24.1): hotplug asked for on the running instance, not in user-data
ENABLED_FILE = "/var/lib/cloudseed/hotplug.enabled"
EVENTS = ["boot-new-instance", "boot-legacy", "boot", "hotplug"]


def rule_text(datasource_name: str) -> str:
    """The udev rule for hotplug with this datasource (its cloud's devices only, when it has a filter)."""
    device_filter = DEVICE_FILTERS.get(datasource_name.lower())
    lines = ["# Written by cloudseed (install_hotplug): hotplug is enabled (updates.network.when or",
             "# `hotplug-hook enable`). A network device added or removed is handed to `cloudseed hotplug-hook`.",
             'ACTION!="add|remove", GOTO="cloudseed_hotplug_end"']
    if device_filter:
        lines += [f'{device_filter}, GOTO="cloudseed_hotplug_hook"', 'GOTO="cloudseed_hotplug_end"',
                  'LABEL="cloudseed_hotplug_hook"']
    lines += [f'SUBSYSTEM=="net", RUN+="{HOOK}"', 'LABEL="cloudseed_hotplug_end"']
    return "\n".join(lines) + "\n"


RULE_TEXT = rule_text("")

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
                               "datasource that describes it: OpenStack, ConfigDrive, Ec2, VMware, Hetzner).",
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


def enabled_by_command(root) -> bool:
    """Whether ``hotplug-hook enable`` enabled network hotplug on this machine."""
    import json

    try:
        scopes = json.loads(root.read_text(ENABLED_FILE)).get("scopes", [])
    except (OSError, ValueError, AttributeError):
        return False
    return "network" in scopes if isinstance(scopes, list) else False


def install(root, datasource_name: str) -> None:
    """Write the hook and the rule for ``datasource_name`` and have udev reread its rules (ModuleError)."""
    if not root.which("udevadm"):
        raise ModuleError("updates.network.when: hotplug needs udev, and udevadm is not on the target "
                          "(install udev)")
    root.makedirs("/usr/lib/cloudseed", mode=0o755)
    root.write(HOOK, HOOK_TEXT, mode=0o755)
    root.makedirs("/etc/udev/rules.d", mode=0o755)
    root.write(RULE, rule_text(datasource_name), mode=0o644)
    _reload(root)


def handle(ctx: ModuleContext) -> None:
    if ctx.cfg.get("updates") is not None:
        from cloudseed.agent.modules._system_tools import checked

        checked(ctx, "updates", MODULE.schema)
    wanted = hotplug_wanted(ctx.cfg) or enabled_by_command(ctx.root)
    why_not = hotplug_supported(ctx.datasource) if wanted else "not asked for"
    if why_not is not None:
        removed = [p for p in (RULE, HOOK) if ctx.root.remove(p)]
        if removed:
            _reload(ctx.root)
            ctx.log.info("install_hotplug: removed %s (%s)", ", ".join(removed), why_not)
        if wanted:
            ctx.warn(f"updates.network.when: hotplug not set up: {why_not}")
        return
    install(ctx.root, str(getattr(ctx.datasource, "name", "")))
    ctx.log.info("install_hotplug: %s installed", RULE)


def _reload(root) -> None:
    """Have a running udev reread its rules (nothing to do in an offline root)."""
    if not root.is_live or not root.exists("/run/udev/control") or not root.which("udevadm"):
        return
    try:
        root.run(["udevadm", "control", "--reload-rules"], timeout=60)
    except CommandError as e:
        raise ModuleError(f"updates.network.when: udevadm control --reload-rules failed: {e}") from None
