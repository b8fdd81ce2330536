"""The internal network model every parser produces and every renderer reads.

The model is close to network config v1 (interfaces with a list of *subnets*), which is the
finest grain any of the input formats has: ENI needs one stanza per subnet, the other renderers
merge them per interface. Interface-level settings from v2 (``nameservers``, ``routes``,
``dhcp4-overrides``) stay on the interface.

Addresses are validated and normalised by the parsers; renderers can rely on them.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

from cloudseed.network.errors import NetworkConfigError

SUBNET_TYPES = (
    "static", "dhcp4", "dhcp6", "ipv6_slaac", "ipv6_dhcpv6-stateless", "ipv6_dhcpv6-stateful", "manual",
)
IPV6_DYNAMIC = ("dhcp6", "ipv6_slaac", "ipv6_dhcpv6-stateless", "ipv6_dhcpv6-stateful")
INTERFACE_TYPES = ("physical", "bond", "bridge", "vlan", "loopback")
BOND_MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb")
_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$|^[0-9a-f]{2}(:[0-9a-f]{2}){19}$")


@dataclass
class Route:
    network: str                    # "10.0.0.0", "::"
    prefix: int
    gateway: Optional[str] = None
    metric: Optional[int] = None
    table: Optional[int] = None
    on_link: bool = False

    @property
    def family(self) -> int:
        return 6 if ":" in self.network else 4

    @property
    def destination(self) -> str:
        return f"{self.network}/{self.prefix}"

    @property
    def netmask(self) -> str:
        return str(ipaddress.ip_network(self.destination).netmask)

    @property
    def is_default(self) -> bool:
        return self.prefix == 0


@dataclass
class Subnet:
    type: str                       # one of SUBNET_TYPES
    address: Optional[str] = None   # static only: the IP without prefix
    prefix: Optional[int] = None
    gateway: Optional[str] = None
    nameservers: list = field(default_factory=list)
    search: list = field(default_factory=list)
    routes: list = field(default_factory=list)
    mtu: Optional[int] = None
    metric: Optional[int] = None
    broadcast: Optional[str] = None
    control: str = "auto"           # auto | manual | hotplug

    @property
    def family(self) -> int:
        if self.type == "static":
            return 6 if ":" in (self.address or "") else 4
        if self.type in IPV6_DYNAMIC:
            return 6
        return 4

    @property
    def is_static(self) -> bool:
        return self.type == "static"

    @property
    def cidr(self) -> str:
        return f"{self.address}/{self.prefix}"

    @property
    def netmask(self) -> str:
        return str(ipaddress.ip_interface(self.cidr).netmask)

    @property
    def network(self):
        return ipaddress.ip_interface(self.cidr).network


@dataclass
class Interface:
    name: str
    type: str                       # one of INTERFACE_TYPES
    mac: Optional[str] = None       # physical: the MAC it is matched by; others: the MAC to set
    set_name: bool = False          # physical: rename the device with ``mac`` to ``name``
    match_name: Optional[str] = None    # v2 match.name (may be a glob)
    match_driver: Optional[str] = None  # v2 match.driver
    mtu: Optional[int] = None
    subnets: list = field(default_factory=list)
    nameservers: list = field(default_factory=list)   # interface-level DNS (v2, v1 nameserver+interface)
    search: list = field(default_factory=list)
    routes: list = field(default_factory=list)        # interface-level routes (v2)
    accept_ra: Optional[bool] = None
    wakeonlan: Optional[bool] = None
    optional: bool = False          # boot need not wait for it (v2 ``optional``)
    dhcp4_overrides: dict = field(default_factory=dict)
    dhcp6_overrides: dict = field(default_factory=dict)
    members: list = field(default_factory=list)       # bond slaves / bridge ports
    bond_params: dict = field(default_factory=dict)   # netplan names: mode, mii-monitor-interval...
    bridge_params: dict = field(default_factory=dict)  # netplan names: stp, forward-delay, priority...
    vlan_id: Optional[int] = None
    vlan_link: Optional[str] = None
    netplan_only: dict = field(default_factory=dict)  # netplan keys only the netplan renderer writes (as given)
    master: Optional[str] = None    # filled by NetworkModel.link(): the bond/bridge this is part of
    path: str = field(default="", compare=False)  # key path in the input, for error messages

    # ------------------------------------------------------------------ derived views
    def static_subnets(self, family: int | None = None) -> list:
        return [s for s in self.subnets if s.is_static and (family is None or s.family == family)]

    def has_type(self, *types: str) -> bool:
        return any(s.type in types for s in self.subnets)

    @property
    def dhcp4(self) -> bool:
        return self.has_type("dhcp4")

    @property
    def dhcp6(self) -> bool:
        return self.has_type("dhcp6", "ipv6_dhcpv6-stateful")

    @property
    def has_l3(self) -> bool:
        """True when the interface has any address configuration (static or dynamic)."""
        return any(s.type != "manual" for s in self.subnets)

    def all_nameservers(self) -> list:
        return _dedupe(list(self.nameservers) + [n for s in self.subnets for n in s.nameservers])

    def all_search(self) -> list:
        return _dedupe(list(self.search) + [d for s in self.subnets for d in s.search])

    def gateways(self, family: int) -> list:
        return _dedupe([s.gateway for s in self.static_subnets(family) if s.gateway])

    def all_routes(self) -> list:
        """Subnet routes then interface routes (gateways of subnets not included)."""
        return [r for s in self.subnets for r in s.routes] + list(self.routes)

    def effective_mtu(self) -> Optional[int]:
        """Device MTU: an IPv4 subnet MTU wins over the interface MTU (as in cloud-init)."""
        for s in self.subnets:
            if s.mtu and s.family == 4:
                return s.mtu
        return self.mtu

    def ipv6_mtu(self) -> Optional[int]:
        for s in self.subnets:
            if s.mtu and s.family == 6:
                return s.mtu
        return None

    def control(self) -> str:
        """auto unless every subnet says otherwise."""
        controls = {s.control for s in self.subnets}
        if not controls or "auto" in controls:
            return "auto"
        return "hotplug" if "hotplug" in controls else "manual"


@dataclass
class NetworkModel:
    interfaces: dict = field(default_factory=dict)   # name -> Interface, input order
    routes: list = field(default_factory=list)       # global routes (v1 ``route``)
    nameservers: list = field(default_factory=list)  # global DNS
    search: list = field(default_factory=list)
    renderer: Optional[str] = None                    # v2 ``renderer`` (networkd / NetworkManager)
    source_kind: str = ""                             # v1 | v2 | openstack | fallback...
    # what the last renderer could not express and left out (one line each, naming the
    # interface, its key in the input, the option and the renderer); filled by rendering
    warnings: list = field(default_factory=list, compare=False)

    _ORDER = {"loopback": 0, "physical": 1, "bond": 2, "vlan": 3, "bridge": 4}

    def ordered(self, include_loopback: bool = False) -> list:
        """Interfaces with the lower layers first: physical, bonds, vlans, bridges."""
        rank = {}
        for name in self.interfaces:
            rank[name] = self._depth(name, set())
        items = [i for i in self.interfaces.values() if include_loopback or i.type != "loopback"]
        return sorted(items, key=lambda i: (rank[i.name], self._ORDER[i.type]))

    def _depth(self, name: str, seen: set) -> int:
        iface = self.interfaces[name]
        if name in seen:
            return 0
        seen.add(name)
        lower = list(iface.members) + ([iface.vlan_link] if iface.vlan_link else [])
        lower = [n for n in lower if n in self.interfaces]
        return 1 + max((self._depth(n, seen) for n in lower), default=0)

    def __iter__(self) -> Iterator[Interface]:
        return iter(self.ordered())

    def get(self, name: str) -> Optional[Interface]:
        return self.interfaces.get(name)

    def members_of(self, name: str) -> list:
        return [i for i in self.interfaces.values() if i.master == name]

    def vlans_on(self, name: str) -> list:
        return [i for i in self.interfaces.values() if i.type == "vlan" and i.vlan_link == name]

    @property
    def uses_ipv6(self) -> bool:
        for iface in self.interfaces.values():
            if iface.accept_ra:
                return True
            for s in iface.subnets:
                if s.family == 6 and s.type != "manual":
                    return True
        return False

    def link(self) -> None:
        """Fill ``master`` on members (called by the parsers after validation)."""
        for iface in self.interfaces.values():
            iface.master = None
        for iface in self.interfaces.values():
            for m in iface.members:
                self.interfaces[m].master = iface.name


# ---------------------------------------------------------------------- value helpers
def _dedupe(items: list) -> list:
    out = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def fmt_path(base: str, key) -> str:
    """``base`` + ``key`` as a readable key path: config[2].subnets, ethernets.eth0."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    key = str(key)
    if "." in key or " " in key or not key:
        key = f'"{key}"'
    return f"{base}.{key}" if base else key


