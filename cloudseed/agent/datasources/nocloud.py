"""NoCloud: seed directories, a ``cidata`` filesystem, ``ds=nocloud;...`` and ``seedfrom`` URLs.

Sources, strongest first: the kernel command line and the SMBIOS system serial
(``ds=nocloud[-net];s=URL;i=ID;h=HOST``), the system config (``datasource: NoCloud:``),
seed directories, a filesystem labelled ``cidata`` (ISO 9660 or VFAT), then a ``seedfrom`` URL
(``file://`` and paths in the local stage, ``http(s)://`` and ``ftp(s)://`` in the network stage;
``%s`` and ``__dmi.NAME__`` in it as cloud-init 24.x reads them).
Files: ``meta-data`` (YAML), ``user-data``, ``vendor-data``, ``network-config`` (YAML), from every
kind of seed (the datasource configuration's ``network-config`` too).
"""

from __future__ import annotations

import logging
import os

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, Cmdline, Disk, Dmi, Hatch, Path, Setting, anycase
from cloudseed.clouds.nocloud import CLOUD

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.nocloud")

SEED_DIRS = (
    "/var/lib/cloudseed/seed/nocloud",
    "/var/lib/cloudseed/seed/nocloud-net",
    "/var/lib/cloud/seed/nocloud",
    "/var/lib/cloud/seed/nocloud-net",
)
SEED_FILES = tuple(CLOUD.tail(role) for role in CLOUD.requests)  # the wire contract: clouds/nocloud.py
# signed user-data (``cloudseed.agent.userdata_trust``): each signature beside its data
SIGNATURE_FILES = {"user-data": "user-data.sig", "vendor-data": "vendor-data.sig"}
LABEL = "cidata"  # the default of datasource.NoCloud.fs_label
# ds=nocloud or ds=nocloud-net, alone or with ;key=value items ("ds=" as written, the name in any case)
DS_ARGUMENT = tuple(f"ds={anycase(kind)}{rest}" for kind in ("nocloud", "nocloud-net") for rest in ("", ";*"))
_SHORT_KEYS = {"h": "local-hostname", "i": "instance-id", "s": "seedfrom"}
# seeds the network stage reads (FTP and FTPS: cloud-init 24.2)
REMOTE_SCHEMES = ("http://", "https://", "ftp://", "ftps://")
# ``__dmi.NAME__`` in a seedfrom URL (cloud-init 23.1): dmidecode's names -> /sys/class/dmi/id files
DMI_VARIABLES = {
    "baseboard-asset-tag": "board_asset_tag", "baseboard-manufacturer": "board_vendor",
    "baseboard-product-name": "board_name", "baseboard-serial-number": "board_serial",
    "baseboard-version": "board_version", "bios-release-date": "bios_date", "bios-vendor": "bios_vendor",
    "bios-version": "bios_version", "chassis-asset-tag": "chassis_asset_tag",
    "chassis-manufacturer": "chassis_vendor", "chassis-serial-number": "chassis_serial",
    "chassis-version": "chassis_version", "system-manufacturer": "sys_vendor",
    "system-product-name": "product_name", "system-serial-number": "product_serial",
    "system-uuid": "product_uuid", "system-version": "product_version",
}
MAX_SEED_FILE = 64 * 1024 * 1024


class SeedError(Exception):
    """A seed was found but is unusable; the message names the file."""


def parse_ds_argument(text: str) -> dict[str, Any] | None:
    """``ds=nocloud;s=URL;i=ID`` (from the command line or SMBIOS serial) as meta-data, or None."""
    for token in text.split():
        if not token.startswith("ds="):
            continue
        value = token[3:]
        kind, _, rest = value.partition(";")
        if kind.lower() not in ("nocloud", "nocloud-net"):
            continue
        fill: dict[str, Any] = {}
        for item in rest.split(";"):
            if not item:
                continue
            key, sep, val = item.partition("=")
            fill[_SHORT_KEYS.get(key, key)] = val if sep else None
        if "dsmode" not in fill:
            # as cloud-init 24.1+: the seed's scheme says which stage, whatever the name
            # (ds=nocloud;s=http://... is the network stage's; nocloud-net is deprecated)
            seedfrom = str(fill.get("seedfrom") or "")
            if seedfrom.startswith(REMOTE_SCHEMES):
                fill["dsmode"] = "net"
            elif seedfrom.startswith(("file://", "/")):
                fill["dsmode"] = "local"
            else:
                fill["dsmode"] = "net" if kind.lower() == "nocloud-net" else "local"
        return fill
    return None


