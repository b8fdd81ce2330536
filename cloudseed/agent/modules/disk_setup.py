"""disk_setup: partition tables (``disk_setup``) and filesystems (``fs_setup``) on the instance's disks.

As in cloud-init, this one module owns both keys (and ``device_aliases``); its place in the
init stage is cloud-init's ``disk_setup``, before ``mounts``. Disks are named by path, by a
``device_aliases`` name, or by the datasource's block-device mapping (``ephemeral0``, ``swap``).

``disk_setup: {DISK: {table_type: mbr|gpt, layout: true|[percent or [percent, type], ...]|remove,
overwrite}}``: a table is written only on a whole-disk block device, only when the disk does not
already carry that layout, and only onto a disk with nothing on it (no table, no filesystem, no
partitions) unless ``overwrite: true``; ``layout: remove`` also needs ``overwrite: true``.

``fs_setup: [{device, filesystem, label, partition: auto|any|none|N, overwrite, replace_fs, cmd,
extra_opts}]``: ``device`` may be ``DISK.N`` (partition N). ``partition: N`` formats that
partition; ``auto`` reuses a filesystem of that type and label on the disk or else takes the first
partition without a filesystem (the disk itself when it has neither); ``any`` reuses any
filesystem of that type, and with ``replace_fs: TYPE`` formats the first one of TYPE; ``none``
formats the disk itself. A device that already holds a filesystem is formatted only with
``overwrite: true`` (or ``replace_fs``); one with the wanted type and label is kept. ``cmd``
(string: a shell command, or a list) replaces the mkfs command, with ``%(label)s``,
``%(filesystem)s`` and ``%(device)s`` filled in.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FORCE_FLAGS = {"ext2": "-F", "ext3": "-F", "ext4": "-F", "btrfs": "-f", "xfs": "-f", "reiserfs": "-f", "swap": "-f"}
_STRINGS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}

MODULE = ModuleSpec(
    name="disk_setup", stage=STAGE_INIT, activate_by=("disk_setup", "fs_setup"),
    title="Partition disks and make filesystems",
    schema={"properties": {
        "device_aliases": {"type": "object", "additionalProperties": {"type": "string"},
                           "description": "name: /dev/path, usable in disk_setup, fs_setup and mounts."},
        "disk_setup": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "table_type": {"type": "string", "enum": ["mbr", "gpt"]},
                "layout": {"oneOf": [
                    {"type": "string", "enum": ["remove"]}, {"type": "boolean"},
                    {"type": "array", "items": {"oneOf": [
                        {"type": "integer"},
                        {"type": "array", "items": {"type": ["integer", "string"]}, "minItems": 2, "maxItems": 2}]}}]},
                "overwrite": {"type": "boolean"},
            }}},
        "fs_setup": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "label": {"type": "string"}, "filesystem": {"type": "string"}, "device": {"type": "string"},
                "partition": {"oneOf": [{"type": "string", "pattern": r"^(auto|any|none|[0-9]+)$"},
                                        {"type": "integer", "minimum": 0}]},
                "overwrite": {"type": "boolean"}, "replace_fs": {"type": "string"},
                "extra_opts": _STRINGS, "cmd": _STRINGS,
            }}},
    }},
    examples=(
        "device_aliases:\n  my_alias: /dev/sdb\n  swap_disk: /dev/sdc\ndisk_setup:\n  my_alias:\n"
        "    table_type: gpt\n    layout: [50, 50]\n    overwrite: true\n  swap_disk:\n    table_type: gpt\n"
        "    layout: [[100, 82]]\n    overwrite: true\nfs_setup:\n  - label: fs1\n    filesystem: ext4\n"
        "    device: my_alias.1\n    cmd: mkfs -t %(filesystem)s -L %(label)s %(device)s\n  - label: fs2\n"
        "    device: my_alias.2\n    filesystem: ext4\n  - label: swap\n    device: swap_disk.1\n"
        "    filesystem: swap\n",
        "disk_setup:\n  ephemeral0:\n    table_type: mbr\n    layout: [[66, 83], [33, 82]]\n    overwrite: false\n"
        "fs_setup:\n  - label: data\n    filesystem: xfs\n    device: ephemeral0\n    partition: auto\n"
        "  - filesystem: swap\n    device: ephemeral0.2\n",
    ),
)


def _device(ctx: ModuleContext, name: str, where: str) -> str:
    """The /dev path for a disk name (alias, block-device mapping name, or path); ModuleError if none."""
    import os

    from cloudseed.agent import disks

    aliases = ctx.cfg.get("device_aliases") or {}
    if not isinstance(aliases, dict):
        raise ModuleError(f"device_aliases: expected a mapping of name to device, got {type(aliases).__name__}")
    target = str(aliases.get(name, name))
    if disks.is_meta_name(target) or target == "ephemeral":
        mapped = disks.mapped_device("ephemeral0" if target == "ephemeral" else target, ctx.datasource)
        if not mapped:
            raise ModuleError(f"{where}: {name!r} is not in the datasource's block-device mapping")
        target = mapped
    if not target.startswith("/"):
        target = f"/dev/{target}"
    host = ctx.root.path(target)
    if not os.path.exists(host):
        raise ModuleError(f"{where}: {target} does not exist")
    if not disks.is_block_device(host):
        raise ModuleError(f"{where}: {target} is not a block device")
    return os.path.realpath(target) if ctx.root.is_live else target


def partition_disk(ctx: ModuleContext, name: str, definition: Any) -> None:
    from cloudseed.agent.modules import _partition_tables as pt

    where = f"disk_setup.{name}"
    if not isinstance(definition, dict):
        raise ModuleError(f"{where}: expected a mapping (table_type, layout, overwrite), got {definition!r}")
    layout = definition.get("layout", False)
    if layout is False or layout is None:
        ctx.log.info("%s: no layout; not partitioned", where)
        return
    table_type = definition.get("table_type", "mbr")
    if table_type not in ("mbr", "gpt"):
        raise ModuleError(f"{where}.table_type: {table_type!r} is not mbr or gpt")
    overwrite = definition.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise ModuleError(f"{where}.overwrite: expected true or false, got {overwrite!r}")
    device = _device(ctx, name, where)
    if not pt.is_whole_disk(device):
        raise ModuleError(f"{where}: {device} is not a whole disk (a partition?)")
    try:
        facts = pt.probe(ctx.root, device)
        used = bool(facts.get("TYPE") or facts.get("PTTYPE") or pt.kernel_partitions(device))
        if layout == "remove":
            if not used:
                return
            if not overwrite:
                raise ModuleError(f"{where}.layout: remove would destroy what {device} holds; "
                                  "set overwrite: true to confirm")
            pt.wipe(ctx.root, device)
            pt.settle(ctx.root, device, 0)
            ctx.log.info("%s: removed the partition table and signatures of %s", where, device)
            return
        parts = pt.normalise_layout(layout, where)
        if pt.layout_matches(pt.current_types(ctx.root, device, table_type), parts, table_type):
            ctx.log.info("%s: %s already has this layout", where, device)
            return
        if used and not overwrite:
            holds = facts.get("PTTYPE") and f"a {facts['PTTYPE']} partition table" or \
                facts.get("TYPE") and f"a {facts['TYPE']} filesystem" or "partitions"
            ctx.warn(f"{where}: {device} holds {holds}; not partitioned (overwrite: true replaces it)")
            return
        if used:
            pt.wipe(ctx.root, device)
        pt.write_table(ctx.root, device, table_type, parts)
    except pt.LayoutError as e:
        raise ModuleError(f"{where}: {e}") from None
    except OSError as e:
        raise ModuleError(f"{where}: {device}: {e.strerror or e}") from None
    except ModuleError:
        raise
    except Exception as e:  # CommandError from sfdisk/sgdisk/wipefs
        raise ModuleError(f"{where}: partitioning {device} failed: {e}") from None
    ctx.log.info("%s: wrote a %s table with %d partition(s) on %s", where, table_type, len(parts), device)


def _candidates(device: str) -> list[str]:
    from cloudseed.agent.modules import _partition_tables as pt

    return [device] + pt.kernel_partitions(device)


def choose_target(ctx: ModuleContext, device: str, spec: dict[str, Any], where: str) -> str | None:
    """The node to format for ``spec``, or None when nothing is to be done (reported)."""
    from cloudseed.agent import disks
    from cloudseed.agent.modules import _partition_tables as pt

    partition = str(spec.get("partition", "any")).lower()
    fs_type, label = spec.get("filesystem"), spec.get("label") or ""
    overwrite, replace_fs = spec.get("overwrite", False) is True, spec.get("replace_fs")
    if partition.isdigit() or partition == "none":
        node = device
        if partition.isdigit() and partition != "0":
            node = disks.partition_path(device, partition) or ""
            if not node:
                raise ModuleError(f"{where}.partition: {device} has no partition {partition}")
        facts = pt.probe(ctx.root, node)
        have_type, have_label = facts.get("TYPE"), facts.get("LABEL", "")
        if have_type and have_type == fs_type and have_label == label and not overwrite:
            ctx.log.info("%s: %s already has %s labelled %r", where, node, fs_type, label)
            return None
        if (have_type or facts.get("PTTYPE")) and not overwrite and not (replace_fs and have_type == replace_fs):
            ctx.warn(f"{where}: {node} holds {have_type or facts.get('PTTYPE') + ' partition table'}; not formatted "
                     "(overwrite: true replaces it)")
            return None
        return node
    if partition not in ("auto", "any"):
        raise ModuleError(f"{where}.partition: {partition!r} is not auto, any, none or a number")
    match_label = partition == "auto"
    raw_used = False
    for index, node in enumerate(_candidates(device)):
        facts = pt.probe(ctx.root, node)
        have_type = facts.get("TYPE")
        if replace_fs and not match_label and have_type == replace_fs:
            return node
        if have_type and have_type == fs_type and (not match_label or facts.get("LABEL", "") == label):
            ctx.log.info("%s: %s already has %s; kept", where, node, fs_type)
            return None
        if index == 0:
            raw_used = bool(have_type or facts.get("PTTYPE"))
        else:
            raw_used = True
            if not have_type:
                return node
    if not raw_used:
        return device
    ctx.log.info("%s: no free partition on %s for %s", where, device, fs_type)
    return None


def make_filesystem(ctx: ModuleContext, index: int, spec: Any) -> None:
    import shlex

    from cloudseed.agent import disks
    from cloudseed.agent.modules import _partition_tables as pt
    from cloudseed.core.root import CommandError

    where = f"fs_setup[{index}]"
    if not isinstance(spec, dict):
        raise ModuleError(f"{where}: expected a mapping (device, filesystem, label...), got {spec!r}")
    spec = dict(spec)
    name = spec.get("device")
    if not isinstance(name, str) or not name:
        raise ModuleError(f"{where}.device: a device is required")
    base, number = disks.split_dotted(name)
    if number is not None and number.isdigit() and base:  # DISK.N: partition N (overrides partition)
        spec["partition"] = number
        name = base
    fs_type, cmd = spec.get("filesystem"), spec.get("cmd")
    if not fs_type and not cmd:
        raise ModuleError(f"{where}: give filesystem or cmd")
    device = _device(ctx, name, f"{where}.device")
    try:
        node = choose_target(ctx, device, spec, where)
    except pt.LayoutError as e:
        raise ModuleError(f"{where}: {e}") from None
    if node is None:
        return
    label = spec.get("label")
    if cmd:
        values = {"label": label, "filesystem": fs_type, "device": node}
        try:
            argv = ["sh", "-c", cmd % values] if isinstance(cmd, str) else [str(a) % values for a in cmd]
        except (KeyError, ValueError, TypeError) as e:
            raise ModuleError(f"{where}.cmd: cannot fill in {e}") from None
    else:
        tool = ctx.root.which(f"mkfs.{fs_type}") or ctx.root.which(f"mk{fs_type}")
        if tool is None:
            raise ModuleError(f"{where}.filesystem: no mkfs.{fs_type} on the target (install its tools, "
                              f"e.g. xfsprogs, btrfs-progs)")
        argv = [tool]
        if label:
            argv += ["-n" if fs_type in ("vfat", "fat") else "-L", str(label)]
        if (spec.get("overwrite") is True or spec.get("replace_fs") or node == device) and FORCE_FLAGS.get(fs_type):
            argv.append(FORCE_FLAGS[fs_type])
        opts = spec.get("extra_opts") or []
        argv += shlex.split(opts) if isinstance(opts, str) else [str(o) for o in opts]
        argv.append(node)
    try:
        ctx.root.run(argv)
    except CommandError as e:
        lines = [line.strip() for line in (e.stderr or e.stdout).splitlines() if line.strip()]
        raise ModuleError(f"{where}: {' '.join(argv)} exited {e.returncode}"
                          + (f": {lines[0]}" if lines else "")) from None
    ctx.log.info("%s: made %s%s on %s", where, fs_type or "a filesystem", f" labelled {label}" if label else "", node)


def handle(ctx: ModuleContext) -> None:
    problems: list[str] = []
    layouts = ctx.cfg.get("disk_setup")
    if layouts is not None:
        if not isinstance(layouts, dict):
            problems.append(f"disk_setup: expected a mapping of disk to layout, got {type(layouts).__name__}")
        else:
            for name, definition in layouts.items():
                try:
                    partition_disk(ctx, str(name), definition)
                except ModuleError as e:
                    problems.append(str(e))
    filesystems = ctx.cfg.get("fs_setup")
    if filesystems is not None:
        if not isinstance(filesystems, list):
            problems.append(f"fs_setup: expected a list of filesystems, got {type(filesystems).__name__}")
        else:
            for index, spec in enumerate(filesystems):
                try:
                    make_filesystem(ctx, index, spec)
                except ModuleError as e:
                    problems.append(str(e))
    if problems:
        raise ModuleError("; ".join(problems))
