"""Ec2: the EC2 instance metadata service (IMDS) at 169.254.169.254 and [fd00:ec2::254].

IMDSv2 first: ``PUT /latest/api/token`` with a TTL header, both endpoints side by side, the first
answer wins; the token goes on every request and is renewed on a 401. IMDSv1 (no token) only when
the service does not offer v2 (404/405 on the PUT) and ``datasource: Ec2: {imdsv1: false}`` is not
set; a 403 means the service is disabled and nothing more is asked. The ``meta-data/`` tree is
crawled (bounded: entries, depth, size; IAM credentials are never fetched), with ``user-data`` and
``dynamic/instance-identity/`` (the document and the signatures the service lists). Network
config v2 is built from the per-MAC data.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, Dmi, DmiSame, FileText, Setting
from cloudseed.agent.datasources._metadata_service import ServiceLimits, reachable, urls_from_cfg
from cloudseed.agent.datasources._metadata_service import system_macs as running_system_macs
from cloudseed.clouds.ec2 import CLOUD

LOG = logging.getLogger("cloudseed.datasources.ec2")

# the wire contract (addresses, paths, headers, versions) is clouds/ec2.py's; paths here are relative
DEFAULT_URLS = CLOUD.addresses
TOKEN_PATH = CLOUD.tail("token")
TOKEN_HEADER, TTL_HEADER, TOKEN_TTL = CLOUD.names["token"], CLOUD.names["ttl"], CLOUD.names["ttl_value"]
VERSIONS, LATEST = CLOUD.versions, CLOUD.names["latest"]
F = CLOUD.fields  # the tree's and the identity document's names


def _path(role: str, version: str) -> str:
    """The contract's ``role`` request for ``version``, relative to the service's base (no slashes around)."""
    return CLOUD.tail(role, version).strip("/")


MAX_ENTRIES = 1000
MAX_DEPTH = 10
MAX_LEAF = 1024 * 1024
MAX_USERDATA = 16 * 1024 * 1024
NEVER_CRAWLED = (F["credentials"],)
SIGNED_IDENTITY = CLOUD.requests["signatures"].fields


class ImdsError(Exception):
    """The service answered but cannot be used; the message names the URL."""


class Imds:
    """One metadata service endpoint, with its session token when IMDSv2 is in use."""

    def __init__(self, base: str, limits: ServiceLimits, token: str | None = None):
        self.base = base
        self.limits = limits
        self.token = token
        self.requests = 0

    def _headers(self) -> dict[str, str]:
        return {TOKEN_HEADER: self.token} if self.token else {}

    def renew_token(self) -> None:
        from cloudseed.core.http import request

        resp = request(f"{self.base}/{TOKEN_PATH}", method="PUT", headers={TTL_HEADER: TOKEN_TTL},
                       timeout=self.limits.timeout, max_bytes=4096)
        self.token = resp.body.decode("ascii", "replace").strip()

    def get(self, path: str, max_bytes: int = MAX_LEAF) -> bytes | None:
        """The body at ``path`` (None on 404), renewing an expired token once."""
        from cloudseed.core.http import FetchError, fetch

        self.requests += 1
        if self.requests > MAX_ENTRIES:
            raise ImdsError(f"{self.base}: more than {MAX_ENTRIES} metadata requests; stopping the crawl")
        url = f"{self.base}/{path}"
        for attempt in range(2):
            try:
                return fetch(url, timeout=self.limits.timeout, retries=self.limits.retries,
                             headers=self._headers(), max_bytes=max_bytes,
                             max_wait=self.limits.timeout * (self.limits.retries + 1) + 2)
            except FetchError as e:
                if e.status == 404:
                    return None
                if e.status == 401 and self.token and attempt == 0:
                    LOG.info("Ec2: token refused at %s; renewing it", url)
                    try:
                        self.renew_token()
                    except FetchError as renew:
                        raise ImdsError(f"renewing the IMDSv2 token failed: {renew}") from None
                    continue
                raise ImdsError(str(e)) from None
        return None


def _decode_leaf(name: str, blob: bytes) -> Any:
    text = blob.decode("utf-8", "replace")
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            return json.loads(stripped)
        except ValueError:
            LOG.warning("Ec2: %s looks like JSON but does not parse; kept as text", name)
    if "\n" in stripped:
        return stripped.splitlines()
    return stripped


def _crawl(imds: Imds, path: str, depth: int) -> dict[str, Any]:
    listing = imds.get(path + "/")
    tree: dict[str, Any] = {}
    if listing is None:
        return tree
    if depth > MAX_DEPTH:
        raise ImdsError(f"{imds.base}/{path}: metadata nested deeper than {MAX_DEPTH} levels")
    for line in listing.decode("utf-8", "replace").splitlines():
        entry = line.strip()
        if not entry or entry.strip("/") in NEVER_CRAWLED or ".." in entry or entry.startswith("/"):
            continue
        if entry.endswith("/"):
            name = entry.rstrip("/")
            tree[name] = _crawl(imds, f"{path}/{name}", depth + 1)
            continue
        index, sep, key_name = entry.partition("=")
        if sep and index.isdigit():  # public-keys listing: "0=my-key" -> 0/openssh-key
            blob = imds.get(f"{path}/{index}/{F['openssh_key']}")
            name = key_name
        else:
            blob = imds.get(f"{path}/{entry}")
            name = entry
        if blob is not None and name not in tree:
            tree[name] = _decode_leaf(f"{path}/{name}", blob)
    return tree


def crawl_tree(base: str, path: str, limits: ServiceLimits, headers: dict[str, str] | None = None) -> dict:
    """The directory tree under ``base/path`` as nested dicts (used by OpenStack's EC2 mirror too)."""
    token = (headers or {}).get(TOKEN_HEADER)
    return _crawl(Imds(base, limits, token), path, 0)


def read_compatible_service(cloud: Any, urls: list[str], version: str, limits: ServiceLimits,
                            max_userdata: int) -> tuple[str, dict, bytes] | None:
    """An EC2-compatible service without tokens (CloudStack, Exoscale, AliYun): the first of ``urls``
    to answer ``VERSION/meta-data/instance-id`` (the contract's name), its crawled ``meta-data/`` and its ``user-data``
    (empty on 404), as (base, meta-data, user-data); None when none answered. The paths are those of
    ``cloud``'s contract (a ``cloudseed.clouds.Cloud`` with ``meta_data`` and ``user_data`` requests);
    errors name its datasource."""
    from cloudseed.core.http import FetchError, fetch, first_answer

    name = cloud.datasource
    meta_data, user_data = (cloud.tail(role, version).strip("/") for role in ("meta_data", "user_data"))
    leaf = f"/{meta_data}/{cloud.fields['instance_id']}"
    answer = first_answer([u + leaf for u in urls], timeout=limits.max_wait, max_wait=limits.max_wait,
                          max_bytes=4096)
    if answer is None:
        LOG.info("%s: no metadata service answered at %s within %gs", name, ", ".join(urls), limits.max_wait)
        return None
    if isinstance(answer[1], FetchError):
        LOG.warning("%s: %s", name, answer[1])
        return None
    base = answer[0][: -len(leaf)]
    try:
        meta = crawl_tree(base, meta_data, limits)
    except ImdsError as e:
        raise ValueError(f"{name}: {e}") from None
    instance_id = meta.get(cloud.fields["instance_id"])
    if not isinstance(instance_id, str) or not instance_id.strip():
        raise ValueError(f"{name}: {base}{leaf} is empty or not text")
    try:
        userdata = fetch(f"{base}/{user_data}", timeout=limits.timeout, retries=limits.retries,
                         max_bytes=max_userdata, max_wait=limits.timeout * (limits.retries + 1) + 2)
    except FetchError as e:
        if e.status != 404:
            raise ValueError(f"{name}: {e}") from None
        userdata = b""
    return base, meta, userdata


# ------------------------------------------------------------------------------- platform facts


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def cloud_name(ctx: DatasourceContext) -> str:
    """cloud-init 22.4's ``cloud_name`` for the EC2-compatible cloud the local facts identify, in
    its order: ``aws`` by the ec2 UUID, then ``brightbox``, ``zstack``, ``e24cloud``, ``outscale``;
    ``aws`` otherwise (also for DMI sys_vendor 'Amazon EC2' alone, and when the service is configured)."""
    uuid = ctx.dmi("product_uuid").lower()
    serial = ctx.dmi("product_serial").lower()
    hypervisor_uuid = ctx.root.read_text("/sys/hypervisor/uuid", default="").strip().lower()
    if hypervisor_uuid.startswith("ec2") or (uuid.startswith("ec2") and uuid == serial):
        return "aws"
    if serial.endswith(".brightbox.com"):
        return "brightbox"
    if ctx.dmi("chassis_asset_tag").lower().endswith(".zstack.io"):
        return "zstack"
    vendor = ctx.dmi("sys_vendor").lower()
    if vendor == "e24cloud":
        return "e24cloud"
    if vendor == "3ds outscale" and ctx.dmi("product_name").lower() == "3ds outscale vm":
        return "outscale"
    return "aws"


# ------------------------------------------------------------------------------ network config


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if str(v)]
    return [str(value)] if value else []