def _load_meta(text: bytes | str, source: str) -> dict[str, Any]:
    from cloudseed.agent.config import ConfigFileError, load_yaml_mapping

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        return load_yaml_mapping(text, source)
    except ConfigFileError as e:
        raise SeedError(str(e)) from None


def _read_dir(read, source: str) -> dict[str, Any] | None:
    """The seed files found through ``read(name) -> bytes | None``; None when there is no seed."""
    files = {name: read(name) for name in SEED_FILES}
    if files["meta-data"] is None and files["user-data"] is None:
        return None
    seed: dict[str, Any] = {"source": source, "warnings": []}
    if files["meta-data"] is None:
        seed["warnings"].append(f"{source}: has user-data but no meta-data; using defaults")
        seed["meta-data"] = {}
    else:
        seed["meta-data"] = _load_meta(files["meta-data"], f"{source}/meta-data")
    seed["user-data"] = files["user-data"]
    seed["vendor-data"] = files["vendor-data"]
    seed["signatures"] = {kind: read(name) for kind, name in SIGNATURE_FILES.items()}
    if files["network-config"]:
        seed["network-config"] = _load_meta(files["network-config"], f"{source}/network-config")
    return seed


def ds_argument(ctx: DatasourceContext) -> tuple[dict[str, Any] | None, str]:
    """The ``ds=nocloud`` argument of the kernel command line, else of the SMBIOS serial, and where."""
    found = parse_ds_argument(ctx.cmdline)
    if found is not None:
        return found, "kernel command line"
    return parse_ds_argument(ctx.dmi("product_serial")), "DMI product_serial"


def _network_seedfrom(ctx: DatasourceContext) -> str | None:
    """The network stage's reason: a ``seedfrom`` URL, from the ds= argument or the configuration."""
    found, where = ds_argument(ctx)
    seedfrom = str((found or {}).get("seedfrom") or ctx.ds_cfg("NoCloud").get("seedfrom") or "")
    if seedfrom.startswith(REMOTE_SCHEMES):
        return f"seedfrom {seedfrom} ({where if found and found.get('seedfrom') else 'datasource.NoCloud'})"
    return None


def _network_argument(ctx: DatasourceContext) -> str | None:
    """The network stage's reason: a ``ds=nocloud-net`` argument."""
    found, where = ds_argument(ctx)
    return f"{where} has ds=nocloud-net" if found and found.get("dsmode") == "net" else None


# what the shell generator checks instead of the network stage's hatches (it decides for all stages)
_NETWORK_NOTE = "the network stage's, implied by a ds= argument or configuration"