def fail(path: str, message: str) -> NetworkConfigError:
    return NetworkConfigError(f"{path}: {message}" if path else message)


def check_mac(value, path: str) -> str:
    if not isinstance(value, str):
        raise fail(path, f"{value!r} is not a MAC address")
    mac = value.strip().lower().replace("-", ":")
    if not _MAC_RE.match(mac):
        raise fail(path, f"{value!r} is not a MAC address")
    return mac


def check_ip(value, path: str, family: int | None = None) -> str:
    try:
        ip = ipaddress.ip_address(str(value).strip())
    except ValueError:
        raise fail(path, f"{value!r} is not a valid IP address")
    if family and ip.version != family:
        raise fail(path, f"{value!r} is not an IPv{family} address")
    return str(ip)


def _prefix_from_mask(mask: str, v6: bool, path: str) -> int:
    mask = str(mask).strip()
    if mask.isdigit():
        n = int(mask)
        if n > (128 if v6 else 32):
            raise fail(path, f"{mask!r} is not a valid prefix length")
        return n
    try:
        value = int(ipaddress.ip_address(mask))
    except ValueError:
        raise fail(path, f"{mask!r} is not a valid netmask")
    bits = 128 if v6 else 32
    if (":" in mask) != v6:
        raise fail(path, f"{mask!r} is not a valid IPv{6 if v6 else 4} netmask")
    plen = bin(value).count("1")
    if value != ((1 << bits) - 1) ^ ((1 << (bits - plen)) - 1):
        raise fail(path, f"{mask!r} is not a valid netmask (not contiguous)")
    return plen


