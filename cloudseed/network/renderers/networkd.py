"""systemd-networkd (``/etc/systemd/network/10-cloudseed-NAME.{network,netdev,link}``).

``.link`` files rename NICs matched by MAC, ``.netdev`` files create bonds, bridges and VLANs,
``.network`` files configure every interface. Bond members are matched by their permanent MAC
(a bond gives its members its own MAC). Global nameservers go on the interfaces.
"""

from __future__ import annotations

from cloudseed.network.model import Interface, NetworkModel, Route
from cloudseed.network.renderers._common import (
    RenderedFile,
    assign_global_routes,
    dns_for,
    expressible,
    header,
    left_out,
    routes_for,
)

NAME = "networkd"
DESCRIPTION = "systemd-networkd (/etc/systemd/network)"
DIR = "/etc/systemd/network"
OWNED = [f"{DIR}/10-cloudseed-*"]

_BOND = {
    "mode": "Mode", "mii-monitor-interval": "MIIMonitorSec", "lacp-rate": "LACPTransmitRate",
    "min-links": "MinLinks", "transmit-hash-policy": "TransmitHashPolicy", "ad-select": "AdSelect",
    "all-slaves-active": "AllSlavesActive", "arp-interval": "ARPIntervalSec",
    "arp-ip-targets": "ARPIPTargets", "arp-validate": "ARPValidate", "arp-all-targets": "ARPAllTargets",
    "up-delay": "UpDelaySec", "down-delay": "DownDelaySec", "fail-over-mac-policy": "FailOverMACPolicy",
    "gratuitous-arp": "GratuitousARP", "packets-per-slave": "PacketsPerSlave",
    "primary-reselect-policy": "PrimaryReselectPolicy", "resend-igmp": "ResendIGMP",
    "learn-packet-interval": "LearnPacketIntervalSec",
}
_MS = ("MIIMonitorSec", "ARPIntervalSec", "UpDelaySec", "DownDelaySec")
_BRIDGE = {
    "stp": "STP", "forward-delay": "ForwardDelaySec", "hello-time": "HelloTimeSec",
    "max-age": "MaxAgeSec", "ageing-time": "AgeingTimeSec", "priority": "Priority",
}
_DHCP4 = {
    "route-metric": "RouteMetric", "use-dns": "UseDNS", "use-domains": "UseDomains",
    "use-hostname": "UseHostname", "use-mtu": "UseMTU", "use-routes": "UseRoutes",
    "send-hostname": "SendHostname", "hostname": "Hostname", "use-ntp": "UseNTP",
}
_DHCP6 = {"use-dns": "UseDNS", "use-domains": "UseDomains", "use-hostname": "UseHostname", "use-ntp": "UseNTP",
          "route-metric": "RouteMetric"}


def available(root) -> bool:
    return any(root.isfile(p) for p in ("/lib/systemd/systemd-networkd", "/usr/lib/systemd/systemd-networkd"))


class Unit:
    """An ordered INI file where sections and keys may repeat."""

    def __init__(self):
        self.sections: list = []

    def section(self, name: str) -> list:
        entries: list = []
        self.sections.append((name, entries))
        return entries

    def text(self) -> str:
        out = header()
        for name, entries in self.sections:
            if not entries:
                continue
            out += f"\n[{name}]\n" + "".join(f"{k}={v}\n" for k, v in entries)
        return out


def _yn(value: bool) -> str:
    return "yes" if value else "no"


def render(model: NetworkModel, distro: str = "debian") -> list:
    model = expressible(model, "networkd", globs=True, driver_only=True)
    dns = dns_for(model, "networkd") if model.interfaces else {}
    global_routes = assign_global_routes(model)
    files = []
    for iface in model.ordered():
        base = f"{DIR}/10-cloudseed-{iface.name}"
        link = _link(model, iface)
        if link is not None:
            files.append(RenderedFile(base + ".link", link.text()))
        netdev = _netdev(iface)
        if netdev is not None:
            files.append(RenderedFile(base + ".netdev", netdev.text()))
        files.append(RenderedFile(base + ".network",
                                  _network(model, iface, dns.get(iface.name, ([], [])), global_routes).text()))
    return files


def _mac_key(model: NetworkModel, iface: Interface) -> str:
    # a bond sets its MAC on its members: match them by the MAC they were born with
    if iface.master is not None and model.interfaces[iface.master].type == "bond":
        return "PermanentMACAddress"
    return "MACAddress"


def _link(model: NetworkModel, iface: Interface):
    if iface.type != "physical" or not (iface.set_name and iface.mac):
        return None
    unit = Unit()
    match = unit.section("Match")
    match.append((_mac_key(model, iface), iface.mac))
    if iface.match_driver:
        match.append(("Driver", iface.match_driver))
    link = unit.section("Link")
    link.append(("Name", iface.name))
    if iface.effective_mtu():
        link.append(("MTUBytes", iface.effective_mtu()))
    if iface.wakeonlan:
        link.append(("WakeOnLan", "magic"))
    return unit