def _secondaries(nic: dict, key: str, cidr_key: str | None, default_prefix: str) -> list[str]:
    ips = _as_list(nic.get(key))
    if len(ips) < 2:
        return []
    cidrs = _as_list(nic.get(cidr_key)) if cidr_key else []
    prefix = cidrs[0].split("/")[1] if cidrs and "/" in cidrs[0] else default_prefix
    return [f"{ip}/{prefix}" for ip in ips[1:]]


def network_config_from_macs(macs: dict[str, Any], system_macs: dict[str, str] | None = None) -> dict | None:
    """Network config v2 for the NICs the metadata lists per MAC, with cloud-init 22.4's semantics:
    every NIC dhcp4, dhcp6 when it has ``ipv6s``, secondary addresses (prefix from
    ``subnet-ipv4-cidr-block``, else /24; IPv6 /128: 22.4 asks ``subnet-ipv6-cidr-block``, a name EC2's
    tree does not have (its is ``subnet-ipv6-cidr-blocks``), so it never finds a prefix), and with
    more than one NIC a DHCP route metric of 100 x (device-number + 1) so the primary NIC's
    default route wins. NICs are named by the system's name for their MAC (``set-name``).
    Unlike 22.4, a NIC the system does not have (yet) is kept, matched by MAC, as ``ethN``."""
    if not isinstance(macs, dict) or not macs:
        return None
    system = {m.lower(): n for m, n in (system_macs if system_macs is not None else running_system_macs()).items()}
    ethernets: dict[str, Any] = {}
    ordered = sorted(macs.items(), key=lambda kv: (str((kv[1] or {}).get(F["device_number"], "99")), kv[0]))
    for mac, nic in ordered:
        if not isinstance(nic, dict):
            continue
        number = str(nic.get(F["device_number"], len(ethernets)))
        number = number if number.isdigit() else str(len(ethernets))
        name = system.get(mac.lower())
        entry: dict[str, Any] = {"match": {"macaddress": mac.lower()}, "dhcp4": True,
                                 "dhcp6": bool(_as_list(nic.get(F["ipv6s"])))}
        if name:
            entry["set-name"] = name
        # secondary addresses in text order, as cloud-init 22.4 lists them
        addresses = sorted(_secondaries(nic, F["local_ipv4s"], F["subnet_ipv4"], "24") +
                           _secondaries(nic, F["ipv6s"], None, "128"))
        if addresses:
            entry["addresses"] = addresses
        ethernets[name or f"eth{number}"] = (entry, int(number))
    if len(ethernets) > 1:
        for entry, number in ethernets.values():
            entry["dhcp4-overrides"] = {"route-metric": (number + 1) * 100}
            if entry["dhcp6"]:
                entry["dhcp6-overrides"] = {"route-metric": (number + 1) * 100}
    return {"version": 2, "ethernets": {name: entry for name, (entry, _n) in ethernets.items()}}


