"""ubuntu_drivers: install NVIDIA's driver with ``ubuntu-drivers`` once its licence is accepted. Ubuntu only.

``drivers: {nvidia: {license-accepted: true, version: "535"}}``. Nothing happens unless the licence
is accepted. The debconf template ``linux/nvidia/latelink`` (default true) is loaded through
``debconf-communicate`` so ``linux-restricted-modules`` links the modules without asking; then
``ubuntu-drivers install --gpgpu nvidia[:VERSION]`` runs. ``ubuntu-drivers-common`` is installed
through the package manager when ``ubuntu-drivers`` is missing.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import reason as tool_reason
from cloudseed.core.root import CommandError

TEMPLATE = """\
Template: linux/nvidia/latelink
Type: boolean
Default: true
Description: Late-link NVIDIA kernel modules?
 Set by cloudseed because drivers.nvidia.license-accepted is true: the NVIDIA
 kernel modules are linked when the driver package is installed.
"""
TEMPLATE_DIR = "/var/lib/cloudseed/tmp-ubuntu-drivers"

MODULE = ModuleSpec(
    name="ubuntu_drivers", stage=STAGE_FINAL, activate_by=("drivers",), distros=("ubuntu",),
    title="Install third-party drivers with ubuntu-drivers",
    schema={"properties": {"drivers": {
        "type": "object", "additionalProperties": False,
        "description": "Third-party drivers Ubuntu's ubuntu-drivers installs.",
        "properties": {"nvidia": {
            "type": "object", "required": ["license-accepted"], "additionalProperties": False,
            "description": "NVIDIA's GPU driver.",
            "properties": {
                "license-accepted": {"type": "boolean",
                                     "description": "True accepts NVIDIA's driver licence; nothing is installed "
                                                    "otherwise."},
                "version": {"type": "string",
                            "description": "The driver series to install (\"535\"); the newest when not given."},
            },
        }},
    }}},
    examples=(
        """\
#cloud-config
drivers:
  nvidia:
    license-accepted: true
    version: "535"
""",
    ),
)


def command(version: str | None) -> list[str]:
    return ["ubuntu-drivers", "install", "--gpgpu", f"nvidia:{version}" if version else "nvidia"]


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked, install

    cfg = checked(ctx, "drivers", MODULE.schema)
    nvidia = cfg.get("nvidia") or {}
    if nvidia.get("license-accepted") is not True:
        ctx.log.info("drivers.nvidia.license-accepted is not true: no NVIDIA driver installed")
        return
    version = nvidia.get("version") or None
    if not ctx.root.which("ubuntu-drivers"):
        install(ctx, "drivers", ["ubuntu-drivers-common"])
    _load_template(ctx)
    argv = command(version)
    try:
        ctx.root.run(argv, input=b"", timeout=3600)
    except CommandError as e:
        output = e.stdout + e.stderr
        if "invalid choice: 'install'" in output:
            raise ModuleError("drivers.nvidia: this ubuntu-drivers is too old to install drivers") from None
        if "No drivers found for installation" in output:
            raise ModuleError("drivers.nvidia: ubuntu-drivers found no NVIDIA driver for this machine") from None
        raise ModuleError(f"drivers.nvidia: {' '.join(argv)} failed: {tool_reason(e)}") from None
    ctx.log.info("drivers.nvidia: installed %s", argv[-1])


def _load_template(ctx: ModuleContext) -> None:
    if not ctx.root.which("debconf-communicate"):
        raise ModuleError("drivers.nvidia: debconf-communicate is not on the target (install debconf)")
    ctx.root.makedirs(TEMPLATE_DIR, mode=0o700)
    path = f"{TEMPLATE_DIR}/nvidia.template"
    try:
        ctx.root.write(path, TEMPLATE, mode=0o600)
        proc = ctx.root.run(["debconf-communicate", "cloudseed"], input=f"X_LOADTEMPLATEFILE {path}\n",
                            timeout=120)
    except CommandError as e:
        raise ModuleError(f"drivers.nvidia: loading the debconf template failed: {tool_reason(e)}") from None
    finally:
        ctx.root.remove_tree(TEMPLATE_DIR)
    reply = proc.stdout.strip().split(" ", 1)[0] if proc.stdout.strip() else "0"
    if reply != "0":
        raise ModuleError(f"drivers.nvidia: debconf refused the template: {proc.stdout.strip()[:200]}")
