"""SmartOS (Joyent Triton): the Joyent metadata protocol V2 on ``/dev/ttyS1`` (KVM) or the zone socket.

Possible where DMI ``product_name`` starts with ``SmartDC`` (or ``Joyent``): a KVM guest, read over
the serial port ``serial_device``; or where the LX-brand zone's socket ``metadata_sockfile``
(``/native/.zonecontrol/metadata.sock``) exists. Based on cloud-init 22.4's DataSourceSmartOS and the
protocol as it speaks it: ``NEGOTIATE V2`` -> ``V2_OK``, then per key a line
``V2 <len> <crc32 hex> <request id> GET <base64 key>`` answered by ``V2 <len> <crc32> <request id>
SUCCESS <base64 value>`` or ``NOTFOUND``. On the serial port the input is drained first and a bare
newline must be answered ``invalid command``; ``KEYS`` then lists the keys, so that the legacy
``base64_all``, ``base64_keys`` and ``b64-<key>`` markers decode values (cloud-init 22.4 reads
``-<key>`` instead of the ``b64-<key>`` marker, so there such markers never work; here they do).
Read: ``sdc:uuid`` (instance id), ``hostname``/``sdc:hostname``, ``root_authorized_keys``,
``cloud-init:user-data``, ``sdc:vendor-data`` (cloud-init's built-in boothook when absent, running
``user-script`` and ``sdc:operator-script`` each boot), ``user-data`` (legacy, to
``/var/db/mdata-user-data``), ``sdc:datacenter_name``, ``sdc:nics``/``sdc:routes``/``sdc:resolvers``/
``sdc:dns_domain`` (a v1 network config, converted as cloud-init converts it), ``iptables_disable``,
``motd_sys_info``. Every request is bounded (``timeout``, default 5 s) and so is the whole read
(``max_wait``, default 20 s): a port that never answers costs that, not a hung boot. Unlike
cloud-init, a line that is not a V2 frame or answers another request id is skipped (console noise, a
stale answer); a frame whose length or CRC is wrong fails the read with the key named.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Path
from cloudseed.clouds.smartos import CLOUD

LOG = logging.getLogger("cloudseed.datasources.smartos")

SERIAL_DEVICE = CLOUD.names["serial"]  # the wire contract: clouds/smartos.py
METADATA_SOCKFILE = CLOUD.names["socket"]
VERSION = CLOUD.versions[0]
F = CLOUD.fields
DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_WAIT = 20.0
LEGACY_USER_D = "/var/db"

# cloud-init key: (SmartOS key, strip)
ATTRIBUTES = {
    "instance-id": (F["instance_id"], True),
    "local-hostname": (F["local_hostname"], True),
    "public-keys": (F["public_keys"], True),
    "user-script": (F["user_script"], False),
    "legacy-user-data": (F["legacy_user_data"], False),
    "user-data": (F["user_data"], False),
    "iptables_disable": (F["iptables_disable"], True),
    "motd_sys_info": (F["motd_sys_info"], True),
    "availability_zone": (F["datacenter"], True),
    "vendor-data": (F["vendor_data"], False),
    "operator-script": (F["operator_script"], False),
    "hostname": (F["hostname"], True),
    "dns_domain": (F["dns_domain"], True),
}
JSON_ATTRIBUTES = {"network-data": F["nics"], "dns_servers": F["resolvers"], "routes": F["routes"]}
# never base64-decoded on the serial port; "sdc:uuiduser-data" is cloud-init 22.4's list as it is
# (a missing comma joins two names), kept so that base64_all decodes the same keys
NO_BASE64_DECODE = (F["iptables_disable"], F["motd_sys_info"], F["public_keys"], F["datacenter"],
                    F["instance_id"] + F["legacy_user_data"], F["user_script"])

# a KVM guest's second disk is its ephemeral disk: partitioned and formatted unless it has a table
# (cloud-init's built-in config for SmartOS KVM; ``datasource: SmartOS: {disk_aliases: {...}}`` renames)
KVM_DISK_ALIASES = {"ephemeral0": "/dev/vdb"}
KVM_CLOUD_CONFIG = {
    "disk_setup": {"ephemeral0": {"table_type": "mbr", "layout": False, "overwrite": False}},
    "fs_setup": [{"label": "ephemeral0", "filesystem": "ext4", "device": "ephemeral0"}],
}

BUILTIN_VENDOR_DATA = """\
#cloud-boothook
#!/bin/sh
fname="%(per_boot_d)s/01_smartos_vendor_data.sh"
mkdir -p "${fname%%/*}"
cat > "$fname" <<"END_SCRIPT"
#!/bin/sh
##
# This file is written as part of the default vendor data for SmartOS.
# The SmartOS datasource writes the listed file from the listed metadata key
#   sdc:operator-script -> %(operator_script)s
#   user-script -> %(user_script)s
#
# You can view content with 'mdata-get <key>'
#
for script in "%(operator_script)s" "%(user_script)s"; do
    [ -x "$script" ] || continue
    echo "executing '$script'" 1>&2
    "$script"
