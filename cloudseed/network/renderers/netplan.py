"""netplan YAML (``/etc/netplan/50-cloudseed.yaml``, mode 0600 as netplan wants).

Default gateways are written as ``routes: [{to: default, via: ...}]`` (netplan deprecates
``gateway4``/``gateway6``). Global nameservers go on the interfaces (netplan has no global DNS).
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

NAME = "netplan"
DESCRIPTION = "netplan (/etc/netplan)"
PATH = "/etc/netplan/50-cloudseed.yaml"
OWNED = [PATH]
_SECTION = {"physical": "ethernets", "bond": "bonds", "bridge": "bridges", "vlan": "vlans"}


def available(root) -> bool:
    return bool(root.which("netplan"))


def render(model: NetworkModel, distro: str = "debian") -> list:
    return [RenderedFile(PATH, header() + dump(to_netplan(model)), 0o600)]


def to_netplan(model: NetworkModel) -> dict:
    model = expressible(model, "netplan", globs=True, driver_only=True, broadcast=False)
    dns = dns_for(model, "netplan") if model.interfaces else {}
    global_routes = assign_global_routes(model)
    net: dict = {"version": 2}
    if model.renderer:
        net["renderer"] = model.renderer
    for iface in model.ordered():
        section = net.setdefault(_SECTION[iface.type], {})
        section[iface.name] = _device(model, iface, dns.get(iface.name, ([], [])), global_routes)
    return {"network": net}


def _device(model: NetworkModel, iface: Interface, dns: tuple, global_routes: dict) -> dict:
    d: dict = {}
    if iface.type == "physical":
        match = {}
        if iface.mac:
            match["macaddress"] = iface.mac
        if iface.match_name:
            match["name"] = iface.match_name
        if iface.match_driver:
            match["driver"] = iface.match_driver
        if match:
            d["match"] = match
            if iface.set_name:
                d["set-name"] = iface.name
        if iface.wakeonlan:
            d["wakeonlan"] = True
    elif iface.type in ("bond", "bridge"):
        d["interfaces"] = list(iface.members)
        params = dict(iface.bond_params if iface.type == "bond" else iface.bridge_params)
        if params:
            d["parameters"] = params
    elif iface.type == "vlan":
        d["id"] = iface.vlan_id
        d["link"] = iface.vlan_link
    if iface.type != "physical" and iface.mac:
        d["macaddress"] = iface.mac
    mtu = iface.effective_mtu()
    if mtu:
        d["mtu"] = mtu
    if iface.ipv6_mtu():
        d["ipv6-mtu"] = iface.ipv6_mtu()
    control = iface.control()
    if control == "manual":
        d["activation-mode"] = "manual"
    if iface.optional or control == "hotplug":  # hotplug: up when it appears, boot does not wait
        d["optional"] = True
    _l3(model, iface, d)
    for key, value in iface.netplan_only.items():
        d.setdefault(key, value)
    routes = [_route(r) for r in routes_for(model, iface, global_routes)]
    if routes:
        d["routes"] = routes
    servers, search = dns
    if servers or search:
        ns: dict = {}
        if servers:
            ns["addresses"] = list(servers)
        if search:
            ns["search"] = list(search)
        d["nameservers"] = ns
    return d


def _l3(model: NetworkModel, iface: Interface, d: dict) -> None:
    types = {s.type for s in iface.subnets}
    if "dhcp4" in types:
        d["dhcp4"] = True
        overrides = dict(iface.dhcp4_overrides)
        metric = next((s.metric for s in iface.subnets if s.type == "dhcp4" and s.metric is not None), None)
        if metric is not None:
            overrides.setdefault("route-metric", metric)
        if overrides:
            d["dhcp4-overrides"] = overrides
    elif iface.dhcp4_overrides:
        left_out(model, "netplan", iface, "dhcp4-overrides without dhcp4")
    if types & {"dhcp6", "ipv6_dhcpv6-stateful", "ipv6_dhcpv6-stateless"}:
        d["dhcp6"] = True
        if iface.dhcp6_overrides:
            d["dhcp6-overrides"] = dict(iface.dhcp6_overrides)
    elif iface.dhcp6_overrides:
        left_out(model, "netplan", iface, "dhcp6-overrides without dhcp6")
    accept_ra = iface.accept_ra
    if types & {"ipv6_slaac", "ipv6_dhcpv6-stateless"}:
        if accept_ra is False:
            left_out(model, "netplan", iface, "SLAAC with accept-ra off", "accept-ra is turned on for SLAAC")
        accept_ra = True
    if accept_ra is not None:
        d["accept-ra"] = accept_ra
    addresses = [s.cidr for s in iface.static_subnets()]
    if addresses:
        d["addresses"] = addresses


def _route(r: Route) -> dict:
    out: dict = {"to": "default" if r.is_default else r.destination}
    if r.gateway:
        out["via"] = r.gateway
    if r.metric is not None:
        out["metric"] = r.metric
    if r.on_link:
        out["on-link"] = True
    if r.table is not None:
        out["table"] = r.table
    return out


def dump(data: dict) -> str:
    """Block-style YAML without aliases, keys in the order given (netplan reads any order)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, indent=4)