def check_cidr(value, path: str, *, netmask=None, prefix=None, mask_path: str = "",
               default_prefix: bool = True) -> tuple:
    """Validate an address with optional ``/prefix`` (or netmask); return ``(ip, prefix)``."""
    if not isinstance(value, str) or not value.strip():
        raise fail(path, f"{value!r} is not a valid CIDR")
    text = value.strip()
    addr, sep, pre = text.partition("/")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise fail(path, f"{value!r} is not a valid CIDR")
    v6 = ip.version == 6
    if sep:
        try:
            plen = _prefix_from_mask(pre, v6, path)
        except NetworkConfigError:
            raise fail(path, f"{value!r} is not a valid CIDR")
    elif prefix not in (None, ""):
        plen = _prefix_from_mask(str(prefix), v6, mask_path or path)
    elif netmask not in (None, ""):
        plen = _prefix_from_mask(str(netmask), v6, mask_path or path)
    elif default_prefix:
        plen = 64 if v6 else 24
    else:
        raise fail(path, f"{value!r} has no prefix length")
    return str(ip), plen


def check_network(value, path: str, *, netmask=None, prefix=None, mask_path: str = "",
                  host_default: bool = False) -> tuple:
    """A route destination: ``default``, ``a.b.c.d/n`` or an address plus netmask/prefix.

    Returns ``(network, prefix)``; ``(None, 0)`` for ``default`` (the family comes from the
    gateway). Without any prefix, v1 semantics give /24 or /64 (as cloud-init does);
    ``host_default`` gives a host route instead (v2).
    """
    if isinstance(value, str) and value.strip() == "default":
        return None, 0
    if not isinstance(value, str) or not value.strip():
        raise fail(path, f"{value!r} is not a valid network")
    no_mask = "/" not in value and netmask in (None, "") and prefix in (None, "")
    if no_mask and host_default:
        ip = check_ip(value, path)
        plen = 128 if ":" in ip else 32
    else:
        ip, plen = check_cidr(value, path, netmask=netmask, prefix=prefix, mask_path=mask_path)
    net = ipaddress.ip_network(f"{ip}/{plen}", strict=False)
    return str(net.network_address), plen


def check_int(value, path: str, lo: int | None = None, hi: int | None = None, what: str = "an integer") -> int:
    if isinstance(value, bool):
        raise fail(path, f"{value!r} is not {what}")
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        raise fail(path, f"{value!r} is not {what}")
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise fail(path, f"{value!r} is out of range ({rng})")
    return n


def check_mtu(value, path: str) -> int:
    return check_int(value, path, 68, 65535, "a valid MTU")


_TRUE = ("1", "true", "yes", "on", "y")
_FALSE = ("0", "false", "no", "off", "n")


def check_bool(value, path: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise fail(path, f"{value!r} is not a boolean")


def check_str_list(value, path: str, split: bool = True) -> list:
    """A list of strings; a single string is split on whitespace (and commas) when ``split``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[\s,]+", value) if v] if split else [value]
    if not isinstance(value, (list, tuple)):
        raise fail(path, f"expected a list, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise fail(fmt_path(path, i), f"{v!r} is not a string")
        out.append(str(v))
    return out


def check_nameservers(value, path: str) -> list:
    out = []
    for i, v in enumerate(check_str_list(value, path)):
        out.append(check_ip(v, fmt_path(path, i) if not isinstance(value, str) else path))
    return _dedupe(out)


def check_search(value, path: str) -> list:
    out = []
    for i, v in enumerate(check_str_list(value, path)):
        if not re.match(r"^[A-Za-z0-9_.-]+$", v):
            raise fail(fmt_path(path, i) if not isinstance(value, str) else path,
                       f"{v!r} is not a valid search domain")
        out.append(v)
    return _dedupe(out)


def check_mapping(value, path: str) -> dict:
    if not isinstance(value, dict):
        raise fail(path, f"expected a mapping, got {type(value).__name__}")
    return value


def check_keys(mapping: dict, allowed, path: str) -> None:
    for key in mapping:
        if key not in allowed:
            raise fail(fmt_path(path, key), "unknown key")


def check_name(value, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise fail(path, f"{value!r} is not a valid interface name")
    if len(value) > 15 or "/" in value or any(c.isspace() for c in value) or value in (".", ".."):
        raise fail(path, f"{value!r} is not a valid interface name (at most 15 characters, no '/' or spaces)")
    return value