done
END_SCRIPT
chmod +x "$fname"
"""


class JoyentMetadataError(Exception):
    """The metadata host gave no usable answer; the message names the port and the key."""


class JoyentClient:
    """Protocol V2 over an open SerialPort; ``legacy_base64``: the KVM serial client's decoding."""

    def __init__(self, port: Any, timeout: float, deadline: float, legacy_base64: bool):
        self.port = port
        self.timeout = timeout
        self.deadline = deadline
        self.legacy_base64 = legacy_base64
        self._base64_all: bool | None = None
        self._base64_keys: set[str] | None = None
        self.last_problem = ""

    def _until(self) -> float:
        now = time.monotonic()
        if now >= self.deadline:
            raise JoyentMetadataError(f"{self.port.name}: out of time (max_wait) talking to the metadata host"
                                      + (f"; last: {self.last_problem}" if self.last_problem else ""))
        return min(self.deadline, now + self.timeout)

    def _line(self, until: float) -> str:
        from cloudseed.agent.datasources._serial_port import SerialTimeout

        try:
            return self.port.readline(until).decode("ascii", "replace").rstrip("\r")
        except SerialTimeout as e:
            raise JoyentMetadataError(f"{e} (is the host metadata service running?)") from None

    def flush(self) -> None:
        """Drop stale input, then a bare newline until the host answers ``invalid command``."""
        self.port.discard_input(0.1, min(self.deadline, time.monotonic() + 1.0))
        while True:
            until = self._until()
            self.port.write(b"\n", until)
            try:
                answer = self._line(until)
            except JoyentMetadataError as e:
                LOG.warning("SmartOS: %s; retrying", e)
                self.last_problem = str(e)
                continue
            if answer == CLOUD.names["flushed"]:
                return
            if answer != "FAILURE":
                LOG.warning("SmartOS: unexpected %r from %s while flushing", answer[:80], self.port.name)

    def negotiate(self) -> None:
        until = self._until()
        self.port.write(f"{CLOUD.names['negotiate']}\n".encode("ascii"), until)
        answer = self._line(until)
        if answer != CLOUD.names["negotiated"]:
            raise JoyentMetadataError(f"{self.port.name}: {answer[:80]!r} in answer to {CLOUD.names['negotiate']}")

    def request(self, rtype: str, param: str | None = None) -> str | None:
        import base64
        import os
        import re

        request_id = os.urandom(4).hex()
        body = f"{request_id} {rtype}"
        if param:
            body += " " + base64.b64encode(param.encode()).decode()
        what = f"{self.port.name}: {rtype} {param or ''}".rstrip()
        until = self._until()
        self.port.write(f"{VERSION} {len(body)} {_crc(body)} {body}\n".encode("ascii"), until)
        frame = re.compile(VERSION + r" (\d+) ([0-9a-f]+) (([0-9a-f]+) (SUCCESS|NOTFOUND|FAILURE)( (.+))?)$")
        while True:
            line = self._line(until)
            found = frame.match(line)
            if not found:
                LOG.warning("SmartOS: %s: skipped a line that is not a V2 answer: %r", what, line[:80])
                continue
            length, checksum, answer, rid, status, _, payload = found.groups()
            if rid != request_id:
                LOG.warning("SmartOS: %s: skipped an answer to request %s (ours is %s)", what, rid, request_id)
                continue
            if int(length) != len(answer):
                raise JoyentMetadataError(f"{what}: frame length {length} but {len(answer)} bytes")
            if checksum != _crc(answer):
                raise JoyentMetadataError(f"{what}: CRC mismatch (frame says {checksum}, body is {_crc(answer)})")
            if status != "SUCCESS" or not payload:
                return None
            try:
                return base64.b64decode(payload, validate=True).decode("utf-8", "replace")
            except ValueError:
                raise JoyentMetadataError(f"{what}: the value is not base64") from None

    def _get(self, key: str) -> str | None:
        return self.request(CLOUD.requests["get"].path, key)

    def keys(self) -> list[str]:
        listing = self.request(CLOUD.requests["keys"].path)
        return listing.split("\n") if listing else []

    def _is_base64(self, key: str) -> bool:
        if not self.legacy_base64 or key in NO_BASE64_DECODE:
            return False
        if self._base64_all is None:
            names = self.keys()
            self._base64_all = F["base64_all"] in names and _is_true(self._get(F["base64_all"]))
            self._base64_keys = set()
            if not self._base64_all:
                if F["base64_keys"] in names:
                    self._base64_keys = set((self._get(F["base64_keys"]) or "").split(","))
                # the marker b64-<key> is read for <key> (cloud-init 22.4 cuts three characters
                # off "b64-" and reads "-<key>", which never exists: its markers never take effect)
                marker = F["base64_marker"]
                for name in [n[len(marker):] for n in names if n.startswith(marker)]:
                    if _is_true(self._get(marker + name)):
                        self._base64_keys.add(name)
                    else:
                        self._base64_keys.discard(name)
        return bool(self._base64_all or key in (self._base64_keys or set()))

    def get(self, key: str, strip: bool = False) -> str | None:
        value = self._get(key)
        if value is None:
            return None
        if self._is_base64(key):
            import base64
            import binascii

            try:
                value = base64.b64decode(value.encode()).decode("utf-8", "replace")
            except binascii.Error:
                LOG.warning("SmartOS: failed base64 decoding key %r", key)
        return value.strip() if strip and value else value

    def get_json(self, key: str) -> Any:
        import json

        value = self.get(key)
        if value is None:
            return None
        try:
            return json.loads(value)
        except ValueError as e:
            raise JoyentMetadataError(f"{self.port.name}: {key} is not JSON: {e}") from None


