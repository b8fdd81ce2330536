"""NetworkManager keyfiles (``/etc/NetworkManager/system-connections/cloudseed-NAME.nmconnection``,
mode 0600).

One connection per interface; members point at their master by UUID (stable: derived from the
interface name). NetworkManager cannot rename NICs, so renames are udev rules. An interface
without IPv4 configuration gets ``ipv4.method=disabled`` (NetworkManager's default would be DHCP).
"""

from __future__ import annotations

import uuid

from cloudseed.network.model import Interface, NetworkModel, Route
from cloudseed.network.params import BOND_PARAMS
from cloudseed.network.renderers._common import (
    RenderedFile,
    assign_global_routes,
    dns_for,
    expressible,
    gateway_routes,
    header,
    left_out,
    udev_rules,
)

NAME = "network-manager"
DESCRIPTION = "NetworkManager keyfiles (/etc/NetworkManager/system-connections)"
DIR = "/etc/NetworkManager/system-connections"
OWNED = [f"{DIR}/cloudseed-*.nmconnection", "/etc/udev/rules.d/70-cloudseed-net.rules"]
UUID_NS = uuid.UUID("6c1f3d4e-8b0a-5d57-9a43-0c5eed000001")
_TYPES = {"physical": "ethernet", "bond": "bond", "bridge": "bridge", "vlan": "vlan"}
_BRIDGE = {"stp": "stp", "priority": "priority", "forward-delay": "forward-delay",
           "hello-time": "hello-time", "max-age": "max-age", "ageing-time": "ageing-time"}


def available(root) -> bool:
    return bool(root.which("NetworkManager") or
                (root.which("nmcli") and root.isfile("/etc/NetworkManager/NetworkManager.conf")))


def con_uuid(name: str) -> str:
    return str(uuid.uuid5(UUID_NS, name))


def conn_path(name: str) -> str:
    return f"{DIR}/cloudseed-{name}.nmconnection"


class Keyfile:
    def __init__(self):
        self.sections: dict = {}

    def set(self, section: str, key: str, value) -> None:
        if isinstance(value, bool):
            value = "true" if value else "false"
        self.sections.setdefault(section, {})[key] = str(value)

    def get(self, section: str, key: str):
        return self.sections.get(section, {}).get(key)

    def add_numbered(self, section: str, prefix: str, value: str) -> None:
        n = 1
        while self.get(section, f"{prefix}{n}") is not None:
            n += 1
        self.set(section, f"{prefix}{n}", value)

    def text(self) -> str:
        out = header()
        for name, entries in self.sections.items():
            out += f"\n[{name}]\n" + "".join(f"{k}={v}\n" for k, v in entries.items())
        return out


def render(model: NetworkModel, distro: str = "debian") -> list:
    model = expressible(model, "network-manager", globs=True, driver_only=True, broadcast=False)
    dns = dns_for(model, "network-manager") if model.interfaces else {}
    global_routes = assign_global_routes(model)
    files = []
    for iface in model.ordered():
        kf = _connection(model, iface, dns.get(iface.name, ([], [])), global_routes.get(iface.name, []))
        files.append(RenderedFile(conn_path(iface.name), kf.text(), 0o600))
    return files + udev_rules(model)


def _connection(model: NetworkModel, iface: Interface, dns: tuple, extra_routes: list) -> Keyfile:
    kf = Keyfile()
    ctype = _TYPES[iface.type]
    kf.set("connection", "id", f"cloudseed {iface.name}")
    kf.set("connection", "uuid", con_uuid(iface.name))
    kf.set("connection", "type", ctype)
    by_mac = iface.type == "physical" and iface.mac
    if not by_mac and not iface.match_name:
        kf.set("connection", "interface-name", iface.name)
    # above NetworkManager's own default connections, as cloud-init 24.x+ writes it
    kf.set("connection", "autoconnect-priority", 120)
    if iface.control() == "manual":
        kf.set("connection", "autoconnect", False)
    if iface.master is not None:
        master = model.interfaces[iface.master]
        kf.set("connection", "slave-type", master.type)
        kf.set("connection", "master", con_uuid(master.name))
    kf.set("user", "org.freedesktop.NetworkManager.origin", "cloudseed")
    if iface.match_name or iface.match_driver:
        if iface.match_name:
            kf.set("match", "interface-name", iface.match_name)
        if iface.match_driver:
            kf.set("match", "driver", iface.match_driver)
    eth = "ethernet"
    if iface.type == "physical":
        kf.sections.setdefault(eth, {})
        if iface.mac:
            kf.set(eth, "mac-address", iface.mac.upper())
        if iface.wakeonlan:
            kf.set(eth, "wake-on-lan", 64)
    elif iface.mac:
        kf.set(eth, "cloned-mac-address", iface.mac.upper())
    mtu = iface.effective_mtu()
    if mtu:
        kf.set(eth, "mtu", mtu)
    if iface.type == "bond":
        for key, value in iface.bond_params.items():
            if isinstance(value, list):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = int(value)
            kf.set("bond", BOND_PARAMS[key][0], value)
        kf.sections.setdefault("bond", {}).setdefault("mode", "balance-rr")
    elif iface.type == "bridge":
        kf.sections.setdefault("bridge", {})
        for key, value in iface.bridge_params.items():
            if key in _BRIDGE:
                kf.set("bridge", _BRIDGE[key], value)
    elif iface.type == "vlan":
        kf.set("vlan", "id", iface.vlan_id)
        kf.set("vlan", "parent", con_uuid(iface.vlan_link))
    if iface.master is not None:
        master = model.interfaces[iface.master]
        if master.type == "bridge":
            for key, nm in (("path-cost", "path-cost"), ("port-priority", "priority")):
                if iface.name in master.bridge_params.get(key, {}):
                    kf.set("bridge-port", nm, master.bridge_params[key][iface.name])
        return kf          # members have no IP configuration of their own
    _ip(model, iface, kf, dns, extra_routes)
    return kf


