"""OpenNebula: the contextualization ISO (label ``CONTEXT``, or ``CDROM`` holding ``context.sh``).

The image is read in userspace (``cloudseed.agent.seedfs``: nothing mounted), or a seed directory
(``/var/lib/cloud/seed/opennebula``) is used. ``context.sh`` is parsed, never run: cloud-init runs
it with bash (as ``nobody``); here a parser accepts the subset OpenNebula writes,
``NAME='value'`` (multi-line, ``'\\''`` for a quote), double quotes without expansions, plain
words, comments, and refuses anything else (a command, ``$``, a backtick) naming the line.
Read as cloud-init 22.4 reads it: every variable is metadata; ``SSH_KEY``/``SSH_PUBLIC_KEY`` the
keys; ``SET_HOSTNAME``, ``HOSTNAME``, ``PUBLIC_IP``, ``IP_PUBLIC``, ``ETH0_IP`` the hostname;
``USER_DATA``/``USERDATA`` (``USERDATA_ENCODING=base64``) the user-data; ``DSMODE=disabled`` off;
network config v2 built for each physical NIC (matched by MAC, named by ``ETHx_MAC``) from
``ETHx_IP``, ``ETHx_MASK``, ``ETHx_GATEWAY``, ``ETHx_IP6``, ``ETHx_IP6_ULA``,
``ETHx_IP6_PREFIX_LENGTH``, ``ETHx_IP6_GATEWAY``/``ETHx_GATEWAY6``, ``ETHx_DNS`` plus ``DNS``,
``ETHx_SEARCH_DOMAIN``, ``ETHx_MTU`` (an integer here; cloud-init passes the string).
Beyond cloud-init 22.4, as OpenNebula's own contextualization does: ``USERNAME`` becomes a user
(vendor-data) holding the SSH keys, with passwordless sudo unless ``USERNAME_SUDO`` is ``NO``.
"""

from __future__ import annotations

import logging
import os
import re

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Disk, Path
from cloudseed.clouds.opennebula import CLOUD

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.opennebula")

LABELS = CLOUD.addresses  # the wire contract: clouds/opennebula.py
CONTEXT = CLOUD.requests["context"].path
F = CLOUD.fields
SEED_DIRS = ("/var/lib/cloudseed/seed/opennebula", "/var/lib/cloud/seed/opennebula")
DEFAULT_IID = "iid-dsopennebula"
MAX_CONTEXT = 16 * 1024 * 1024
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z0-9_./:,@+%=-]*")
_IP_KEY = re.compile(r"^ETH\d+_IP.*$")


class ContextError(Exception):
    """context.sh could not be read safely; the message names the file and line."""


def parse_context(text: str, where: str = CONTEXT) -> dict[str, str]:
    """The variables ``text`` assigns, for the subset of shell OpenNebula writes; ContextError else."""
    out: dict[str, str] = {}
    pos, line, end = 0, 1, len(text)

    def fail(why: str) -> ContextError:
        return ContextError(f"{where}, line {line}: {why} (only NAME='value' assignments are read; "
                            "the file is never run)")

    while pos < end:
        c = text[pos]
        if c in " \t;":
            pos += 1
            continue
        if c == "\n":
            pos, line = pos + 1, line + 1
            continue
        if c == "#":
            nl = text.find("\n", pos)
            pos = end if nl < 0 else nl
            continue
        m = _NAME.match(text, pos)
        if not m or m.end() >= end or text[m.end()] != "=":
            word = text[pos:text.find("\n", pos) if "\n" in text[pos:] else end][:40]
            raise fail(f"not an assignment: {word!r}")
        name, pos = m.group(0), m.end() + 1
        value: list[str] = []
        while pos < end and text[pos] not in " \t\n;#":
            c = text[pos]
            if c == "'":
                close = text.find("'", pos + 1)
                if close < 0:
                    raise fail(f"{name}: unterminated single quote")
                chunk = text[pos + 1:close]
                value.append(chunk)
                line += chunk.count("\n")
                pos = close + 1
            elif c == '"':
                pos += 1
                while True:
                    if pos >= end:
                        raise fail(f"{name}: unterminated double quote")
                    c = text[pos]
                    if c == '"':
                        pos += 1
                        break
                    if c == "\\" and pos + 1 < end and text[pos + 1] in '\\"$`\n':
                        if text[pos + 1] != "\n":  # a backslash-newline joins lines
                            value.append(text[pos + 1])
                        else:
                            line += 1
                        pos += 2
                        continue
                    if c in "$`":
                        raise fail(f"{name}: {c!r} inside double quotes (an expansion) is not evaluated")
                    if c == "\n":
                        line += 1
                    value.append(c)
                    pos += 1
            elif c == "\\" and pos + 1 < end and text[pos + 1] != "\n":
                value.append(text[pos + 1])
                pos += 2
            else:
                m = _WORD.match(text, pos)
                if not m or m.end() == pos:
                    raise fail(f"{name}: {c!r} outside quotes is not a plain value")
                value.append(m.group(0))
                pos = m.end()
        out[name] = "".join(value)
    return out