def _crc(body: str) -> str:
    import binascii

    return f"{binascii.crc32(body.encode('utf-8')) & 0xFFFFFFFF:08x}"


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "on", "yes")


def convert_network_data(nics: list, dns_servers: Any = None, dns_domain: Any = None,
                         routes: list | None = None) -> dict:
    """``sdc:nics`` (+ resolvers, domain, routes) as a v1 network config, as cloud-init 22.4 builds it:
    one physical entry per NIC, a subnet per address (``dhcp`` -> dhcp4), the first gateway of each
    family on a primary NIC, every ``sdc:routes`` route on every static subnet."""
    physical_keys = ("mac_address", "mtu", "name", "params", "subnets", "type")
    subnet_keys = ("address", "broadcast", "dns_nameservers", "dns_search", "metric", "pointopoint", "routes",
                   "scope", "type")
    servers = dns_servers if isinstance(dns_servers, (list, tuple)) else ([dns_servers] if dns_servers else [])
    domains = dns_domain if isinstance(dns_domain, (list, tuple)) else ([dns_domain] if dns_domain else [])
    gateways: dict[str, str | None] = {"ipv4": None, "ipv6": None}
    config: list[dict] = []
    for nic in nics:
        if not isinstance(nic, dict) or "interface" not in nic:
            raise ValueError(f"sdc:nics: an entry without 'interface': {nic!r}"[:200])
        entry = {k: v for k, v in nic.items() if k in physical_keys}
        entry.update({"type": "physical", "name": nic["interface"]})
        if "mac" in nic:
            entry["mac_address"] = nic["mac"]
        subnets: list[dict] = []
        for ip in nic.get("ips", []):
            if ip == "dhcp":
                subnets.append({"type": "dhcp4"})
                continue
            subnet = {k: v for k, v in nic.items() if k in subnet_keys}
            subnet.update({"type": "static", "address": ip})
            family = "ipv4" if "." in ip else "ipv6"  # cloud-init's test: a dot means IPv4
            if nic.get("primary") and not gateways[family]:
                same = [gw for gw in nic.get("gateways", []) if ("." if family == "ipv4" else ":") in gw]
                if same:
                    gateways[family] = same[0]
                    subnet["gateway"] = same[0]
            entries = []
            for route in routes or []:
                found = {k: v for k, v in route.items() if k in ("network", "gateway")}
                found["network"] = route["dst"]
                entries.append(found)
                subnet["routes"] = entries
            subnets.append(subnet)
        entry["subnets"] = subnets
        config.append(entry)
    if servers:
        config.append({"type": "nameserver", "address": servers, "search": domains})
    return {"version": 1, "config": config}


