"""ifupdown's /etc/network/interfaces format (``/etc/network/interfaces.d/50-cloudseed``).

One stanza per subnet, lower layers first; global DNS on ``lo`` (resolvconf picks it up), routes
as ``ip route`` commands on the interface's stanza of the same family, renames by udev rule.
ifupdown cannot match NICs by name pattern or driver, nor express most DHCP overrides: those
are left out with a warning naming each (a NIC matched by its exact name and renamed with
``set-name`` is renamed by a udev rule).
"""

from __future__ import annotations

import re

from cloudseed.network.model import Interface, NetworkModel, Route
from cloudseed.network.params import BOND_PARAMS
from cloudseed.network.renderers._common import (
    RenderedFile,
    assign_global_routes,
    expressible,
    header,
    left_out,
    routes_for,
    udev_rules,
)

NAME = "eni"
DESCRIPTION = "ifupdown (/etc/network/interfaces.d)"
PATH = "/etc/network/interfaces.d/50-cloudseed"
OWNED = [PATH, "/etc/udev/rules.d/70-cloudseed-net.rules"]

_BRIDGE_OPTS = {
    "ageing-time": "bridge_ageing", "priority": "bridge_bridgeprio", "forward-delay": "bridge_fd",
    "hello-time": "bridge_hello", "max-age": "bridge_maxage", "stp": "bridge_stp",
    "path-cost": "bridge_pathcost", "port-priority": "bridge_portprio",
}


def available(root) -> bool:
    has_tools = all(root.which(t) for t in ("ifup", "ifdown", "ifquery"))
    return bool(has_tools and (root.isfile("/etc/network/interfaces") or root.isdir("/etc/network/interfaces.d")))


def context(root) -> dict:
    """What of the target system the rendering depends on (``render``'s keywords): whether
    ``/etc/network/interfaces`` itself brings up the loopback interface (``auto lo`` and ``iface lo
    inet loopback``, as Debian's installer and images write it)."""
    from cloudseed.core.root import RootError

    try:
        text = root.read_text("/etc/network/interfaces", default="")
    except (OSError, RootError):  # unreadable: ours defines it, as before
        text = ""
    auto = iface = False
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] in (["auto"], ["allow-auto"]) and "lo" in words[1:]:
            auto = True
        elif words[:4] == ["iface", "lo", "inet", "loopback"]:
            iface = True
    return {"system_loopback": auto and iface}


def render(model: NetworkModel, distro: str = "debian", system_loopback: bool = False) -> list:
    """``system_loopback``: the system's own file brings up ``lo`` (``context``); then a loopback with
    nothing of the instance's on it (no DNS, no addresses) is not defined a second time. Where
    cloudseed differs from cloud-init, which always writes it: ifupdown brings up each definition,
    running every ``if-up.d`` hook again (``ifup lo`` took 0.4-0.5 s longer with two definitions in
    the lab guest under emulation, on networking.service's path at every boot; docs/lab.md, series U)."""
    model = expressible(model, "eni", loopback=True, rename_by_name=True)
    global_routes = assign_global_routes(model)
    stanzas = _loopback(model, system_loopback)
    for iface in model.ordered():
        _leave_out_inexpressible(model, iface)
        stanzas += _interface(model, iface, global_routes.get(iface.name, []))
    text = header() + "\n".join("\n".join(s) + "\n" for s in stanzas)
    return [RenderedFile(PATH, text)] + udev_rules(model)


# DHCP overrides ifupdown's dhclient stanza options can carry (see _interface)
_DHCP4_OPTIONS = ("route-metric", "hostname")


def _leave_out_inexpressible(model: NetworkModel, iface: Interface) -> None:
    """Drop (from this rendering's copy of the model) what ifupdown cannot express, saying so."""
    for key in sorted(iface.dhcp6_overrides):
        left_out(model, "eni", iface, f"dhcp6-overrides {key}")
    iface.dhcp6_overrides = {}
    for key in sorted(k for k in iface.dhcp4_overrides if k not in _DHCP4_OPTIONS):
        left_out(model, "eni", iface, f"dhcp4-overrides {key}")
        del iface.dhcp4_overrides[key]
    for holder in [iface, *iface.subnets]:
        kept = []
        for r in holder.routes:
            if r.table is not None:
                left_out(model, "eni", iface, f"a route to {r.destination} in table {r.table}",
                         "the route is left out")
            else:
                kept.append(r)
        holder.routes = kept


def _loopback(model: NetworkModel, system_loopback: bool = False) -> list:
    lo = model.interfaces.get("lo")
    if system_loopback and not (model.nameservers or model.search or (lo is not None and lo.static_subnets())):
        return []  # the system's file defines it, and the instance puts nothing on it
    lines = ["auto lo", "iface lo inet loopback"]
    if model.nameservers:
        lines.append("    dns-nameservers " + " ".join(model.nameservers))
    if model.search:
        lines.append("    dns-search " + " ".join(model.search))
    out = [lines]
    if lo is not None:
        for s in lo.static_subnets():
            out.append(["iface lo inet%s static" % ("6" if s.family == 6 else ""), f"    address {s.cidr}"])
    return out


