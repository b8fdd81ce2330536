"""mounts: fstab entries from cloud-config (``mounts``, ``mount_default_fields``) and a swap file (``swap``).

Each ``mounts`` entry is ``[fs_spec, fs_file, fs_vfstype, fs_mntops, fs_freq, fs_passno]``;
missing fields come from ``mount_default_fields``. ``fs_spec`` may be a short name (``sdc``,
``xvdb1``), ``<device or alias>.<partition>``, a ``device_aliases`` name, a name of the
datasource's block-device mapping (``ephemeral0``, ``swap``), ``LABEL=``/``UUID=`` or a network
source (``server:/export``); an entry without ``fs_file`` (``[swap]``, ``[swap, null]``) removes
that device's entries. ``ephemeral0`` on ``/mnt`` and the mapped ``swap`` are added by default
where the datasource maps them. Devices that do not exist get no line (reported).

Every line we write carries ``comment=cloudconfig`` in its options: the marker cloud-init uses,
so lines cloud-init wrote on an earlier boot are recognised too. A later run drops the marked
lines and writes its own; the image's lines are kept byte for byte, and a device the image's
fstab already names is left to it. The new fstab is written atomically and only when it changed.
On the running system: mount points are created, then ``swapon -a``, ``systemctl daemon-reload``
and ``mount -a``.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FSTAB = "/etc/fstab"
MARKER = "comment=cloudconfig"  # cloud-init's marker of the lines it owns; kept for compatibility
_SIZE_PATTERN = r"^([0-9]+)?\.?[0-9]+[BKMGT]B?$"
_FIELD = {"type": ["string", "integer", "null"]}

MODULE = ModuleSpec(
    name="mounts", stage=STAGE_INIT,
    title="Configure mount points (fstab) and a swap file",
    schema={"properties": {
        "mounts": {
            "type": "array",
            "description": "fstab entries: [fs_spec, fs_file, fs_vfstype, fs_mntops, fs_freq, fs_passno]; "
                           "an entry without fs_file removes that device's entries.",
            "items": {"type": "array", "items": _FIELD, "minItems": 1, "maxItems": 6},
        },
        "mount_default_fields": {
            "type": "array", "items": _FIELD, "minItems": 6, "maxItems": 6,
            "description": "Defaults for the fields a mounts entry leaves out (6 values).",
        },
        "swap": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "filename": {"type": "string", "description": "Path of the swap file (default /swap.img)."},
                "size": {"oneOf": [{"type": "string", "enum": ["auto"]}, {"type": "integer", "minimum": 0},
                                   {"type": "string", "pattern": _SIZE_PATTERN}],
                         "description": "Bytes, a size like 2G, or auto (from memory and free space)."},
                "maxsize": {"oneOf": [{"type": "integer", "minimum": 0},
                                      {"type": "string", "pattern": _SIZE_PATTERN}],
                            "description": "Upper bound for size: auto."},
            },
        },
    }},
    examples=(
        "mounts:\n  - [ /dev/ephemeral0, /mnt, auto, \"defaults,noexec\" ]\n  - [ sdc, /opt/data ]\n"
        "  - [ xvdh, /opt/data, auto, \"defaults,nofail\", \"0\", \"0\" ]\n"
        "mount_default_fields: [null, null, auto, \"defaults,nofail\", \"0\", \"2\"]\n",
        "swap:\n  filename: /swapfile\n  size: 2G\n  maxsize: 2G\n",
        "mounts:\n  - [ \"LABEL=data\", /srv/data, ext4 ]\n  - [ swap ]\n"
        "swap:\n  filename: /var/swap.img\n  size: auto\n  maxsize: 1073741824\n",
    ),
)


def default_options(ctx: ModuleContext) -> str:
    """cloud-init's default mount options, naming our network-stage unit instead of cloud-init's."""
    systemd = ctx.root.exists("/run/systemd/system") if ctx.root.is_live else any(
        ctx.root.exists(p) for p in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd"))
    if systemd:
        return "defaults,nofail,x-systemd.requires=cloudseed-network.service,_netdev"
    return "defaults,nobootwait"


def _fields(entry: Any, where: str, device_required: bool = True) -> list[str | None]:
    if not isinstance(entry, list) or not 1 <= len(entry) <= 6:
        raise ModuleError(f"{where}: expected a list of 1 to 6 fstab fields, got {entry!r}")
    out: list[str | None] = []
    for index, value in enumerate(entry):
        if value is not None and not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ModuleError(f"{where}[{index}]: expected a string, got {type(value).__name__} {value!r}")
        out.append(None if value is None else str(value))
    if device_required and out[0] in (None, ""):
        raise ModuleError(f"{where}: the first field (the device) is empty")
    return out


def _escape(field: str) -> str:
    return field.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")


def _read_fstab(ctx: ModuleContext) -> tuple[str, list[str], list[str]]:
    """(text, lines that are not ours, lines that are ours)."""
    text = ctx.root.read_text(FSTAB, default="")
    kept, ours = [], []
    for line in text.splitlines():
        (ours if MARKER in line else kept).append(line)
    return text, kept, ours


def _named_devices(lines: list[str]) -> set[str]:
    found = set()
    for line in lines:
        tokens = line.split()
        if tokens and not tokens[0].startswith("#"):
            found.add(tokens[0])
    return found


def _absent_device(name: str, aliases: dict) -> str | None:
    """The fstab spec for a device that is not there now (it may be attached later: nofail).

    Names only a mapping could resolve (aliases, ephemeral0, swap) give None: no line.
    """
    from cloudseed.agent import disks

    base, number = disks.split_dotted(name)
    if base in aliases or disks.is_meta_name(base) or name == "ephemeral":
        return None
    if disks.SHORT_NAME.match(name):
        return f"/dev/{name}"
    return name


def plan_entries(ctx: ModuleContext, kept: list[str]) -> list[list[str]]:
    """The fstab entries (6 fields each, ours) the config asks for, without the swap file."""
    from cloudseed.agent import disks

    cfg = ctx.cfg
    mounts = cfg.get("mounts") if cfg.get("mounts") is not None else []
    if not isinstance(mounts, list):
        raise ModuleError(f"mounts: expected a list of fstab entries, got {type(mounts).__name__}")
    defaults_cfg = cfg.get("mount_default_fields")
    defaults: list[str | None] = [None, None, "auto", default_options(ctx), "0", "2"]
    if defaults_cfg is not None:
        defaults = _fields(defaults_cfg, "mount_default_fields", device_required=False)
        if len(defaults) != 6:
            raise ModuleError(f"mount_default_fields: expected 6 values, got {len(defaults)}")
    aliases = cfg.get("device_aliases") or {}
    if not isinstance(aliases, dict):
        raise ModuleError(f"device_aliases: expected a mapping of name to device, got {type(aliases).__name__}")
    entries = [_fields(entry, f"mounts[{i}]") for i, entry in enumerate(mounts)]  # all checked first
    in_fstab = _named_devices(kept)
    planned: list[list[str | None]] = []
    for index, fields in enumerate(entries):
        name = str(fields[0])
        device = disks.resolve(name, aliases, ctx.datasource) or _absent_device(name, aliases)
        if device is None:
            if len(fields) > 1 and fields[1] is not None:
                ctx.warn(f"mounts[{index}]: {name!r} names no device here (not in device_aliases or the "
                         "datasource's block-device mapping); no fstab line for it")
            continue
        if device in in_fstab:
            ctx.log.info("mounts[%d]: %s is already in the image's fstab; left to it", index, device)
            continue
        fields = fields + [None] * (6 - len(fields))
        fields[0] = device
        if fields[1] is None:  # [dev] or [dev, null]: remove the earlier entries of that device
            for earlier in planned:
                if earlier[0] == device:
                    earlier[1] = None
            planned.append(fields)
            continue
        planned.append([value if value is not None else defaults[i] for i, value in enumerate(fields)])
    for name, mount_point, fstype, options, passno in (("ephemeral0", "/mnt", "auto", defaults[3], "2"),
                                                      ("swap", "none", "swap", "sw", "0")):
        device = disks.resolve(name, aliases, ctx.datasource)
        if device is None or device in in_fstab or any(p[0] == device for p in planned):
            continue
        planned.append([device, mount_point, fstype, options, "0", passno])
    out = []
    for fields in planned:
        if fields[1] is None:
            continue
        if any(value is None for value in fields):
            raise ModuleError(f"mounts: {fields[0]}: a field is null and mount_default_fields has no value for it")
        out.append([str(value) for value in fields])
    return out


def swap_entry(ctx: ModuleContext) -> list[str] | None:
    """Make the configured swap file (when it is not there yet); its fstab entry, or None."""
    from cloudseed.agent import disks
    from cloudseed.agent.modules import _swapfile as swapfile

    settings = ctx.cfg.get("swap")
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise ModuleError(f"swap: expected a mapping (filename, size, maxsize), got {type(settings).__name__}")
    filename = settings.get("filename", "/swap.img")
    size = settings.get("size", 0)
    if not filename or not size:
        return None
    if not isinstance(filename, str) or not filename.startswith("/"):
        raise ModuleError(f"swap.filename: expected an absolute path, got {filename!r}")
    try:
        maxsize = None if settings.get("maxsize") is None else disks.human_bytes(settings["maxsize"], "swap.maxsize")
        if str(size).lower() == "auto":
            directory = ctx.root.path(filename.rsplit("/", 1)[0] or "/")
            free = None
            import os

            if os.path.isdir(directory):
                vfs = os.statvfs(directory)
                free = vfs.f_frsize * vfs.f_bfree
            size_bytes = swapfile.suggested_size(swapfile.memory_bytes(), maxsize, free)
        else:
            size_bytes = disks.human_bytes(size, "swap.size")
    except ValueError as e:
        raise ModuleError(str(e)) from None
    except OSError as e:
        raise ModuleError(f"swap.size: auto needs the memory size: {e}") from None
    if ctx.root.exists(filename):
        if not swapfile.is_swap_file(ctx.root, filename):
            raise ModuleError(f"swap.filename: {filename} exists and is not a swap file; not overwritten")
        ctx.log.info("swap file %s is already there", filename)
        return [filename, "none", "swap", "sw", "0", "0"]
    if size_bytes == 0:
        ctx.log.info("swap: the suggested size is 0; no swap file")
        return None
    try:
        swapfile.make_swap_file(ctx.root, filename, size_bytes, ctx.log)
    except swapfile.SwapError as e:
        raise ModuleError(str(e)) from None
    return [filename, "none", "swap", "sw", "0", "0"]


def render(kept: list[str], entries: list[list[str]]) -> str:
    lines = list(kept)
    for fields in entries:
        fields = list(fields)
        fields[3] = f"{fields[3]},{MARKER}"
        lines.append("\t".join(_escape(f) for f in fields))
    return "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    text, kept, ours = _read_fstab(ctx)
    entries = plan_entries(ctx, kept)  # bad input stops here, before anything is changed
    swap = swap_entry(ctx)
    if swap is not None:
        entries.append(swap)
    if not entries:
        ctx.log.info("no fstab entries to write")
        return
    content = render(kept, entries)
    changed = content != text
    if changed:
        ctx.root.write(FSTAB, content, mode=0o644, keep_mode=True)
        ctx.log.info("fstab: %d line(s) of ours (was %d)", len(entries), len(ours))
    else:
        ctx.log.info("fstab unchanged")
    points = [fields[1] for fields in entries if fields[1].startswith("/")]
    for point in points:
        try:
            ctx.root.makedirs(point)
        except Exception as e:  # noqa: BLE001 - a bad mount point must not stop the others
            ctx.warn(f"mounts: cannot create mount point {point}: {e}")
    activate(ctx, entries, changed, points)


def _mounted_points() -> set[str]:
    try:
        with open("/proc/self/mounts") as handle:
            return {line.split()[1].replace("\\040", " ") for line in handle if len(line.split()) > 1}
    except OSError:
        return set()


def activate(ctx: ModuleContext, entries: list[list[str]], changed: bool, points: list[str]) -> None:
    """swapon, daemon-reload and mount -a on the running system; only logged on another root."""
    from cloudseed.core.root import CommandError

    commands = []
    if any(fields[2] == "swap" for fields in entries):
        commands.append(["swapon", "-a"])
    if changed or not set(points) <= _mounted_points():
        if ctx.root.exists("/run/systemd/system") or not ctx.root.is_live:
            commands.append(["systemctl", "daemon-reload"])
        commands.append(["mount", "-a"])
    for argv in commands:
        if not ctx.root.is_live:
            ctx.log.info("offline root: not running %s", " ".join(argv))
            continue
        try:
            ctx.root.run(argv)
            ctx.log.info("ran %s", " ".join(argv))
        except CommandError as e:
            ctx.warn(f"mounts: {' '.join(argv)} failed: {e}")
