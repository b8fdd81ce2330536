"""byobu: launch byobu at login, for the default user and/or system-wide (``byobu_by_default``).

``enable-user`` / ``disable-user`` run ``byobu-launcher-install`` / ``-uninstall`` as the default
user; ``enable-system`` / ``disable-system`` set byobu's debconf question
``byobu/launch-by-default`` and reconfigure the package; ``enable`` / ``disable`` do the system
part (``disable``: both). ``user`` and ``system`` mean ``enable-user`` and ``enable-system``. byobu
must be in the image: this module runs in the config stage, before ``packages`` are installed.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

VALUES = ("enable-user", "enable-system", "enable", "disable-user", "disable-system", "disable", "user", "system")

MODULE = ModuleSpec(
    name="byobu", stage=STAGE_CONFIG, activate_by=("byobu_by_default",), distros=("debian",),
    title="Launch byobu at login",
    schema={"properties": {"byobu_by_default": {
        "type": "string", "enum": list(VALUES),
        "description": "Whether byobu starts at login: for the default user (-user), system-wide (-system), "
                       "or both ('disable' only).",
    }}},
    examples=(
        """\
#cloud-config
byobu_by_default: enable-user
""",
        """\
#cloud-config
byobu_by_default: disable-system
""",
    ),
)


def plan(value: str) -> tuple[bool, bool, bool]:
    """(enable, for the default user, system-wide) for a ``byobu_by_default`` value."""
    value = {"user": "enable-user", "system": "enable-system"}.get(value, value)
    enable = value.startswith("enable")
    user = value.endswith("-user") or value == "disable"
    system = value.endswith("-system") or value in ("enable", "disable") or enable
    return enable, user, system


def handle(ctx: ModuleContext) -> None:
    value = ctx.cfg.get("byobu_by_default")
    if value not in VALUES:
        raise ModuleError(f"byobu_by_default: expected one of {', '.join(VALUES)}")
    enable, for_user, system_wide = plan(value)
    if not ctx.root.which("byobu"):
        raise ModuleError("byobu_by_default: byobu is not installed in the image (packages are installed "
                          "later, in the final stage: include byobu in the image)")
    problems = []
    if for_user:
        problems += _for_default_user(ctx, "install" if enable else "uninstall")
    if system_wide:
        problems += _system_wide(ctx, enable)
    if problems:
        raise ModuleError("; ".join(problems))
    ctx.log.info("byobu at login: %s", value)


def _for_default_user(ctx: ModuleContext, action: str) -> list[str]:
    from cloudseed.agent.users import default_user_name

    user = default_user_name(ctx.cfg, ctx.distro.default_user())
    if not user:
        return [f"byobu_by_default: no default user to {action} byobu for"]
    entry = ctx.root.user_entry(user)
    if entry is None:
        return [f"byobu_by_default: the default user {user!r} does not exist"]
    home = entry[5] if len(entry) > 5 else "/"
    try:
        ctx.root.run(["runuser", "-u", user, "--", "env", f"HOME={home}", f"USER={user}", f"LOGNAME={user}",
                      f"byobu-launcher-{action}"], cwd=home if ctx.root.isdir(home) else "/")
    except CommandError as e:
        return [f"byobu_by_default: byobu-launcher-{action} as {user}: {e}"]
    return []


def _system_wide(ctx: ModuleContext, enable: bool) -> list[str]:
    answer = "true" if enable else "false"
    try:
        ctx.root.run(["debconf-set-selections"], input=f"byobu byobu/launch-by-default boolean {answer}\n")
        ctx.root.run(["dpkg-reconfigure", "--frontend=noninteractive", "byobu"],
                     env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    except CommandError as e:
        return [f"byobu_by_default: setting byobu system-wide: {e}"]
    return []
