"""One instance as the provider knows it: the ``InstanceRecord`` dataclass and its validation.

The metadata server, the admin API, ``cloudseed instances`` and the seed builder all read and
write this one shape. ``InstanceRecord.from_dict`` checks untrusted input (admin API JSON, CLI
flags) and raises ``RecordError`` naming the offending field; ``to_dict`` is its JSON inverse.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import ipaddress
import re
from typing import Any, Optional

from cloudseed.provider.registry.cloud_fields import validate_clouds
from cloudseed.provider.registry.ec2_fields import validate_ec2
from cloudseed.provider.registry.errors import RecordError

MAX_USER_DATA = 64 * 1024  # bytes, as Nova's limit (65,535) rounded to a power of two
MAX_PASSWORD = 1020  # bytes, the OpenStack password API's limit
MAX_JSON_BLOB = 256 * 1024  # serialized vendor-data / network-data / meta
DEFAULT_NETWORK = "default"

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                          r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NETWORK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_KEY_TYPES = ("ssh-rsa", "ssh-dss", "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
              "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")


@dataclasses.dataclass
class InstanceRecord:
    """Everything the provider publishes about one instance.

    ``addresses``: ``[{"address": "10.0.0.5", "network": "net-a"}]`` (optional keys ``mac``,
    ``prefix`` (int) and ``public`` (bool, an EC2 public-ipv4)); an address is unique within its
    network, so overlapping tenant ranges live on different networks.
    ``ssh_keys``: ``[{"name": "key0", "type": "ssh-ed25519", "data": "ssh-ed25519 AAAA... c"}]``
    (``type`` is the key algorithm; Nova's ``meta_data.json`` publishes every OpenSSH key as ``ssh``).
    ``tags``: ``{"env": "test"}``, EC2 instance tags with their values.
    ``gateway``: the default routes of derived network documents, at most one address per family
    (None: derived, the first address of the first static subnet of each family; ``[]``: none);
    ``nameservers``: their DNS servers (None: the gateways; ``[]``: none).
    ``user_data`` is raw bytes (None when the instance has none); ``vendor_data`` and
    ``vendor_data2`` are any JSON value; ``network_data`` is an OpenStack ``network_data.json``
    document (None: derived from addresses and MACs). ``imds_tokens`` is ``"required"`` or
    ``"optional"`` (IMDSv2). ``password`` is the OpenStack password API's value (set once by
    the guest, cleared by an operator) or, for a CloudStack/Exoscale record, the password the
    password server hands the guest; ``password_by`` says who set it (``operator``: the admin
    API or ``cloudseed instances``; ``guest``: the OpenStack password API; ``""``: none), kept by
    the registry, never taken from input. ``ec2``: EC2-only settings (IAM role, metadata tags,
    spot, maintenance events, VPC, placement...), keys in ``registry/ec2_fields.py``.
    """

    instance_id: str
    name: str = ""
    hostname: str = ""
    availability_zone: str = "nova"
    project_id: str = ""
    addresses: list[dict] = dataclasses.field(default_factory=list)
    macs: list[str] = dataclasses.field(default_factory=list)
    ssh_keys: list[dict] = dataclasses.field(default_factory=list)
    user_data: Optional[bytes] = None
    vendor_data: Any = None
    vendor_data2: Any = None
    network_data: Optional[dict] = None
    gateway: Optional[list] = None  # default routes of derived network documents (None: derived)
    nameservers: Optional[list] = None  # their DNS servers (None: the gateway)
    meta: dict = dataclasses.field(default_factory=dict)
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    imds_tokens: str = "optional"
    password: Optional[str] = None
    password_by: str = ""  # "operator", "guest" or "" (no password); set by the registry, not by input
    launch_index: int = 0
    instance_type: str = "m1.small"
    ami_id: str = "ami-00000000"
    created_at: str = ""
    ec2: dict = dataclasses.field(default_factory=dict)  # EC2-only settings (registry/ec2_fields.py)
    clouds: dict = dataclasses.field(default_factory=dict)  # GCE/DO/Hetzner/Oracle (registry/cloud_fields.py)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.hostname or self.instance_id
        if not self.hostname:
            self.hostname = self.name
        if not self.created_at:
            self.created_at = utc_now()

    # -- conversion ------------------------------------------------------------------------
    def to_dict(self, with_password: bool = False) -> dict:
        """JSON-ready dict; ``user_data`` as text when UTF-8, else ``user_data_b64``."""
        out = dataclasses.asdict(self)
        user_data = out.pop("user_data")
        if user_data is not None:
            try:
                out["user_data"] = user_data.decode("utf-8")
            except UnicodeDecodeError:
                out["user_data_b64"] = base64.b64encode(user_data).decode("ascii")
        else:
            out["user_data"] = None
        if not with_password:
            out["password_set"] = out.pop("password") is not None
        return out

    @classmethod
    def from_dict(cls, data: Any, *, partial_of: Optional[InstanceRecord] = None) -> InstanceRecord:
        """Validate untrusted ``data``; with ``partial_of``, fields not given keep its values."""
        if not isinstance(data, dict):
            raise RecordError("(body)", f"expected a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} | {"user_data_b64", "password_set"}
        for key in data:
            if key not in known:
                raise RecordError(str(key), "unknown field")
        base = dataclasses.asdict(partial_of) if partial_of is not None else {}
        values = dict(base)
        for key, value in data.items():
            if key in ("password_set", "password_by"):  # shown by to_dict, never set from input
                continue
            values[key] = value
        if "password" in data:  # given here: the operator's (the guest's arrive by set_password_once)
            values["password_by"] = "operator" if data["password"] is not None else ""
        if "user_data_b64" in data:
            if "user_data" in data and data["user_data"] is not None:
                raise RecordError("user_data_b64", "give user_data or user_data_b64, not both")
            encoded = values.pop("user_data_b64")
            if encoded is None:
                values["user_data"] = None
            else:
                if not isinstance(encoded, str):
                    raise RecordError("user_data_b64", "must be a base64 string")
                try:
                    values["user_data"] = base64.b64decode(encoded, validate=True)
                except (binascii.Error, ValueError):
                    raise RecordError("user_data_b64", "is not valid base64")
        elif isinstance(values.get("user_data"), str):
            values["user_data"] = values["user_data"].encode("utf-8")
        if partial_of is None and "instance_id" not in values:
            raise RecordError("instance_id", "is required")
        if partial_of is not None and values["instance_id"] != partial_of.instance_id:
            raise RecordError("instance_id", "cannot be changed")
        record = cls(**{k: v for k, v in values.items() if k in {f.name for f in dataclasses.fields(cls)}})
        record.validate()
        return record

    # -- validation ------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ``RecordError`` for the first invalid field; normalises MACs and key order."""
        _check_str("instance_id", self.instance_id)
        if not _ID_RE.match(self.instance_id):
            raise RecordError("instance_id", f"{self.instance_id!r} must be 1-128 characters of "
                                              "letters, digits, '.', '_', ':' or '-'")
        for field in ("name", "availability_zone", "project_id", "instance_type", "ami_id", "created_at"):
            _check_str(field, getattr(self, field), limit=255)
        _check_str("hostname", self.hostname)
        if not _HOSTNAME_RE.match(self.hostname):
            raise RecordError("hostname", f"{self.hostname!r} is not a valid host name")
        self._validate_addresses()
        if not isinstance(self.macs, list):
            raise RecordError("macs", "must be a list of MAC addresses")
        for i, mac in enumerate(self.macs):
            if not isinstance(mac, str) or not _MAC_RE.match(mac.lower()):
                raise RecordError(f"macs[{i}]", f"{mac!r} is not a MAC address like 52:54:00:12:34:56")
        self.macs = [m.lower() for m in self.macs]
        self._validate_keys()
        if self.user_data is not None:
            if not isinstance(self.user_data, (bytes, bytearray)):
                raise RecordError("user_data", "must be text or bytes")
            self.user_data = bytes(self.user_data)
            if len(self.user_data) > MAX_USER_DATA:
                raise RecordError("user_data",
                                  f"is {len(self.user_data)} bytes, the limit is {MAX_USER_DATA}")
        for field in ("vendor_data", "vendor_data2", "network_data", "meta"):
            _check_json_size(field, getattr(self, field))
        if self.network_data is not None:
            _check_network_data(self.network_data)
        if not isinstance(self.meta, dict) or not all(isinstance(k, str) for k in self.meta):
            raise RecordError("meta", "must be an object with string keys")
        self._validate_tags()
        self._validate_routing()
        self.ec2 = validate_ec2(self.ec2)
        self.clouds = validate_clouds(self.clouds)
        if self.imds_tokens not in ("required", "optional"):
            raise RecordError("imds_tokens", f"{self.imds_tokens!r} must be 'required' or 'optional'")
        if self.password is None:
            self.password_by = ""
        elif self.password_by not in ("operator", "guest"):
            self.password_by = "operator"
        if self.password is not None:
            _check_str("password", self.password, limit=None)
            if len(self.password.encode("utf-8")) > MAX_PASSWORD:
                raise RecordError("password", f"is longer than {MAX_PASSWORD} bytes")
        if isinstance(self.launch_index, bool) or not isinstance(self.launch_index, int) \
                or self.launch_index < 0:
            raise RecordError("launch_index", "must be a non-negative integer")

    def _validate_addresses(self) -> None:
        if not isinstance(self.addresses, list):
            raise RecordError("addresses", "must be a list of {address, network} objects")
        seen: set[tuple[str, str]] = set()
        normalised = []
        for i, entry in enumerate(self.addresses):
            where = f"addresses[{i}]"
            if isinstance(entry, str):
                entry = parse_address_spec(entry, where)
            if not isinstance(entry, dict):
                raise RecordError(where, "must be an object with 'address' and 'network'")
            for key in entry:
                if key not in ("address", "network", "mac", "prefix", "public"):
                    raise RecordError(f"{where}.{key}", "unknown field")
            address = entry.get("address")
            parsed = _ip(address, f"{where}.address")
            # an IPv4-mapped IPv6 address is the IPv4 address (the server sees IPv4 peers of a
            # dual-stack socket that way): one form, so one instance per address holds
            mapped = getattr(parsed, "ipv4_mapped", None)
            address = str(mapped if mapped is not None else parsed)
            network = entry.get("network") or DEFAULT_NETWORK
            if not isinstance(network, str) or not _NETWORK_RE.match(network):
                raise RecordError(f"{where}.network", f"{network!r} is not a valid network name")
            if (network, address) in seen:
                raise RecordError(f"{where}.address", f"{address} is listed twice on network {network}")
            seen.add((network, address))
            clean: dict[str, Any] = {"address": address, "network": network}
            if entry.get("mac") is not None:
                mac = entry["mac"]
                if not isinstance(mac, str) or not _MAC_RE.match(mac.lower()):
                    raise RecordError(f"{where}.mac", f"{mac!r} is not a MAC address")
                clean["mac"] = mac.lower()
            if entry.get("prefix") is not None:
                prefix = entry["prefix"]
                limit = 32 if ":" not in address else 128
                if isinstance(prefix, bool) or not isinstance(prefix, int) or not 0 <= prefix <= limit:
                    raise RecordError(f"{where}.prefix", f"{prefix!r} must be an integer 0-{limit}")
                clean["prefix"] = prefix
            if entry.get("public"):
                clean["public"] = True
            normalised.append(clean)
        self.addresses = normalised

    def _validate_routing(self) -> None:
        """``gateway`` and ``nameservers``: None, or lists of IP addresses (a string is one)."""
        for field, limit in (("gateway", 2), ("nameservers", 8)):
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or len(value) > limit:
                raise RecordError(field, f"must be a list of at most {limit} IP addresses (or null: derived)")
            clean, families = [], set()
            for i, item in enumerate(value):
                address = _ip(item, f"{field}[{i}]")
                if field == "gateway" and address.version in families:
                    raise RecordError(f"{field}[{i}]", f"a second IPv{address.version} gateway: one default "
                                                       "route per family")
                families.add(address.version)
                clean.append(str(address))
            setattr(self, field, clean)

    def _validate_tags(self) -> None:
        """Tags are ``{key: value}`` (EC2 ``tags/instance/KEY`` is the value); a list of keys
        (the first release's form) means keys with empty values."""
        tags = self.tags
        if isinstance(tags, list):
            if not all(isinstance(t, str) for t in tags):
                raise RecordError("tags", "must be an object of tag keys to string values")
            tags = {t: "" for t in tags}
        if not isinstance(tags, dict):
            raise RecordError("tags", "must be an object of tag keys to string values")
        for key, value in tags.items():
            if not isinstance(key, str) or not key or len(key) > 128 or "/" in key \
                    or any(ord(c) < 32 for c in key) or key in (".", ".."):
                raise RecordError(f"tags.{key}", "a tag key is 1-128 characters, without '/' or control "
                                                 "characters (it is a path in EC2 metadata)")
            if not isinstance(value, str) or len(value) > 256:
                raise RecordError(f"tags.{key}", "a tag value is a string of at most 256 characters")
        self.tags = dict(sorted(tags.items()))

    def _validate_keys(self) -> None:
        if not isinstance(self.ssh_keys, list):
            raise RecordError("ssh_keys", "must be a list of {name, type, data} objects")
        clean = []
        for i, key in enumerate(self.ssh_keys):
            where = f"ssh_keys[{i}]"
            if isinstance(key, str):
                key = {"data": key}
            if not isinstance(key, dict):
                raise RecordError(where, "must be an object with 'data'")
            data = key.get("data")
            if not isinstance(data, str) or not data.strip() or "\n" in data.strip():
                raise RecordError(f"{where}.data", "must be one public key line")
            data = data.strip()
            key_type = key.get("type") or data.split()[0]
            if key_type not in _KEY_TYPES or not data.startswith(key_type + " ") or len(data.split()) < 2:
                raise RecordError(f"{where}.data", f"is not an OpenSSH public key line (type {key_type!r})")
            name = key.get("name") or f"key{i}"
            if not isinstance(name, str) or not _ID_RE.match(name):
                raise RecordError(f"{where}.name", f"{name!r} is not a valid key name")
            clean.append({"name": name, "type": key_type, "data": data})
        self.ssh_keys = clean