# --------------------------------------------------------------------------------- datasource


class Ec2(Datasource):
    name = "Ec2"
    stages = (LOCAL, NETWORK)
    platform = "ec2"
    sensitive_keys = (F["identity_credentials"],)
    # EC2 and the EC2-compatible clouds that local facts identify, then configuration
    detection = (
        Dmi("sys_vendor", "Amazon EC2"),
        FileText("/sys/hypervisor/uuid", "ec2*", nocase=True, why="Xen hypervisor uuid starts with 'ec2'"),
        AllOf(Dmi("product_uuid", "ec2*", nocase=True), DmiSame("product_uuid", "product_serial", nocase=True),
              why="DMI product_uuid and product_serial start with 'ec2'"),
        Dmi("product_serial", "*.brightbox.com", nocase=True, why="DMI product_serial is a Brightbox one"),
        Dmi("chassis_asset_tag", "*.zstack.io", nocase=True, why="DMI chassis_asset_tag is a ZStack one"),
        Dmi("sys_vendor", "e24cloud"),
        AllOf(Dmi("sys_vendor", "3DS Outscale"), Dmi("product_name", "3DS Outscale VM"),
              why="DMI says 3DS Outscale VM"),
        Setting("metadata_urls"),
        Setting("strict_id", "false", nocase=True, why="datasource.Ec2.strict_id is false"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = cloud_name(ctx)
        self.warnings: list[str] = []
        self.metadata_address: str | None = None
        self.imds_version = ""

    def fetch(self) -> bool:
        section = self.ctx.ds_cfg(self.name)
        limits = ServiceLimits.from_cfg(section)
        if limits.max_wait <= 0:
            return False
        if self.ctx.stage == LOCAL and not self.identified(self.ctx):
            LOG.debug("Ec2: platform not identified; not trying it before the network is up")
            return False
        with reachable(self.ctx, self.name) as ok:
            if not ok:
                return False
            imds = self._connect(urls_from_cfg(section, DEFAULT_URLS), limits, section.get("imdsv1", True))
            if imds is None:
                return False
            try:
                return self._read(imds)
            except ImdsError as e:
                LOG.error("Ec2: %s", e)
                raise

    def _connect(self, urls: list[str], limits: ServiceLimits, v1_allowed: Any) -> Imds | None:
        from cloudseed.core.http import FetchError, first_answer

        def final(e: FetchError) -> bool:  # the service is there and said no
            return e.status is not None and 400 <= e.status < 500 and e.status not in (408, 429)

        answer = first_answer([f"{u}/{TOKEN_PATH}" for u in urls], method="PUT", headers={TTL_HEADER: TOKEN_TTL},
                              timeout=limits.max_wait, max_wait=limits.max_wait, max_bytes=4096, accept=final)
        if answer is None:
            LOG.info("Ec2: no metadata service answered at %s within %gs", ", ".join(urls), limits.max_wait)
            return None
        url, result = answer
        base = url[: -len(TOKEN_PATH) - 1]
        self.metadata_address = base
        if isinstance(result, FetchError):
            if result.status == 403:
                LOG.warning("Ec2: %s refused a session token (HTTP 403): the metadata service is disabled", url)
                return None
            if result.status not in (404, 405):
                LOG.warning("Ec2: %s", result)
                return None
            if v1_allowed is False or str(v1_allowed).lower() == "false":
                LOG.warning("Ec2: %s does not offer IMDSv2 and datasource.Ec2.imdsv1 is false", base)
                return None
            LOG.info("Ec2: %s does not offer IMDSv2 (HTTP %s); using IMDSv1", base, result.status)
            self.imds_version = "v1"
            return Imds(base, limits)
        token = result.body.decode("ascii", "replace").strip()
        if not token:
            LOG.warning("Ec2: %s gave an empty session token", url)
            return None
        self.imds_version = "v2"
        return Imds(base, limits, token)

    def _version(self, imds: Imds) -> str:
        listing = imds.get(_path("versions", "")) or b""
        offered = {line.strip() for line in listing.decode("utf-8", "replace").splitlines()}
        return next((v for v in VERSIONS if v in offered), LATEST)

    def _read(self, imds: Imds) -> bool:
        started = time.monotonic()
        version = self._version(imds)
        meta = _crawl(imds, _path("meta_data", version), 0)
        if not meta.get(F["instance_id"]):
            LOG.warning("Ec2: %s/%s/meta-data has no instance-id", imds.base, version)
            return False
        userdata = imds.get(_path("user_data", version), max_bytes=MAX_USERDATA)
        identity: dict[str, Any] = {}
        doc = imds.get(_path("identity", version))
        if doc:
            try:
                loaded = json.loads(doc.decode("utf-8", "replace"))
                identity = loaded if isinstance(loaded, dict) else {}
            except ValueError as e:
                msg = f"{imds.base}/{_path('identity', version)}: invalid JSON: {e}"
                LOG.warning("Ec2: %s", msg)
                self.warnings.append(msg)
        self._fill(meta, userdata, identity)
        if self.userdata_raw and self.ctx.checks_signatures:  # signed user-data: user-data.sig beside it
            from cloudseed.agent.userdata_trust import read_signatures

            read_signatures(self, {"user-data": (f"{imds.base}/{_path('user_data', version)}", {})},
                            lambda url, _headers: imds.get(url[len(imds.base) + 1:], max_bytes=16 * 1024))
        signed = self._signed_identity(imds, version)
        self.raw = {"meta-data": meta, "dynamic": {"instance-identity": {"document": identity, **signed}},
                    "_metadata_api_version": version, "imds": self.imds_version}
        self.subplatform = f"metadata ({imds.base})"
        LOG.info("Ec2: read %s (%s, %d requests) from %s in %.2fs", version, self.imds_version, imds.requests,
                 imds.base, time.monotonic() - started)
        return True

    @staticmethod
    def _signed_identity(imds: Imds, version: str) -> dict[str, str]:
        """The identity's signatures the service lists (``pkcs7``, ``signature``, ``rsa2048``), as
        cloud-init 22.4 reads them, so ``query ds.dynamic.instance-identity.pkcs7`` answers."""
        listing = imds.get(_path("signatures", version) + "/") or b""
        names = {line.strip() for line in listing.decode("utf-8", "replace").splitlines()}
        signed = {}
        for name in SIGNED_IDENTITY:
            if name in names:
                blob = imds.get(f"{_path('signatures', version)}/{name}", max_bytes=64 * 1024)
                if blob:
                    signed[name] = blob.decode("ascii", "replace").strip()
        return signed

    def _fill(self, meta: dict[str, Any], userdata: bytes | None, identity: dict[str, Any]) -> None:
        md = dict(meta)
        md["instance-id"] = str(meta[F["instance_id"]])
        if meta.get(F["local_hostname"]):
            md["local-hostname"] = _as_list(meta[F["local_hostname"]])[0]
        keys = meta.get(F["public_keys"])
        found: list[str] = []
        if isinstance(keys, dict):
            for value in keys.values():
                found.extend(_as_list(value.get(F["openssh_key"]) if isinstance(value, dict) else value))
        else:
            found.extend(_as_list(keys))
        self.public_keys = [k.strip() for k in found if k.strip() and not k.startswith("#")]
        placement = meta.get(F["placement"]) if isinstance(meta.get(F["placement"]), dict) else {}
        zone = placement.get(F["zone"]) or identity.get(F["identity_zone"])
        self.availability_zone = str(zone) if zone else None
        region = identity.get(F["identity_region"]) or placement.get(F["region"])
        if not region and self.availability_zone:
            region = self.availability_zone.rstrip("abcdefghijklmnopqrstuvwxyz") or None
        self.region = str(region) if region else None
        if self.availability_zone:
            md["availability-zone"] = self.availability_zone
        if self.region:
            md["region"] = self.region
        self.metadata = md
        self.userdata_raw = userdata if userdata else None
        network = meta.get(F["network"])
        macs = ((network.get(F["interfaces"]) or {}).get(F["macs"])) if isinstance(network, dict) else None
        if self.ctx.ds_cfg(self.name).get("apply_network_config", True) is not False:
            self.network_config = network_config_from_macs(macs) if isinstance(macs, dict) else None


DATASOURCE = Ec2