def _ip(model: NetworkModel, iface: Interface, kf: Keyfile, dns: tuple, extra_routes: list) -> None:
    types = {s.type for s in iface.subnets}
    # IPv4
    v4_static = iface.static_subnets(4)
    if "dhcp4" in types:
        kf.set("ipv4", "method", "auto")
    elif v4_static:
        kf.set("ipv4", "method", "manual")
    else:
        kf.set("ipv4", "method", "disabled")
    # IPv6 (stateful DHCPv6 is NetworkManager's "dhcp", without waiting for an RA: cloud-init 24.x+)
    v6_static = iface.static_subnets(6)
    if "ipv6_dhcpv6-stateful" in types:
        kf.set("ipv6", "method", "dhcp")
    elif types & {"dhcp6", "ipv6_slaac", "ipv6_dhcpv6-stateless"}:
        kf.set("ipv6", "method", "auto")
    elif v6_static:
        kf.set("ipv6", "method", "manual")
    elif iface.type == "bond" and not iface.subnets:  # (see bare_bond below)
        # a bond whose addresses live on a VLAN above it: no automatic IPv6 on the bond itself
        kf.set("ipv6", "method", "disabled")
    bare_bond = iface.type == "bond" and not iface.subnets
    for fam, subs in (("ipv4", v4_static), ("ipv6", v6_static)):
        if kf.get(fam, "method") not in (None, "disabled") or bare_bond:
            kf.set(fam, "may-fail", False)
        for s in subs:
            kf.add_numbered(fam, "address", s.cidr)
    # DHCP in both families: either answering is enough (cloud-init 24.x+)
    if all(kf.get(fam, "method") in ("auto", "dhcp") for fam in ("ipv4", "ipv6")):
        for fam in ("ipv4", "ipv6"):
            kf.set(fam, "may-fail", True)
    routes = gateway_routes(iface) + iface.all_routes() + list(extra_routes)
    for r in routes:
        fam = "ipv6" if r.family == 6 else "ipv4"
        if kf.get(fam, "method") in (None, "disabled"):
            left_out(model, "network-manager", iface, f"a route to {r.destination} without "
                     f"IPv{r.family} configuration", "the route is left out")
            continue
        if r.table is not None or r.on_link:
            _route(kf, fam, r)
            continue
        if r.is_default and r.gateway and kf.get(fam, "gateway") in (None, r.gateway):
            kf.set(fam, "gateway", r.gateway)
            if r.metric is not None:
                kf.set(fam, "route-metric", r.metric)
            continue
        _route(kf, fam, r)
    metric = iface.dhcp4_overrides.get("route-metric")
    if metric is None:
        metric = next((s.metric for s in iface.subnets if s.type == "dhcp4" and s.metric is not None), None)
    if metric is not None:
        kf.set("ipv4", "route-metric", metric)
    if iface.dhcp6_overrides.get("route-metric") is not None and kf.get("ipv6", "method") is not None:
        kf.set("ipv6", "route-metric", iface.dhcp6_overrides["route-metric"])
    for fam, ov in (("ipv4", iface.dhcp4_overrides), ("ipv6", iface.dhcp6_overrides)):
        for key, value in ov.items():
            if key == "route-metric":
                continue
            if key == "use-dns":
                kf.set(fam, "ignore-auto-dns", not value)
            elif key == "use-routes":
                kf.set(fam, "ignore-auto-routes", not value)
            elif key == "send-hostname":
                kf.set(fam, "dhcp-send-hostname", value)
            elif key == "hostname":
                kf.set(fam, "dhcp-hostname", value)
            else:
                left_out(model, "network-manager", iface, f"dhcp{fam[-1]}-overrides {key}")
    servers, search = dns
    if servers and all(kf.get(fam, "method") in (None, "disabled") for fam in ("ipv4", "ipv6")):
        left_out(model, "network-manager", iface, "nameservers without IP configuration",
                 "they are left out")
        servers = []
    for n in servers:
        fam = "ipv6" if ":" in n else "ipv4"
        if kf.get(fam, "method") is None:
            # a server of a family with no configuration here: NetworkManager's own default
            # method for it (auto, allowed to fail) keeps the server in its family's list
            kf.set(fam, "method", "auto")
            kf.set(fam, "may-fail", True)
        elif kf.get(fam, "method") == "disabled":
            left_out(model, "network-manager", iface, f"the IPv{fam[-1]} nameserver {n} on an interface "
                     f"with IPv{fam[-1]} disabled", "it is left out")
            continue
        kf.set(fam, "dns", (kf.get(fam, "dns") or "") + n + ";")
    if search:
        fam = "ipv4" if kf.get("ipv4", "method") != "disabled" else "ipv6"
        kf.set(fam, "dns-search", "".join(d + ";" for d in search))


def _route(kf: Keyfile, fam: str, r: Route) -> None:
    value = r.destination
    if r.gateway or r.metric is not None:
        value += "," + (r.gateway or "")
    if r.metric is not None:
        value += f",{r.metric}"
    kf.add_numbered(fam, "route", value)
    n = max(int(k[5:]) for k in kf.sections[fam] if k.startswith("route") and k[5:].isdigit())
    opts = []
    if r.table is not None:
        opts.append(f"table={r.table}")
    if r.on_link:
        opts.append("onlink=true")
    if opts:
        kf.set(fam, f"route{n}_options", ",".join(opts))