def parse_address_spec(spec: str, where: str = "address") -> dict:
    """``10.0.0.5`` or ``10.0.0.5/24@net-a`` (CLI form) into an address dict."""
    address, _, network = spec.partition("@")
    entry: dict[str, Any] = {"address": address, "network": network or DEFAULT_NETWORK}
    if "/" in address:
        address, _, prefix = address.partition("/")
        if not (prefix.isascii() and prefix.isdigit()) or len(prefix) > 3:
            raise RecordError(f"{where}.prefix", f"{prefix!r} is not a prefix length")
        entry.update(address=address, prefix=int(prefix))
    return entry


def _ip(value: Any, where: str) -> Any:
    """``value`` as an IP address object, else ``RecordError`` naming ``where``."""
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return ipaddress.ip_address(value)
    except ValueError:
        raise RecordError(where, f"{value!r} is not an IP address")


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_str(field: str, value: Any, limit: Optional[int] = 255) -> None:
    if not isinstance(value, str):
        raise RecordError(field, f"must be a string, got {type(value).__name__}")
    if limit is not None and len(value) > limit:
        raise RecordError(field, f"is longer than {limit} characters")


def _check_json_size(field: str, value: Any) -> None:
    import json

    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise RecordError(field, f"is not JSON-serialisable ({error})")
    if size > MAX_JSON_BLOB:
        raise RecordError(field, f"is {size} bytes as JSON, the limit is {MAX_JSON_BLOB}")


def _check_network_data(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise RecordError("network_data", "must be an object with links, networks and services")
    for key in doc:
        if key not in ("links", "networks", "services"):
            raise RecordError(f"network_data.{key}", "unknown field (expected links, networks, services)")
    for key in ("links", "networks", "services"):
        if not isinstance(doc.get(key, []), list):
            raise RecordError(f"network_data.{key}", "must be a list")
        for i, item in enumerate(doc.get(key, [])):
            if not isinstance(item, dict):
                raise RecordError(f"network_data.{key}[{i}]", "must be an object")
