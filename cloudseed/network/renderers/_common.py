"""What every renderer shares: the output record, headers, and per-interface views of the model
that settle questions the input formats leave open (where global DNS and global routes go)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from cloudseed.network import NetworkConfigError
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


def refuse(renderer: str, iface: Interface | None, what: str) -> NetworkConfigError:
    where = f"interface {iface.name!r} ({iface.path})" if iface is not None and iface.path else (
        f"interface {iface.name!r}" if iface is not None else "network config")
    return NetworkConfigError(f"{where}: the {renderer} renderer cannot express {what}")


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
        raise NetworkConfigError(f"nameserver: the {renderer} renderer attaches global nameservers to an "
                                 "interface, and no interface has address configuration")
    out = {}
    for iface in model.ordered():
        servers, search = iface.all_nameservers(), iface.all_search()
        if iface.name in targets:
            servers = servers + [s for s in model.nameservers if s not in servers]
            search = search + [d for d in model.search if d not in search]
        out[iface.name] = (servers, search)
    return out


# ---------------------------------------------------------------------- routes
def assign_global_routes(model: NetworkModel) -> dict:
    """name -> global routes that belong on that interface (the one on the gateway's network)."""
    out: dict = {}
    for i, route in enumerate(model.routes):
        owner = route_owner(model, route)
        if owner is None:
            raise NetworkConfigError(
                f"routes[{i}]: cannot tell which interface reaches {route.gateway or route.destination}; "
                "no interface has an address on that network (put the route under the interface)")
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


def check_common(model: NetworkModel, renderer: str, *, globs: bool = False, driver_only: bool = False,
                 broadcast: bool = True, loopback: bool = False) -> None:
    """Refuse, for every renderer, what it declares it cannot express."""
    for iface in model.interfaces.values():
        if iface.type == "loopback" and iface.subnets and not loopback:
            raise refuse(renderer, iface, "addresses on the loopback interface")
        if iface.match_name and not globs and (
                iface.match_name != iface.name or any(c in iface.match_name for c in "*?[")):
            raise refuse(renderer, iface, f"matching interfaces by name pattern {iface.match_name!r}")
        if iface.match_driver and not iface.mac and not driver_only:
            raise refuse(renderer, iface, "matching an interface by driver alone")
        if not broadcast:
            for s in iface.static_subnets():
                if not default_broadcast(s):
                    raise refuse(renderer, iface, f"the broadcast address {s.broadcast}")


def udev_rules(model: NetworkModel) -> list:
    """``RenderedFile`` with rules renaming NICs by MAC (for formats that cannot rename)."""
    lines = []
    for iface in model.ordered():
        if iface.type == "physical" and iface.set_name and iface.mac:
            driver = iface.match_driver or "?*"
            lines.append(f'SUBSYSTEM=="net", ACTION=="add", DRIVERS=="{driver}", '
                         f'ATTR{{address}}=="{iface.mac}", NAME="{iface.name}"\n')
    if not lines:
        return []
    return [RenderedFile("/etc/udev/rules.d/70-cloudseed-net.rules", header() + "".join(lines))]


def is_member(model: NetworkModel, iface: Interface) -> bool:
    return iface.master is not None


def master_kind(model: NetworkModel, iface: Interface) -> str | None:
    if iface.master is None:
        return None
    return model.interfaces[iface.master].type