def physical_nics(root: Any) -> dict[str, str]:
    """``{mac: name}`` for the root's physical NICs (those with a ``device``), as cloud-init lists them."""
    nics: dict[str, str] = {}
    for name in root.listdir("/sys/class/net"):
        if name == "lo" or not root.exists(f"/sys/class/net/{name}/device"):
            continue
        mac = root.read_text(f"/sys/class/net/{name}/address", default="").strip().lower()
        if mac and mac != "00:00:00:00:00:00":
            nics[mac] = name
    return nics


def _natural(name: str) -> list:
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", name)]


def _prefix(mask: str) -> int:
    import ipaddress

    try:
        return ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen
    except ValueError:
        raise ContextError(f"context.sh: {mask!r} is not an IPv4 netmask") from None


def network_config(context: dict[str, str], nics: dict[str, str]) -> dict[str, Any]:
    """Network config v2 for ``nics`` ({mac: name}) from the ``ETHx_*`` variables, as cloud-init builds it."""
    mac_suffix = "_" + F["nic_mac"].upper()
    by_mac = {v.lower(): k[:-len(mac_suffix)] for k, v in context.items()
              if k.endswith(mac_suffix) and len(k) > len(mac_suffix)}

    def field(dev: str, role: str, default: str | None = None) -> str | None:
        value = context.get(f"{dev}_{F['nic_' + role]}".upper())
        return default if value in (None, "") else value

    ethernets: dict[str, Any] = {}
    for mac, dev in sorted(nics.items(), key=lambda item: _natural(item[1])):
        mac = mac.lower()
        c_dev = by_mac.get(mac, dev)
        derived = ".".join(str(int(b, 16)) for b in mac.split(":")[2:])
        conf: dict[str, Any] = {"match": {"macaddress": mac}, "addresses": []}
        conf["addresses"].append(f"{field(c_dev, 'ip', derived)}/{_prefix(field(c_dev, 'mask', '255.255.255.0'))}")
        ip6 = [a for a in (field(c_dev, "ip6"), field(c_dev, "ip6_ula")) if a]
        prefix6 = field(c_dev, "ip6_prefix", "64")
        conf["addresses"].extend(f"{a}/{prefix6}" for a in ip6)
        gateway = field(c_dev, "gateway")
        if gateway:
            conf["gateway4"] = gateway
        gateway6 = field(c_dev, "ip6_gateway", field(c_dev, "gateway6"))
        if gateway6:
            conf["gateway6"] = gateway6
        dns = (field(c_dev, "dns", "") or "").split() + context.get(F["dns"], "").split()
        search = (field(c_dev, "search", "") or "").split()
        nameservers: dict[str, Any] = {}
        if dns:
            nameservers["addresses"] = dns
        if search:
            nameservers["search"] = search
        if nameservers:
            conf["nameservers"] = nameservers
        mtu = field(c_dev, "mtu")
        if mtu:
            conf["mtu"] = int(mtu) if mtu.isdigit() else mtu
        ethernets[dev] = conf
    return {"version": 2, "ethernets": ethernets}


def read_context(context: dict[str, str], nics: dict[str, str]) -> dict[str, Any]:
    """``{"metadata", "userdata", "network"}`` from the parsed variables, as cloud-init derives them."""
    import base64
    import binascii

    md: dict[str, Any] = dict(context)
    for var in (F["ssh_key"], F["ssh_public_key"]):
        if var in context:
            md["public-keys"] = [k for k in context[var].splitlines() if k and not k.startswith("#")]
            break
    for var in (F[role] for role in ("set_hostname", "hostname", "public_ip", "ip_public", "eth0_ip")):
        if var in context:
            md["local-hostname"] = context[var]
            break
    userdata: bytes | None = None
    text = context.get(F["user_data"], context.get(F["user_data_old"]))
    if text is not None:
        userdata = text.encode("utf-8")
        if context.get(F["encoding"], context.get(F["encoding_alt"])) == "base64":
            try:
                userdata = base64.b64decode("".join(text.split()), validate=True)
            except (binascii.Error, ValueError):
                LOG.warning("context.sh: USER_DATA is not valid base64; used as it is")
    network = None
    if any(_IP_KEY.match(k) for k in context):
        network = network_config(context, nics)
    md.setdefault("instance-id", DEFAULT_IID)
    return {"metadata": md, "userdata": userdata, "network": network}