def _netdev(iface: Interface):
    if iface.type not in ("bond", "bridge", "vlan"):
        return None
    unit = Unit()
    nd = unit.section("NetDev")
    nd.append(("Name", iface.name))
    nd.append(("Kind", iface.type))
    if iface.mac:
        nd.append(("MACAddress", iface.mac))
    if iface.effective_mtu():
        nd.append(("MTUBytes", iface.effective_mtu()))
    if iface.type == "bond":
        sec = unit.section("Bond")
        for key, value in iface.bond_params.items():
            if key == "primary":
                continue            # PrimarySlave= on the member
            opt = _BOND[key]
            if isinstance(value, list):
                value = " ".join(value)
            elif isinstance(value, bool):
                value = _yn(value)
            elif opt in _MS:
                value = f"{value}ms"
            sec.append((opt, value))
    elif iface.type == "bridge":
        sec = unit.section("Bridge")
        for key, value in iface.bridge_params.items():
            if key in ("path-cost", "port-priority"):
                continue            # [Bridge] Cost=/Priority= on the port
            sec.append((_BRIDGE[key], _yn(value) if isinstance(value, bool) else value))
    else:
        unit.section("VLAN").append(("Id", iface.vlan_id))
    return unit


def _network(model: NetworkModel, iface: Interface, dns: tuple, global_routes: dict) -> Unit:
    unit = Unit()
    match = unit.section("Match")
    if iface.type == "physical":
        if iface.mac:
            match.append((_mac_key(model, iface), iface.mac))
        if iface.match_driver:
            match.append(("Driver", iface.match_driver))
        if iface.match_name:
            match.append(("Name", iface.match_name))
        elif iface.set_name or not iface.mac:
            match.append(("Name", iface.name))
    else:
        match.append(("Name", iface.name))
    link = unit.section("Link")
    if iface.type != "physical" and iface.mac:
        link.append(("MACAddress", iface.mac))
    mtu = iface.effective_mtu()
    if mtu:
        link.append(("MTUBytes", mtu))
    if iface.control() == "manual":
        link.append(("ActivationPolicy", "manual"))
    if iface.optional:
        link.append(("RequiredForOnline", "no"))
    net = unit.section("Network")
    types = {s.type for s in iface.subnets}
    v4 = "dhcp4" in types
    v6 = bool(types & {"dhcp6", "ipv6_dhcpv6-stateful", "ipv6_dhcpv6-stateless"})
    if v4 or v6:
        net.append(("DHCP", "yes" if v4 and v6 else ("ipv4" if v4 else "ipv6")))
    accept_ra = iface.accept_ra
    if types & {"ipv6_slaac", "ipv6_dhcpv6-stateless"}:
        if accept_ra is False:
            left_out(model, "networkd", iface, "SLAAC with accept-ra off", "accept-ra is turned on for SLAAC")
        accept_ra = True
    if accept_ra is not None:
        net.append(("IPv6AcceptRA", _yn(accept_ra)))
    if iface.ipv6_mtu():
        net.append(("IPv6MTUBytes", iface.ipv6_mtu()))
    extra_addr = []
    for s in iface.static_subnets():
        if s.broadcast:
            extra_addr.append(s)
        else:
            net.append(("Address", s.cidr))
    servers, search = dns
    for s in servers:
        net.append(("DNS", s))
    if search:
        net.append(("Domains", " ".join(search)))
    if iface.master is not None:
        master = model.interfaces[iface.master]
        net.append(("Bond" if master.type == "bond" else "Bridge", master.name))
        if master.type == "bond" and master.bond_params.get("primary") == iface.name:
            net.append(("PrimarySlave", "yes"))
    for vlan in model.vlans_on(iface.name):
        net.append(("VLAN", vlan.name))
    for s in extra_addr:
        sec = unit.section("Address")
        sec.append(("Address", s.cidr))
        sec.append(("Broadcast", s.broadcast))
    for r in routes_for(model, iface, global_routes):
        _route(unit.section("Route"), r)
    _dhcp(model, unit, iface, v4, v6)
    if iface.master is not None and model.interfaces[iface.master].type == "bridge":
        params = model.interfaces[iface.master].bridge_params
        port = unit.section("Bridge")
        if iface.name in params.get("path-cost", {}):
            port.append(("Cost", params["path-cost"][iface.name]))
        if iface.name in params.get("port-priority", {}):
            port.append(("Priority", params["port-priority"][iface.name]))
    return unit


def _route(sec: list, r: Route) -> None:
    if not r.is_default or not r.gateway:
        sec.append(("Destination", r.destination))
    if r.gateway:
        sec.append(("Gateway", r.gateway))
    if r.metric is not None:
        sec.append(("Metric", r.metric))
    if r.on_link:
        sec.append(("GatewayOnLink", "yes"))
    if r.table is not None:
        sec.append(("Table", r.table))


def _dhcp(model: NetworkModel, unit: Unit, iface: Interface, v4: bool, v6: bool) -> None:
    if iface.dhcp4_overrides and not v4:
        left_out(model, "networkd", iface, "dhcp4-overrides without dhcp4")
    if iface.dhcp6_overrides and not v6:
        left_out(model, "networkd", iface, "dhcp6-overrides without dhcp6")
    if v4:
        sec = unit.section("DHCPv4")
        metric = next((s.metric for s in iface.subnets if s.type == "dhcp4" and s.metric is not None), None)
        overrides = dict(iface.dhcp4_overrides)
        if metric is not None:
            overrides.setdefault("route-metric", metric)
        for k, v in overrides.items():
            sec.append((_DHCP4[k], v if not isinstance(v, bool) else _yn(v)))
    if v6:
        sec = unit.section("DHCPv6")
        for k, v in iface.dhcp6_overrides.items():
            if k not in _DHCP6:
                left_out(model, "networkd", iface, f"dhcp6-overrides {k}")
                continue
            sec.append((_DHCP6[k], v if not isinstance(v, bool) else _yn(v)))