def _method(subnet) -> tuple:
    """(family suffix, method, extra options) for a subnet."""
    t = subnet.type
    if t == "dhcp4":
        return "inet", "dhcp", []
    if t in ("dhcp6", "ipv6_dhcpv6-stateful"):
        return "inet6", "dhcp", []
    if t == "ipv6_slaac":
        return "inet6", "auto", ["dhcp 0"]
    if t == "ipv6_dhcpv6-stateless":
        return "inet6", "auto", ["dhcp 1"]
    if t == "manual":
        return "inet", "manual", []
    return ("inet6" if subnet.family == 6 else "inet"), "static", []


def _interface(model: NetworkModel, iface: Interface, extra_routes: list) -> list:
    name = iface.name
    control = iface.control()
    subnets = [s for s in iface.subnets] or [None]
    sections = []
    attrs = _attrs(model, iface)
    mtu = iface.effective_mtu()
    routes = routes_for(model, iface, {name: extra_routes}, with_gateways=False)
    first_of_family: dict = {}
    for idx, subnet in enumerate(subnets):
        lines = []
        if idx == 0:
            if control == "auto" and not iface.optional:
                lines.append(f"auto {name}")
            elif control in ("auto", "hotplug"):    # optional: boot does not wait for it
                lines.append(f"allow-hotplug {name}")
        if subnet is None:
            fam, method, opts = "inet", "manual", []
        else:
            fam, method, opts = _method(subnet)
        lines.append(f"iface {name} {fam} {method}")
        body = list(opts)
        if subnet is not None:
            if subnet.is_static:
                body.append(f"address {subnet.cidr}")
                if subnet.broadcast:
                    body.append(f"broadcast {subnet.broadcast}")
                if subnet.gateway:
                    body.append(f"gateway {subnet.gateway}")
                    if subnet.metric is not None and fam == "inet":
                        body.append(f"metric {subnet.metric}")
            if subnet.type == "dhcp4":
                metric = iface.dhcp4_overrides.get("route-metric", subnet.metric)
                if metric is not None:
                    body.append(f"metric {metric}")
                if iface.dhcp4_overrides.get("hostname"):
                    body.append(f"hostname {iface.dhcp4_overrides['hostname']}")
            if subnet.nameservers:
                body.append("dns-nameservers " + " ".join(subnet.nameservers))
            if subnet.search:
                body.append("dns-search " + " ".join(subnet.search))
            if fam == "inet6" and iface.accept_ra is not None and method != "auto":
                body.append(f"accept_ra {1 if iface.accept_ra else 0}")
            if fam == "inet6" and subnet.mtu and method == "static":
                body.append(f"mtu {subnet.mtu}")
        if idx == 0:
            body += attrs
            if mtu:
                if method in ("static", "manual") and fam == "inet":
                    body.append(f"mtu {mtu}")
                else:
                    body.append(f"pre-up ip link set dev {name} mtu {mtu}")
            if iface.nameservers:
                body.append("dns-nameservers " + " ".join(iface.nameservers))
            if iface.search:
                body.append("dns-search " + " ".join(iface.search))
        first_of_family.setdefault(fam, len(sections))
        sections.append((fam, lines, body))
    # routes go on the first stanza of their family (the address must be there first)
    for r in routes:
        fam = "inet6" if r.family == 6 else "inet"
        target = first_of_family.get(fam, 0)
        sections[target][2].extend(_route_lines(name, r))
    return [lines + ["    " + b for b in body] for _fam, lines, body in sections]


def _attrs(model: NetworkModel, iface: Interface) -> list:
    out = []
    if iface.type in ("bond", "bridge", "vlan") and iface.mac:
        out.append(f"hwaddress {iface.mac}")
    if iface.wakeonlan:
        out.append("ethernet-wol g")
    if iface.master is not None and model.interfaces[iface.master].type == "bond":
        out.append(f"bond-master {iface.master}")
    if iface.type == "bond":
        out.append("bond-slaves none")
        for key, value in iface.bond_params.items():
            opt = BOND_PARAMS[key][0].replace("_", "-")
            if isinstance(value, list):
                value = " ".join(value)
            elif isinstance(value, bool):
                value = "1" if value else "0"
            out.append(f"bond-{opt} {value}")
    if iface.type == "bridge":
        out.append("bridge_ports " + (" ".join(iface.members) or "none"))
        for key, value in iface.bridge_params.items():
            opt = _BRIDGE_OPTS[key]
            if isinstance(value, dict):
                out += [f"{opt} {port} {n}" for port, n in value.items()]
            elif isinstance(value, bool):
                out.append(f"{opt} {'on' if value else 'off'}")
            else:
                out.append(f"{opt} {value}")
    if iface.type == "vlan":
        out.append(f"vlan-raw-device {iface.vlan_link}")
        if not re.match(r"^vlan\d+$", iface.name) and iface.name.rsplit(".", 1)[0] != iface.vlan_link:
            out.append(f"vlan-id {iface.vlan_id}")
    return out


def _route_lines(name: str, r: Route) -> list:
    fam = "-6" if r.family == 6 else "-4"
    dest = "default" if r.is_default else r.destination
    spec = dest
    if r.gateway:
        spec += f" via {r.gateway}"
    if r.metric is not None:
        spec += f" metric {r.metric}"
    spec += f" dev {name}"
    if r.on_link:
        spec += " onlink"
    return [f"post-up ip {fam} route add {spec} || true", f"pre-down ip {fam} route del {spec} || true"]
