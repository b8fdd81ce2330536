"""CloudStack: Apache CloudStack's virtual router, ``http://<router>/latest/`` and its password server on 8080.

Possible only where DMI ``product_name`` starts with ``CloudStack`` (CloudStack's KVM guests:
"CloudStack KVM Hypervisor", which is what cloud-init's ds-identify checks), or when
``datasource: CloudStack: {metadata_url: http://ROUTER/}`` is configured. Network stage only (as
cloud-init 22.4: the router is found from this boot's DHCP lease). The router's address, in
cloud-init 22.4's order: the ``data-server`` DNS name; ``SERVER_ADDRESS`` of a systemd-networkd
lease (/run/systemd/netif/leases); the newest dhclient lease (/var/lib/dhclient, /var/lib/dhcp,
/var/lib/NetworkManager; ``dhcp-server-identifier``, and NetworkManager's ``SERVER_ADDRESS=``
form too); the default gateway. Read: ``latest/meta-data/`` (flat: instance-id, local-hostname,
availability-zone, public-keys...) and ``latest/user-data``. Then the password server: ``GET
http://ROUTER:8080/`` with ``DomU_Request: send_my_password``; a password (not "",
``saved_password`` or ``bad_request``) is acknowledged with ``DomU_Request: saved_password`` (so
it is not served again) and kept in the datasource's private ``extra`` as cloud-init's config
(``password``, ``ssh_pwauth: true``, ``chpasswd.expire: false``) for ``set_passwords``; never in
instance data. Unlike cloud-init 22.4, a password whose acknowledgement fails is still used
(the user was told it) and the failure is logged, and a password served on a later boot (a
reset) makes ``set_passwords`` run again that boot (22.4 does that on Exoscale only).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from cloudseed.agent.datasources import NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits
from cloudseed.clouds.cloudstack import CLOUD

LOG = logging.getLogger("cloudseed.datasources.cloudstack")

PASSWORD_PORT = int(CLOUD.names["password_port"])  # the wire contract: clouds/cloudstack.py
PASSWORD_HEADER, SEND, SAVED = (CLOUD.names[k] for k in ("password_header", "send_password", "saved_password"))
LEASE_DIRS = ("/var/lib/dhclient", "/var/lib/dhcp", "/var/lib/NetworkManager")
NETWORKD_LEASES = "/run/systemd/netif/leases"
MAX_PASSWORD = 1024
NO_PASSWORD = ("", SAVED)


class PasswordServerError(Exception):
    """The password server answered something unusable; the message names the URL."""


# ------------------------------------------------------------------------- the router's address


def data_server(timeout: float) -> str | None:
    """The ``data-server`` DNS name's address, asked in a thread so a dead resolver costs ``timeout``."""
    import socket
    import threading

    found: list[str] = []

    def resolve() -> None:
        try:
            found.append(str(socket.getaddrinfo("data-server", 80, proto=socket.IPPROTO_TCP)[0][4][0]))
        except (OSError, IndexError, UnicodeError):
            pass

    worker = threading.Thread(target=resolve, daemon=True, name="data-server")
    worker.start()
    worker.join(timeout)
    return found[0] if found else None


def networkd_server(ctx: DatasourceContext) -> str | None:
    directory = ctx.root.path(NETWORKD_LEASES)
    found = None
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        text = ctx.root.read_text(f"{NETWORKD_LEASES}/{name}", default="")
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "SERVER_ADDRESS" and value.strip():
                found = value.strip()
    return found


def latest_lease(ctx: DatasourceContext) -> str | None:
    """The newest IPv4 lease file of the first lease directory that has files (as cloud-init 22.4)."""
    for directory in LEASE_DIRS:
        real = ctx.root.path(directory)
        names = os.listdir(real) if os.path.isdir(real) else []
        if not names:
            continue
        newest, newest_mtime = None, -1.0
        for name in names:
            if name.startswith("dhclient6") or not name.endswith((".lease", ".leases")):
                continue
            mtime = os.path.getmtime(os.path.join(real, name))
            if mtime > newest_mtime:
                newest, newest_mtime = f"{directory}/{name}", mtime
        return newest
    return None


