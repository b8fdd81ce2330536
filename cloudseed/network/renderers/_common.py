"""What every renderer shares: the output record, headers, and per-interface views of the model
that settle questions the input formats leave open (where global DNS and global routes go)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from cloudseed.network.errors import NetworkConfigError
from cloudseed.network.model import Interface, NetworkModel, Route

MARK = "cloudseed"
HEADER_LINES = (
    "Written by cloudseed from the instance's network configuration; changes will be lost.",
    "To stop cloudseed writing it, add a file in /etc/cloud/cloud.cfg.d/ containing",
    "network: {config: disabled}",
)


@dataclass
class RenderedFile:
    path: str        # inside the target root
    content: str
    mode: int = 0o644


def header(comment: str = "#") -> str:
    return "".join(f"{comment} {line}\n" for line in HEADER_LINES)


def _where(iface: Interface | None) -> str:
    if iface is None:
        return "network config"
    return f"interface {iface.name!r} ({iface.path})" if iface.path else f"interface {iface.name!r}"


def left_out(model: NetworkModel, renderer: str, iface: Interface | None, what: str,
             consequence: str = "rendered without it") -> None:
    """Record that ``renderer`` cannot express ``what`` and renders the rest without it.

    At boot a refused configuration is a machine without network, so renderers drop only the
    option they cannot write and say so (cloud-init drops such options silently).
    """
    line = f"{_where(iface)}: the {renderer} renderer cannot express {what}; {consequence}"
    if line not in model.warnings:
        model.warnings.append(line)


def begin(model: NetworkModel) -> None:
    """Start a rendering: forget what an earlier renderer left out."""
    model.warnings.clear()


# ---------------------------------------------------------------------- DNS
def dns_targets(model: NetworkModel) -> list:
    """Interfaces that carry the global nameservers in per-interface formats.

    Every interface with address configuration and no DNS of its own; when they all have their
    own, the first one with address configuration (so the global servers are never lost).
    """
    if not (model.nameservers or model.search):
        return []
    l3 = [i for i in model.ordered() if i.has_l3 and i.master is None]
    targets = [i.name for i in l3 if not (i.all_nameservers() or i.all_search())]
    if not targets and l3:
        targets = [l3[0].name]
    return targets


def dns_for(model: NetworkModel, renderer: str) -> dict:
    """name -> (nameservers, search) including the global ones where they are attached."""
    targets = dns_targets(model)
    if (model.nameservers or model.search) and not targets:
        left_out(model, renderer, None, "global nameservers without an interface that has address "
                 "configuration (it attaches them to interfaces)", "they are left out")
    out = {}
    for iface in model.ordered():
        servers, search = iface.all_nameservers(), iface.all_search()
        if iface.name in targets:
            servers = servers + [s for s in model.nameservers if s not in servers]
            search = search + [d for d in model.search if d not in search]
        out[iface.name] = (servers, search)
    return out


# ---------------------------------------------------------------------- routes
def assign_global_routes(model: NetworkModel, strict: bool = False) -> dict:
    """name -> global routes that belong on that interface (the one on the gateway's network).

    A route no interface can reach is left out with a warning (the rest still renders), or is
    an error with ``strict``.
    """
    out: dict = {}
    for i, route in enumerate(model.routes):
        owner = route_owner(model, route)
        if owner is None:
            line = (f"routes[{i}]: cannot tell which interface reaches {route.gateway or route.destination}; "
                    "no interface has an address on that network (put the route under the interface)")
            if strict:
                raise NetworkConfigError(line)
            line += "; the route is left out"
            if line not in model.warnings:
                model.warnings.append(line)
            continue
        out.setdefault(owner, []).append(route)
    return out


def route_owner(model: NetworkModel, route: Route) -> str | None:
    if route.gateway:
        gw = ipaddress.ip_address(route.gateway)
        for iface in model.ordered():
            for s in iface.static_subnets(route.family):
                if gw in s.network:
                    return iface.name
    candidates = [i.name for i in model.ordered() if i.master is None and any(
        (s.family == route.family and s.type != "manual") for s in i.subnets)]
    if len(candidates) == 1:
        return candidates[0]
    return None


def routes_for(model: NetworkModel, iface: Interface, global_routes: dict, with_gateways: bool = True) -> list:
    """All routes of ``iface``: default routes from subnet gateways (with the subnet's metric),
    subnet routes, interface routes, then the global routes assigned to it."""
    out = []
    if with_gateways:
        out += gateway_routes(iface)
    out += iface.all_routes()
    out += global_routes.get(iface.name, [])
    return out


def gateway_routes(iface: Interface) -> list:
    out = []
    for s in iface.static_subnets():
        if s.gateway:
            out.append(Route(network="::" if s.family == 6 else "0.0.0.0", prefix=0,
                             gateway=s.gateway, metric=s.metric))
    return out


# ---------------------------------------------------------------------- misc checks
def default_broadcast(subnet) -> bool:
    if not subnet.broadcast:
        return True
    return ipaddress.ip_address(subnet.broadcast) == subnet.network.broadcast_address


def expressible(model: NetworkModel, renderer: str, *, globs: bool = False, driver_only: bool = False,
                broadcast: bool = True, loopback: bool = False, rename_by_name: bool = False) -> NetworkModel:
    """The part of ``model`` that ``renderer`` can express; what it cannot is left out with a warning.

    A copy is returned (the caller's model is not changed) whose ``warnings`` list is the
    caller's, so the caller sees what was left out. Options the renderer declares it cannot
    write: addresses on the loopback interface (its DNS becomes global DNS), NICs matched by a
    name pattern or by driver alone (``rename_by_name``: an exact name with ``set-name`` is
    renamed by a udev rule), a broadcast address other than the network's; and for every renderer
    but netplan's, the netplan keys an interface carries as given (``Interface.netplan_only``).
    """
    import copy

    begin(model)
    view = copy.deepcopy(model)
    view.warnings = model.warnings
    for iface in list(view.interfaces.values()):
        if iface.type == "loopback":
            _lift_loopback_dns(view, iface)
            if iface.subnets and not loopback and any(s.is_static for s in iface.subnets):
                left_out(model, renderer, iface, "addresses on the loopback interface",
                         "the loopback interface keeps only 127.0.0.1")
            if not loopback:
                iface.subnets = [s for s in iface.subnets if not s.is_static]
            continue
        exact_rename = (rename_by_name and iface.match_name and iface.set_name
                        and not any(c in iface.match_name for c in "*?["))
        if iface.match_name and not globs and not exact_rename and (
                iface.match_name != iface.name or any(c in iface.match_name for c in "*?[")):
            _drop_interface(view, model, renderer, iface, f"matching interfaces by name pattern {iface.match_name!r}")
            continue
        if iface.match_driver and not iface.mac and not driver_only:
            _drop_interface(view, model, renderer, iface, "matching an interface by driver alone")
            continue
        if iface.netplan_only and renderer != "netplan":
            for key in iface.netplan_only:
                left_out(model, renderer, iface, f"netplan's {key}")
            iface.netplan_only = {}
        if not broadcast:
            for s in iface.static_subnets():
                if not default_broadcast(s):
                    left_out(model, renderer, iface, f"the broadcast address {s.broadcast}",
                             "the network's own broadcast address is used")
                    s.broadcast = None
    view.link()
    return view


def _lift_loopback_dns(view: NetworkModel, lo: Interface) -> None:
    """DNS given on the loopback interface is system-wide DNS (as v1 configs use it)."""
    servers, search = lo.all_nameservers(), lo.all_search()
    view.nameservers = view.nameservers + [n for n in servers if n not in view.nameservers]
    view.search = view.search + [d for d in search if d not in view.search]
    lo.nameservers, lo.search = [], []
    for s in lo.subnets:
        s.nameservers, s.search = [], []


def _drop_interface(view: NetworkModel, model: NetworkModel, renderer: str, iface: Interface, what: str) -> None:
    """Leave out ``iface`` and what is built on it (VLANs on it; its place in a bond or bridge)."""
    left_out(model, renderer, iface, what, "the interface is left out")
    del view.interfaces[iface.name]
    for other in list(view.interfaces.values()):
        if iface.name in other.members:
            other.members = [m for m in other.members if m != iface.name]
        if other.type == "vlan" and other.vlan_link == iface.name and other.name in view.interfaces:
            _drop_interface(view, model, renderer, other, f"a VLAN on the left-out interface {iface.name!r}")


def udev_rules(model: NetworkModel) -> list:
    """``RenderedFile`` with rules renaming NICs by MAC (for formats that cannot rename)."""
    lines = []
    for iface in model.ordered():
        if iface.type == "physical" and iface.set_name and iface.mac:
            driver = iface.match_driver or "?*"
            lines.append(f'SUBSYSTEM=="net", ACTION=="add", DRIVERS=="{driver}", '
                         f'ATTR{{address}}=="{iface.mac}", NAME="{iface.name}"\n')
        elif iface.type == "physical" and iface.set_name and iface.match_name and iface.match_name != iface.name:
            # matched by its exact kernel name (expressible() left out patterns)
            lines.append(f'SUBSYSTEM=="net", ACTION=="add", KERNEL=="{iface.match_name}", NAME="{iface.name}"\n')
    if not lines:
        return []
    return [RenderedFile("/etc/udev/rules.d/70-cloudseed-net.rules", header() + "".join(lines))]


def is_member(model: NetworkModel, iface: Interface) -> bool:
    return iface.master is not None


def master_kind(model: NetworkModel, iface: Interface) -> str | None:
    if iface.master is None:
        return None
    return model.interfaces[iface.master].type
