"""grub_dpkg: tell the grub packages which disk to install the boot loader to (Debian family).

The image was built on another disk than the one it boots from, so grub-pc's debconf answer
``grub-pc/install_devices`` must name this instance's boot disk, or the next grub upgrade asks
(or fails). The disk is the one holding ``/boot`` (``grub-probe``), named by its stable
``/dev/disk/by-id`` link when it has one; ``grub-pc/install_devices`` and
``grub-pc/install_devices_empty`` (and ``grub-efi/install_devices``) may be given instead. Where
grub is not installed there is nothing to tell, and the module returns at once (cloud-init runs
debconf regardless: about 1.5 s per boot in an emulated VM).
"""

from __future__ import annotations

import os

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError
from cloudseed.core.values import as_bool

MODULE = ModuleSpec(
    name="grub_dpkg", stage=STAGE_CONFIG, distros=("debian",),
    title="Point grub's debconf answers at this instance's boot disk",
    schema={"properties": {
        "grub_dpkg": {
            "type": "object",
            "additionalProperties": False,
            "description": "grub-pc debconf answers; the boot disk is detected when not given.",
            "properties": {
                "enabled": {"type": "boolean", "default": True, "description": "Set the answers at all."},
                "grub-pc/install_devices": {"type": "string",
                                            "description": "Disk(s) to install grub to (comma separated)."},
                "grub-pc/install_devices_empty": {
                    "oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["true", "false"], "deprecated": True,
                                                       "deprecated_version": "22.3",
                                                       "deprecated_description": "Use a boolean."}],
                    "description": "Whether installing to no disk is intended (default: when no disk is known)."},
                "grub-efi/install_devices": {"type": "string", "description": "EFI partition(s) for grub-efi."},
            },
        },
        "grub-dpkg": {"type": "object", "deprecated": True,
                      "deprecated_description": "use grub_dpkg (the same settings)"},
    }},
    examples=(
        """\
#cloud-config
grub_dpkg:
  enabled: true
  grub-pc/install_devices: /dev/disk/by-id/virtio-boot-disk
  grub-pc/install_devices_empty: false
""",
        """\
#cloud-config
# Leave grub's answers as the image has them.
grub_dpkg:
  enabled: false
""",
    ),
)


def grub_installed(ctx: ModuleContext) -> bool:
    return bool(ctx.root.which("grub-install") or ctx.root.which("grub-probe"))


def boot_disk(ctx: ModuleContext) -> str:
    """The disk holding /boot, as its first /dev/disk/by-id link ('' when it cannot be told)."""
    if not ctx.root.is_live:
        return ""   # the disk of an offline image is not the instance's disk
    try:
        disk = ctx.root.run(["grub-probe", "-t", "disk", "/boot"], timeout=30).stdout.strip()
    except CommandError as e:
        ctx.log.info("grub-probe found no boot disk: %s", e)
        return ""
    if not disk.startswith("/dev/") or not os.path.exists(disk):
        return ""
    real = os.path.realpath(disk)
    by_id = "/dev/disk/by-id"
    links = sorted(f"{by_id}/{name}" for name in ctx.root.listdir(by_id)
                   if os.path.realpath(f"{by_id}/{name}") == real)
    return links[0] if links else disk


def handle(ctx: ModuleContext) -> None:
    section = ctx.cfg.get("grub_dpkg", ctx.cfg.get("grub-dpkg")) or {}
    if not isinstance(section, dict):
        raise ModuleError("grub_dpkg: expected a mapping")
    if not as_bool(section.get("enabled"), default=True):
        ctx.log.info("grub_dpkg disabled by grub_dpkg.enabled")
        return
    if not grub_installed(ctx):
        ctx.log.info("grub is not installed: no debconf answers to set")
        return
    devices = section.get("grub-pc/install_devices")
    if devices is None:
        devices = boot_disk(ctx)
    empty = section.get("grub-pc/install_devices_empty")
    empty = (not devices) if empty is None else as_bool(empty)
    answers = (f"grub-pc grub-pc/install_devices string {devices}\n"
               f"grub-pc grub-pc/install_devices_empty boolean {str(empty).lower()}\n")
    efi = section.get("grub-efi/install_devices")
    if efi:
        answers += f"grub-pc grub-efi/install_devices string {efi}\n"
    if any(c in str(devices) + str(efi or "") for c in "\n\r"):
        raise ModuleError("grub_dpkg: a device name contains a line break")
    try:
        ctx.root.run(["debconf-set-selections"], input=answers, timeout=60)
    except CommandError as e:
        raise ModuleError(f"grub_dpkg: debconf-set-selections: {e}") from None
    ctx.log.info("grub-pc install devices: %s", devices or "(none)")