def lease_server(text: str) -> str | None:
    """The last DHCP server identifier in a dhclient (``option dhcp-server-identifier A;``) or
    NetworkManager (``SERVER_ADDRESS=A``) lease file's text."""
    found = None
    for line in text.splitlines():
        words = line.strip(" ;\t\r\n").split()
        if "dhcp-server-identifier" in words:
            index = words.index("dhcp-server-identifier")
            if index + 1 < len(words):
                found = words[index + 1]
        elif line.strip().startswith("SERVER_ADDRESS="):
            found = line.strip().split("=", 1)[1].strip() or found
    return found


def default_gateway(ctx: DatasourceContext) -> str | None:
    import socket
    import struct

    for line in ctx.root.read_text("/proc/net/route", default="").splitlines()[1:]:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            try:
                return socket.inet_ntoa(struct.pack("<L", int(fields[2], 16)))
            except (ValueError, struct.error):
                return None
    return None


def router_address(ctx: DatasourceContext, dns_timeout: float) -> tuple[str | None, str]:
    """(the virtual router's address, how it was found)."""
    import ipaddress

    def valid(address: str | None) -> bool:
        try:
            return address is not None and ipaddress.ip_address(address).version == 4
        except ValueError:
            LOG.warning("CloudStack: %r is not an IPv4 address; ignored", address)
            return False

    found = data_server(dns_timeout)
    if valid(found):
        return found, "the data-server DNS name"
    found = networkd_server(ctx)
    if valid(found):
        return found, f"a systemd-networkd lease ({NETWORKD_LEASES})"
    lease = latest_lease(ctx)
    if lease:
        found = lease_server(ctx.root.read_text(lease, default=""))
        if valid(found):
            return found, f"the DHCP lease {lease}"
    found = default_gateway(ctx)
    if valid(found):
        return found, "the default gateway"
    return None, "no data-server name, DHCP lease or default route"


# --------------------------------------------------------------------------- the password server


def password_request(url: str, what: str, limits: ServiceLimits) -> str:
    from cloudseed.core.http import fetch

    body = fetch(url, headers={PASSWORD_HEADER: what}, timeout=limits.timeout, retries=limits.retries,
                 max_bytes=MAX_PASSWORD + 64, max_wait=limits.timeout * (limits.retries + 1) + 2)
    return body.decode("utf-8", "replace").strip()


def read_password(url: str, limits: ServiceLimits, name: str) -> str | None:
    """The password the server at ``url`` holds for this instance (acknowledged), or None.

    FetchError when the server cannot be read; PasswordServerError when its answer is unusable."""
    from cloudseed.core.http import FetchError

    answer = password_request(url, SEND, limits)
    if answer in NO_PASSWORD:
        return None
    if answer == "bad_request":
        raise PasswordServerError(f"{url} answered bad_request to send_my_password")
    if len(answer.encode("utf-8")) > MAX_PASSWORD or "\n" in answer or not answer.isprintable():
        raise PasswordServerError(f"{url}: the answer is not a one-line password ({len(answer)} characters)")
    try:
        password_request(url, SAVED, limits)
    except FetchError as e:
        LOG.warning("%s: acknowledging the password failed (%s); it may be served again", name, e)
    return answer


def password_config(password: str) -> dict[str, Any]:
    """cloud-init's config for a password from the password server (its default user's)."""
    return {"ssh_pwauth": True, "password": password, "chpasswd": {"expire": False}}


def apply_password(ds: Datasource, password: str) -> None:
    """Give ``password`` to ``set_passwords`` through the datasource's private config, and let the
    module run again on this boot: the server serves a password once, so one served on a later
    boot of the same instance is a reset from the console (cloud-init 22.4 runs set_passwords on
    every Exoscale boot for that reason)."""
    from cloudseed.agent.state import PER_INSTANCE, Semaphores

    ds.extra["cloud_config"] = password_config(password)
    try:
        sems = Semaphores(ds.ctx.paths, ds.instance_id)
        if sems.has_run("set_passwords", PER_INSTANCE):
            sems.clear("set_passwords", PER_INSTANCE)
            LOG.info("%s: a new password from the password server: set_passwords runs again", ds.name)
    except OSError as e:
        LOG.warning("%s: set_passwords cannot be made to run again (%s); the new password waits", ds.name, e)


