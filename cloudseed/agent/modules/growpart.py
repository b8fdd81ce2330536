"""growpart: grow the partitions of the root filesystem (and others listed) to fill their disk.

``mode: auto`` grows MBR and GPT partitions itself (``cloudseed.agent.modules._partitions``: the same new
end as cloud-utils' growpart, in milliseconds instead of seconds of ``sfdisk`` runs) and falls back
to the ``growpart`` command for other layouts; ``mode: growpart`` always uses the command. Every
boot: when there is nothing to grow that is known at once. Skipped on an offline root, with
``mode: off``, or when ``/etc/growroot-disabled`` exists.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._mount_table import MountInfoError, block_device, disk_and_partition, mount_of
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.values import as_bool, get_list

MODULE = ModuleSpec(
    name="growpart", stage=STAGE_INIT, frequency=PER_BOOT,
    title="Grow partitions to fill their disk",
    schema={"properties": {"growpart": {
        "type": "object",
        "properties": {
            "mode": {"oneOf": [{"type": "string", "enum": ["auto", "growpart", "off"]},
                               {"type": "boolean", "enum": [False], "deprecated": True,
                                "deprecated_version": "22.3", "deprecated_description": "Use 'off'."}]},
            "devices": {"type": "array", "items": {"type": "string"}},
            "ignore_growroot_disabled": {"type": "boolean"},
        },
        "additionalProperties": False,
    }}},
    examples=(
        """\
#cloud-config
# What happens without any configuration: grow the partition holding / to the end of its disk.
growpart:
  mode: auto
  devices: [/]
  ignore_growroot_disabled: false
""",
        """\
#cloud-config
# Grow the partitions under / and /srv, even when /etc/growroot-disabled exists.
growpart:
  mode: growpart
  devices: [/, /srv]
  ignore_growroot_disabled: true
""",
        """\
#cloud-config
# Never grow partitions.
growpart:
  mode: "off"
""",
    ),
)


def partition_of(path: str) -> tuple[str, int]:
    """``("/dev/vda", 1)`` for a mount point or a partition device path."""
    if path.startswith("/dev/"):
        import os

        name = os.path.basename(os.path.realpath(path))
    else:
        dev_number, _fstype, _source = mount_of(path)
        name = block_device(dev_number)
    disk, number = disk_and_partition(name)
    return f"/dev/{disk}", number


def handle(ctx: ModuleContext) -> None:
    settings = ctx.cfg.get("growpart")
    settings = settings if isinstance(settings, dict) else {}
    mode = settings.get("mode", "auto")
    if mode in (False, "off", "false"):
        ctx.log.info("growpart is switched off")
        return
    if mode not in ("auto", "growpart"):
        raise ModuleError(f"growpart.mode: {mode!r} is not one of auto, growpart, off")
    if ctx.root.exists("/etc/growroot-disabled") and not as_bool(settings.get("ignore_growroot_disabled")):
        ctx.log.info("/etc/growroot-disabled exists; not growing partitions")
        return
    if not ctx.root.is_live:
        ctx.log.info("offline root: partitions are not grown")
        return
    tool = ctx.root.which("growpart")
    if tool is None and mode == "growpart":
        raise ModuleError("growpart.mode: growpart is not installed (cloud-guest-utils)")
    problems = []
    for path in get_list(settings, "devices") if "devices" in settings else ["/"]:
        try:
            disk, number = partition_of(str(path))
        except MountInfoError as e:
            problems.append(f"growpart.devices: {path}: {e}")
            continue
        if mode == "auto":
            problem = _grow_natively(ctx, disk, number, str(path), tool)
        else:
            problem = _grow_with_command(ctx, tool, disk, number, str(path))
        if problem:
            problems.append(f"growpart.devices: {path}: {problem}")
    if problems:
        raise ModuleError("; ".join(problems))


def _grow_natively(ctx: ModuleContext, disk: str, number: int, path: str, tool: str | None) -> str | None:
    from cloudseed.agent.modules import _partitions as partitions

    try:
        growth = partitions.grow(disk, number)
    except partitions.Unsupported as e:
        if tool is None:
            ctx.log.info("%s: %s, and the growpart command is not installed; not grown", disk, e)
            return None
        ctx.log.info("%s: %s; using the growpart command", disk, e)
        return _grow_with_command(ctx, tool, disk, number, path)
    except partitions.PartitionError as e:
        return str(e)
    except OSError as e:
        return f"{disk} partition {number}: {e.strerror or e} (a reboot applies a table already written)"
    if growth.changed:
        ctx.log.info("grew %s partition %d (%s) from %d to %d sectors", disk, number, path,
                     growth.old_end - growth.start + 1, growth.new_end - growth.start + 1)
    else:
        ctx.log.info("%s partition %d: %s", disk, number, growth.reason)
    return None


def _grow_with_command(ctx: ModuleContext, tool: str, disk: str, number: int, path: str) -> str | None:
    proc = ctx.root.run([tool, disk, str(number)], check=False)
    if proc.returncode == 0:
        ctx.log.info("grew %s partition %d (%s)", disk, number, path)
    elif proc.returncode == 1 and "NOCHANGE" in proc.stdout:
        ctx.log.info("%s partition %d already fills the disk", disk, number)
    else:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        return f"growpart {disk} {number} exited {proc.returncode}" + (f": {detail[-1]}" if detail else "")
    return None