def read_dir(top: str, where: str) -> dict[str, str] | None:
    """The variables of ``top``/context.sh, or None when there is none."""
    path = os.path.join(top, CONTEXT)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        data = f.read(MAX_CONTEXT + 1)
    if len(data) > MAX_CONTEXT:
        raise ContextError(f"{where}/{CONTEXT} is larger than {MAX_CONTEXT} bytes")
    return parse_context(data.decode("utf-8", errors="replace"), f"{where}/{CONTEXT}")


def read_image(path: str) -> dict[str, str] | None:
    """The variables of ``context.sh`` on the ISO 9660/FAT image or device ``path`` (read in userspace)."""
    import shutil
    import tempfile

    from cloudseed.agent.seedfs import SeedFSError, extract

    tmp = tempfile.mkdtemp(prefix="cloudseed-context-", dir="/run" if os.access("/run", os.W_OK) else None)
    try:
        try:
            extract(path, tmp, max_total_bytes=MAX_CONTEXT * 2, max_files=1000)
        except SeedFSError as e:
            raise ContextError(str(e)) from None
        return read_dir(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def user_vendor_data(context: dict[str, str], keys: list[str]) -> bytes | None:
    """``USERNAME`` (and ``USERNAME_SUDO``) as a cloud-config that creates that user with the keys."""
    import json

    name = context.get(F["username"], "")
    if not name or name == "root":
        return None
    if not re.fullmatch(r"[a-z_][a-z0-9_-]*\$?", name) or len(name) > 32:
        LOG.warning("context.sh: USERNAME %r is not a valid user name; ignored", name)
        return None
    user: dict[str, Any] = {"name": name, "shell": "/bin/bash", "lock_passwd": True}
    if context.get(F["username_sudo"], "YES").upper() != "NO":
        user["sudo"] = "ALL=(ALL) NOPASSWD:ALL"
    if keys:
        user["ssh_authorized_keys"] = keys
    return ("#cloud-config\n" + json.dumps({"users": ["default", user]}) + "\n").encode()


class OpenNebula(Datasource):
    name = "OpenNebula"
    stages = (LOCAL,)
    platform = "opennebula"
    # world-readable instance data keeps the context variables, except these
    sensitive_keys = tuple(F[role] for role in ("user_data", "user_data_old", "password", "crypted_password",
                                                "password_base64"))
    detection = (
        Path(*SEED_DIRS, kind="file", inside=(CONTEXT,), why="seed directory {value}"),
        Disk(*LABELS, why="filesystem labelled CONTEXT or CDROM on {value}"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "opennebula"

    @classmethod
    def _seed_dirs(cls, ctx: DatasourceContext) -> list[str]:
        return [d for d in SEED_DIRS if ctx.root.isfile(f"{d}/{CONTEXT}")]

    def fetch(self) -> bool:
        found: tuple[dict[str, str], str] | None = None
        for directory in self._seed_dirs(self.ctx):
            context = read_dir(self.ctx.root.path(directory), directory)
            if context is not None:
                found = (context, f"seed-dir ({directory})")
                break
        if found is None:
            from cloudseed.agent.devices import find_devices_by_label

            for device in find_devices_by_label(LABELS):
                context = read_image(device)
                if context is None:
                    LOG.info("%s is labelled like an OpenNebula context disk but has no context.sh", device)
                    continue
                found = (context, f"config-disk ({device})")
                break
        if found is None:
            return False
        context, self.subplatform = found
        dsmode = context.get(F["dsmode"]) or self.ctx.ds_cfg("OpenNebula").get("dsmode")
        if dsmode == "disabled":
            LOG.info("OpenNebula context says DSMODE=disabled; not used")
            return False
        result = read_context(context, physical_nics(self.ctx.root))
        self.metadata = result["metadata"]
        self.userdata_raw = result["userdata"]
        self.network_config = result["network"]
        self.public_keys = list(self.metadata.get("public-keys") or [])
        self.vendordata_raw = user_vendor_data(context, self.public_keys)
        self.raw = {"meta_data": self.metadata}
        return True


DATASOURCE = OpenNebula