# ------------------------------------------------------------------------------------ reading


def read_tree(ds: MetadataServiceDatasource, cloud: Any, base: str, version: str, limits: ServiceLimits,
              max_userdata: int) -> str:
    """Wait for ``base/version/meta-data/instance-id``, then crawl ``meta-data/`` and read ``user-data``
    into ``ds`` (metadata, keys, hostname, zone), at the paths and by the names of ``cloud``'s contract;
    the instance id, "" when the service never answered."""
    from cloudseed.agent.datasources.ec2 import read_compatible_service

    read = read_compatible_service(cloud, [base], version, limits, max_userdata)
    if read is None:
        return ""
    base, meta, userdata = read
    names = cloud.fields  # the tree's names, the contract's
    instance_id = meta[names["instance_id"]].strip()
    keys = meta.get(names["public_keys"])
    if isinstance(keys, dict):  # "0=name" listings: {name: {openssh-key: ...}} or {name: key}
        found = [v.get(names["openssh_key"]) if isinstance(v, dict) else v for v in keys.values()]
    else:
        found = keys if isinstance(keys, list) else [keys]
    ds.public_keys = [str(k).strip() for k in found if isinstance(k, str) and k.strip()]
    md = dict(meta)
    md["instance-id"] = instance_id
    hostname = meta.get(names["local_hostname"])
    if isinstance(hostname, str) and hostname.strip():
        md["local-hostname"] = hostname.strip()
    zone = meta.get(names["zone"])
    ds.availability_zone = zone.strip() if isinstance(zone, str) and zone.strip() else None
    ds.metadata = md
    ds.userdata_raw = userdata or None
    ds.served_at("user-data", f"{base}/{version}/user-data")
    ds.raw = {"meta-data": meta, "_metadata_api_version": version}
    return instance_id


class CloudStack(MetadataServiceDatasource):
    name = "CloudStack"
    stages = (NETWORK,)
    platform = "cloudstack"
    detection = (
        Dmi("product_name", "CloudStack*"),
        Setting("metadata_url"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.warnings: list[str] = []

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        from urllib.parse import urlsplit

        started = time.monotonic()
        configured = section.get("metadata_url")
        if configured:
            base = str(configured).rstrip("/")
            router = urlsplit(base).hostname
            how = "datasource.CloudStack.metadata_url"
        else:
            router, how = router_address(self.ctx, min(limits.max_wait, 2.0))
            if router is None:
                LOG.warning("CloudStack: no virtual router found (%s)", how)
                return False
            base = f"http://{router}"
        LOG.debug("CloudStack: virtual router %s (from %s)", router, how)
        instance_id = read_tree(self, CLOUD, base, CLOUD.versions[0], limits, 16 * 1024 * 1024)
        if not instance_id:
            return False
        self.metadata_address = base
        self.subplatform = f"metadata ({base})"
        if router and section.get("password_server", True) is not False:
            self._password(f"http://{router}:{int(section.get('password_server_port', PASSWORD_PORT))}/", limits)
        LOG.info("CloudStack: read %s from %s in %.2fs", instance_id, base,
                 time.monotonic() - started)
        return True

    def _password(self, url: str, limits: ServiceLimits) -> None:
        from cloudseed.core.http import FetchError

        try:
            password = read_password(url, limits, self.name)
        except (FetchError, PasswordServerError) as e:
            message = f"password server: {e}"
            LOG.warning("%s: %s", self.name, message)
            self.warnings.append(message)
            return
        if password:
            LOG.info("%s: the password server at %s has a password for this instance", self.name, url)
            apply_password(self, password)


DATASOURCE = CloudStack