class NoCloud(Datasource):
    name = "NoCloud"
    stages = (LOCAL, NETWORK)
    platform = "nocloud"
    # the local stage: any seed; the network stage: only a seed that points at the network
    detection = (
        Hatch("nocloud_network_seedfrom", python=_network_seedfrom, shell=None, shell_note=_NETWORK_NOTE,
              stages=(NETWORK,)),
        Cmdline(*DS_ARGUMENT, tokens=True, stages=(LOCAL,), why="kernel command line has ds=nocloud"),
        Dmi("product_serial", *DS_ARGUMENT, tokens=True, stages=(LOCAL,), why="DMI product_serial has ds=nocloud"),
        AllOf(Setting("meta-data", "*"), Setting("user-data", "*"), stages=(LOCAL,),
              why="datasource.NoCloud has meta-data and user-data"),
        Setting("seedfrom", stages=(LOCAL,)),
        Path(*SEED_DIRS, kind="file", inside=("meta-data", "user-data"), why="seed directory {value}"),
        Hatch("nocloud_network_argument", python=_network_argument, shell=None, shell_note=_NETWORK_NOTE,
              stages=(NETWORK,)),
        Disk(LABEL, setting="fs_label", udev_hint=True, stages=(LOCAL,)),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        # as cloud-init (22.4 and 26.x): meta-data's cloud-name, else "unknown" (cloud_id is then
        # the platform, "nocloud")
        self.cloud_name = "unknown"
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ detection
    @classmethod
    def _cmdline_seed(cls, ctx: DatasourceContext) -> dict[str, Any] | None:
        return ds_argument(ctx)[0]

    @classmethod
    def _seed_dirs(cls, ctx: DatasourceContext) -> list[str]:
        return [d for d in SEED_DIRS
                if ctx.root.isfile(f"{d}/meta-data") or ctx.root.isfile(f"{d}/user-data")]

    @classmethod
    def _labels(cls, ctx: DatasourceContext) -> list[str]:
        label = ctx.ds_cfg("NoCloud").get("fs_label", LABEL)
        return [] if label is None else sorted({str(label).lower(), str(label).upper()})

    # ------------------------------------------------------------------ fetching
    def fetch(self) -> bool:
        ctx = self.ctx
        found: list[str] = []
        meta: dict[str, Any] = {}
        data: dict[str, Any] = {"user-data": None, "vendor-data": None, "network-config": None}
        signatures: dict[str, Any] = {}

        def take(seed: dict[str, Any]) -> None:
            # earlier sources win for meta-data keys; files replace
            for key, value in seed.get("meta-data", {}).items():
                meta.setdefault(key, value)
            for key in ("user-data", "vendor-data", "network-config"):
                if seed.get(key) is not None:
                    data[key] = seed[key]
                    if key in SIGNATURE_FILES:  # a signature goes with the data it came with
                        signatures[key] = (seed.get("signatures") or {}).get(key)
            self.warnings.extend(seed.get("warnings", []))
            found.append(seed["source"])

        cmd = self._cmdline_seed(ctx)
        if cmd is not None:
            take({"source": "cmdline", "meta-data": cmd})
        ds_cfg = ctx.ds_cfg("NoCloud")
        if ds_cfg.get("seedfrom"):
            meta.setdefault("seedfrom", ds_cfg["seedfrom"])
            found.append("ds_config_seedfrom")
        if "meta-data" in ds_cfg and "user-data" in ds_cfg:
            md = ds_cfg["meta-data"]
            take({"source": "ds_config", "meta-data": md if isinstance(md, dict) else
                  _load_meta(str(md), "datasource.NoCloud.meta-data"),
                  "user-data": _as_bytes(ds_cfg.get("user-data")),
                  "vendor-data": _as_bytes(ds_cfg.get("vendor-data")),
                  "network-config": _network_config(ds_cfg.get("network-config"),
                                                    "datasource.NoCloud.network-config")})
        seed = self._first_local_seed()
        if seed is not None:
            take(seed)
        if not found:
            return False
        seedfrom = meta.get("seedfrom")
        if seedfrom:
            seedfrom = self._expand_dmi(str(seedfrom))
            remote = seedfrom.startswith(REMOTE_SCHEMES)
            if remote and ctx.stage == LOCAL:
                LOG.info("NoCloud seed %s needs the network; leaving it to the network stage", seedfrom)
                return False
            take(self._read_seedfrom(seedfrom))
        if ctx.stage == LOCAL and meta.get("dsmode") == "net":
            return False
        if meta.get("dsmode") == "disabled":
            return False
        meta.setdefault("instance-id", "nocloud")
        if isinstance(meta.get("cloud-name"), str) and meta["cloud-name"]:
            self.cloud_name = meta["cloud-name"].lower()
        self.metadata = meta
        self.userdata_raw = data["user-data"]
        self.vendordata_raw = data["vendor-data"]
        network = data["network-config"]
        if isinstance(network, dict) and network:
            self.network_config = network.get("network", network)
        elif meta.get("network-interfaces"):
            # ENI text in meta-data: cloud-init converts it, deprecated since 24.3; cloudseed reads
            # network config v1/v2 only, so it says so rather than ignore it
            self.warnings.append("NoCloud meta-data network-interfaces (ENI) is deprecated in cloud-init 24.3 "
                                 "and not read by cloudseed: give a network-config (v1 or v2) instead")
        self.public_keys = _public_keys(meta.get("public-keys"))
        self.subplatform = ("config-disk" if any(f.startswith("/dev/") for f in found) else "seed-dir") \
            + f" ({','.join(found)})"
        self.raw = {"meta_data": meta}
        found_signatures = {k: v.decode("ascii", "replace") for k, v in signatures.items() if v}
        if found_signatures:
            self.extra["signatures"] = found_signatures
        return True

    def _first_local_seed(self) -> dict[str, Any] | None:
        ctx = self.ctx
        for directory in self._seed_dirs(ctx):
            def read(name: str, d: str = directory) -> bytes | None:
                return ctx.root.read_bytes(f"{d}/{name}") if ctx.root.isfile(f"{d}/{name}") else None

            seed = _read_dir(read, directory)
            if seed is not None:
                return seed
        if ctx.stage != LOCAL:
            return None
        from cloudseed.agent.devices import MountError, find_devices_by_label, mounted_readonly

        for device in find_devices_by_label(self._labels(ctx)):
            try:
                with mounted_readonly(device) as mnt:
                    def read_mounted(name: str, m: str = mnt) -> bytes | None:
                        path = os.path.join(m, name)
                        return _read_limited(path) if os.path.isfile(path) else None

                    seed = _read_dir(read_mounted, device)
            except MountError as e:
                LOG.warning("%s", e)
                continue
            if seed is not None:
                return seed
            LOG.warning("device %s is labelled as a NoCloud seed but has no meta-data or user-data", device)
        return None

    def _expand_dmi(self, seedfrom: str) -> str:
        """``__dmi.system-serial-number__`` and the like replaced by this machine's DMI strings."""
        import re

        def value(match: re.Match[str]) -> str:
            name = DMI_VARIABLES.get(match.group(1))
            if name is None:
                self.warnings.append(f"NoCloud seedfrom: unknown __dmi.{match.group(1)}__ left as it is "
                                     f"(known: {', '.join(DMI_VARIABLES)})")
                return match.group(0)
            return self.ctx.dmi(name)

        return re.sub(r"__dmi\.([^_]+)__", value, seedfrom) if "__dmi." in seedfrom else seedfrom

    def _read_seedfrom(self, seedfrom: str) -> dict[str, Any]:
        """The four seed files under ``seedfrom`` (file://, http(s)://, ftp(s)://), in a total time budget.

        ``datasource: NoCloud: {timeout, retries, max_wait}``: per-request timeout (default 5s),
        retries of a failing file (default 2), total seconds for all files (default 20).
        A 404 is an absent file; any other failure is logged naming the URL. As in cloud-init 24.x,
        a ``%s`` in the URL is replaced by each file's name, and a URL with a query string gets no
        ``/`` added before the name.
        """
        import time
        import urllib.parse

        from cloudseed.core.http import FetchError, fetch

        if "%s" in seedfrom:
            def url_of(name: str) -> str:
                return seedfrom.replace("%s", name)
        else:
            base = seedfrom
            if not base.endswith("/") and not urllib.parse.urlsplit(base).query:
                base += "/"

            def url_of(name: str) -> str:
                return base + name
        cfg = self.ctx.ds_cfg("NoCloud")
        try:
            timeout = float(cfg.get("timeout", 5))
            retries = int(cfg.get("retries", 2))
            max_wait = float(cfg.get("max_wait", 20))
        except (TypeError, ValueError):
            LOG.warning("datasource.NoCloud timeout/retries/max_wait must be numbers; using defaults")
            timeout, retries, max_wait = 5.0, 2, 20.0
        deadline = time.monotonic() + max_wait
        files: dict[str, bytes | None] = {}
        names = SEED_FILES + (tuple(SIGNATURE_FILES.values()) if self.ctx.checks_signatures else ())
        for name in names:
            left = deadline - time.monotonic()
            if left <= 0:
                LOG.warning("NoCloud seed %s: out of time (max_wait %gs) before %s", seedfrom, max_wait, name)
                files[name] = None
                continue
            try:
                files[name] = fetch(url_of(name), timeout=min(timeout, left), retries=retries, max_wait=left,
                                    max_bytes=MAX_SEED_FILE)
            except FetchError as e:
                if e.status != 404:
                    self.warnings.append(f"NoCloud seed: {e}")
                files[name] = None
        seed = _read_dir(files.get, seedfrom)
        if seed is None:
            raise SeedError(f"seedfrom {seedfrom}: neither meta-data nor user-data could be read")
        return seed


def _read_limited(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read(MAX_SEED_FILE + 1)
    if len(data) > MAX_SEED_FILE:
        raise SeedError(f"{path} is larger than {MAX_SEED_FILE} bytes")
    return data


def _network_config(value: Any, source: str) -> dict[str, Any] | None:
    """``network-config`` given in the datasource configuration: a mapping, or YAML text."""
    if value is None or isinstance(value, dict):
        return value
    return _load_meta(value, source)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


def _public_keys(value: Any) -> list[str]:
    """meta-data ``public-keys`` as a list of key lines (string, list or {name: key} forms)."""
    if not value:
        return []
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, dict):
        keys: list[str] = []
        for item in value.values():
            keys.extend(_public_keys(item.get("openssh-key") if isinstance(item, dict) else item))
        return keys
    if isinstance(value, list):
        return [str(k).strip() for k in value if str(k).strip()]
    return []


DATASOURCE = NoCloud