class SmartOS(Datasource):
    name = "SmartOS"
    stages = (LOCAL,)
    platform = "joyent"
    sensitive_keys = ("user-data", "legacy-user-data", "user-script", "operator-script", "vendor-data")
    detection = (
        Dmi("product_name", "SmartDC*", "Joyent*"),
        Path(METADATA_SOCKFILE, kind="socket", setting="metadata_sockfile", why="LX-brand zone socket {value}"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "joyent"

    @classmethod
    def _socket(cls, ctx: DatasourceContext) -> str | None:
        import os
        import stat

        inner = str(ctx.ds_cfg(cls.name).get("metadata_sockfile") or METADATA_SOCKFILE)
        try:
            if stat.S_ISSOCK(os.lstat(ctx.root.path_nofollow(inner)).st_mode):
                return inner
        except OSError:
            pass
        return None

    def fetch(self) -> bool:
        from cloudseed.agent.datasources._serial_port import SerialError, SerialPort

        section = self.ctx.ds_cfg(self.name)
        try:
            timeout = float(section.get("timeout", section.get("serial_timeout", DEFAULT_TIMEOUT)))
            max_wait = float(section.get("max_wait", DEFAULT_MAX_WAIT))
        except (TypeError, ValueError):
            LOG.warning("datasource.SmartOS timeout/max_wait must be numbers; using the defaults")
            timeout, max_wait = DEFAULT_TIMEOUT, DEFAULT_MAX_WAIT
        timeout = max(0.1, min(timeout, max_wait))
        sock = self._socket(self.ctx)
        if sock:
            path, kvm = self.ctx.root.path_nofollow(sock), False
        elif section.get("serial_device"):  # a path on the running system
            path, kvm = str(section["serial_device"]), True
        else:
            path, kvm = self.ctx.root.path(SERIAL_DEVICE), True
        started = time.monotonic()
        deadline = started + max_wait
        try:
            with SerialPort.open(path, timeout) as port:
                client = JoyentClient(port, timeout, deadline, legacy_base64=kvm)
                if kvm:
                    client.flush()
                client.negotiate()
                md: dict[str, Any] = {key: client.get(name, strip=strip) for key, (name, strip) in ATTRIBUTES.items()}
                for key, name in JSON_ATTRIBUTES.items():
                    md[key] = client.get_json(name)
        except SerialError as e:
            raise JoyentMetadataError(str(e)) from None
        if not md["instance-id"]:
            raise JoyentMetadataError(f"{path}: the metadata host has no {F['instance_id']}")
        self._apply(md, path, kvm)
        LOG.info("SmartOS: read %s from %s in %.2fs", md["instance-id"], path, time.monotonic() - started)
        return True

    def _apply(self, md: dict[str, Any], path: str, kvm: bool) -> None:
        from cloudseed.agent.state import PER_BOOT, SCRIPT_DIRS

        data_d = f"{self.ctx.paths.instance_dir(md['instance-id'])}/data"
        user_script, operator_script = f"{data_d}/user-script", f"{data_d}/operator-script"
        self._write_boot_content(md.get("user-script"), user_script, link=f"{LEGACY_USER_D}/user-script",
                                 shebang=True, mode=0o700)
        self._write_boot_content(md.get("operator-script"), operator_script, mode=0o700)
        self._write_boot_content(md.get("legacy-user-data"), f"{LEGACY_USER_D}/mdata-user-data", mode=0o400)
        if not md["local-hostname"]:
            md["local-hostname"] = md["hostname"] or md["instance-id"]
        if not md["vendor-data"]:
            md["vendor-data"] = BUILTIN_VENDOR_DATA % {"user_script": user_script, "operator_script": operator_script,
                                                       "per_boot_d": SCRIPT_DIRS[PER_BOOT][0]}
        self.metadata = md
        self.userdata_raw = md["user-data"].encode("utf-8") if md["user-data"] else None
        self.vendordata_raw = md["vendor-data"].encode("utf-8")
        keys = md.get("public-keys") or ""
        self.public_keys = [k.strip() for k in keys.splitlines() if k.strip()]
        self.availability_zone = md.get("availability_zone") or None
        if md["network-data"] is not None:
            if not isinstance(md["network-data"], list):
                raise JoyentMetadataError(f"{path}: sdc:nics is not a JSON list")
            try:
                self.network_config = convert_network_data(md["network-data"], md["dns_servers"],
                                                           md["dns_domain"], md["routes"])
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise JoyentMetadataError(f"{path}: sdc:nics/sdc:routes: {e}") from None
        self.raw = {"meta_data": md}  # the script and data keys: redacted as sensitive_keys
        self.extra = {"smartos_type": "kvm" if kvm else "lx-brand"}
        if kvm:
            import copy

            aliases = self.ctx.ds_cfg(self.name).get("disk_aliases")
            md["block-device-mapping"] = dict(aliases) if isinstance(aliases, dict) else dict(KVM_DISK_ALIASES)
            self.extra["cloud_config"] = copy.deepcopy(KVM_CLOUD_CONFIG)  # over the system config, under user-data
        self.subplatform = f"serial ({path})" if kvm else f"socket ({path})"
        self._set_provisioned()

    def _write_boot_content(self, content: str | None, inner: str, link: str | None = None,
                            shebang: bool = False, mode: int = 0o400) -> None:
        """cloud-init's write_boot_content: no content removes the file (and link); a script
        without a ``#!`` line gets ``#!/bin/bash`` when it is text; ``link`` points at the file."""
        root = self.ctx.root
        if not content:
            root.remove(inner)
        if link and root.islink(link):
            root.remove(link)
        if not content:
            return
        if shebang and not content.startswith("#!") and "\0" not in content:
            content = "#!/bin/bash\n" + content
        root.write(inner, content, mode=mode)
        if link:
            root.symlink(inner, link)

    def _set_provisioned(self) -> None:
        """An LX zone's host waits for ``/var/svc/provisioning`` to become ``provision_success``."""
        import os

        root = self.ctx.root
        if root.exists("/var/svc/provisioning"):
            os.rename(root.path("/var/svc/provisioning"), root.path("/var/svc/provision_success"))


DATASOURCE = SmartOS
