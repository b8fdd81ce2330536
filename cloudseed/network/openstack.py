"""OpenStack ``network_data.json``: into the model, and a model back out.

``links`` are devices (``phy``, ``ovs``, ``tap``, ``vif``, ``bridge``... are all a NIC seen from
the guest; ``bond`` and ``vlan`` are built on other links), ``networks`` are address
configurations on a link, ``services`` carries DNS servers. NIC names come from a link's
``name`` when present, else from its MAC through the system (or the given MAC map).
"""

from __future__ import annotations

import ipaddress

from cloudseed.network.errors import NetworkConfigError
from cloudseed.network.model import (
    Interface,
    NetworkModel,
    Route,
    Subnet,
    check_cidr,
    check_int,
    check_ip,
    check_mac,
    check_mapping,
    check_mtu,
    check_name,
    check_nameservers,
    check_network,
    check_search,
    fail,
    fmt_path,
)
from cloudseed.network.params import BOND_PARAMS, check_bond_value, v1_bond_key
from cloudseed.network.validate import check_references

_NETWORK_TYPES = {
    "ipv4": "static", "static": "static", "ipv6": "static", "static6": "static",
    "ipv4_dhcp": "dhcp4", "ipv6_dhcp": "dhcp6", "ipv6_slaac": "ipv6_slaac",
    "ipv6_dhcpv6-stateless": "ipv6_dhcpv6-stateless", "ipv6_dhcpv6-stateful": "ipv6_dhcpv6-stateful",
}


def parse_openstack(data: dict, resolver) -> NetworkModel:
    model = NetworkModel(source_kind="openstack")
    links = data.get("links") or []
    networks = data.get("networks") or []
    services = data.get("services") or []
    for key, value in (("links", links), ("networks", networks), ("services", services)):
        if not isinstance(value, list):
            raise fail(key, f"expected a list, got {type(value).__name__}")
    by_id: dict[str, Interface] = {}
    pending: list = []
    bond_no = 0
    for i, link in enumerate(links):
        path = fmt_path("links", i)
        check_mapping(link, path)
        if link.get("id") in (None, ""):
            raise fail(fmt_path(path, "id"), "required")
        lid = str(link["id"])
        if lid in by_id:
            raise fail(fmt_path(path, "id"), f"duplicate link id {lid!r}")
        ltype = link.get("type")
        iface = Interface(name="", type="physical", path=path)
        if link.get("mtu") not in (None, ""):
            iface.mtu = check_mtu(link["mtu"], fmt_path(path, "mtu"))
        if ltype == "bond":
            iface.type = "bond"
            if link.get("name"):
                iface.name = check_name(link["name"], fmt_path(path, "name"))
            else:
                iface.name = f"bond{bond_no}"
                bond_no += 1
            if link.get("ethernet_mac_address"):
                iface.mac = check_mac(link["ethernet_mac_address"], fmt_path(path, "ethernet_mac_address"))
            for key, value in link.items():
                if not key.startswith("bond_") or key == "bond_links":
                    continue
                canon = v1_bond_key(key)
                if canon is None:
                    raise fail(fmt_path(path, key), "unknown bond parameter")
                iface.bond_params[canon] = check_bond_value(canon, value, fmt_path(path, key))
            members = link.get("bond_links")
            if not isinstance(members, list):
                raise fail(fmt_path(path, "bond_links"), "a bond needs a list of member link ids")
            pending.append((iface, "members", members, fmt_path(path, "bond_links")))
        elif ltype == "vlan":
            iface.type = "vlan"
            if link.get("vlan_link") in (None, ""):
                raise fail(fmt_path(path, "vlan_link"), "required")
            if link.get("vlan_id") in (None, ""):
                raise fail(fmt_path(path, "vlan_id"), "required")
            iface.vlan_id = check_int(link["vlan_id"], fmt_path(path, "vlan_id"), 1, 4094, "a VLAN id")
            mac = link.get("vlan_mac_address") or link.get("ethernet_mac_address")
            if mac:
                iface.mac = check_mac(mac, fmt_path(path, "vlan_mac_address"))
            if link.get("name"):
                iface.name = check_name(link["name"], fmt_path(path, "name"))
            pending.append((iface, "vlan_link", str(link["vlan_link"]), fmt_path(path, "vlan_link")))
        else:
            # phy, ovs, bridge (the host's), tap, vif, hw_veb, vhostuser... all a NIC to the guest
            mac = link.get("ethernet_mac_address")
            if mac:
                iface.mac = check_mac(mac, fmt_path(path, "ethernet_mac_address"))
                iface.set_name = True
            if link.get("name"):
                iface.name = check_name(link["name"], fmt_path(path, "name"))
            elif iface.mac:
                found = resolver.name_for(iface.mac)
                if not found:
                    raise fail(fmt_path(path, "ethernet_mac_address"),
                               f"no network interface has MAC {iface.mac} (known: "
                               f"{', '.join(resolver.known()) or 'none'}); give the link a name or a MAC map")
                iface.name = found
            else:
                raise fail(path, "a link needs a name or an ethernet_mac_address")
        by_id[lid] = iface
    for iface, attr, target, path in pending:
        if attr == "members":
            for j, mid in enumerate(target):
                if str(mid) not in by_id:
                    raise fail(fmt_path(path, j), f"no link with id {mid!r}")
                iface.members.append(by_id[str(mid)].name)
        else:
            if target not in by_id:
                raise fail(path, f"vlan link {target!r} is not defined")
            iface.vlan_link = by_id[target].name
            if not iface.name:
                iface.name = check_name(f"{iface.vlan_link}.{iface.vlan_id}", path)
    for iface in by_id.values():
        if iface.name in model.interfaces:
            raise fail(iface.path, f"duplicate interface name {iface.name!r} "
                                   f"(also {model.interfaces[iface.name].path})")
        model.interfaces[iface.name] = iface
    for i, net in enumerate(networks):
        _network(net, fmt_path("networks", i), by_id)
    for i, svc in enumerate(services):
        path = fmt_path("services", i)
        check_mapping(svc, path)
        if svc.get("type") == "dns":
            ns = check_ip(svc.get("address"), fmt_path(path, "address"))
            if ns not in model.nameservers:
                model.nameservers.append(ns)
    check_references(model, {"bond": "bond_links", "bridge": "bond_links"}, "vlan_link", "networks")
    return model


def _network(net, path: str, by_id: dict) -> None:
    check_mapping(net, path)
    ntype = net.get("type")
    if ntype not in _NETWORK_TYPES:
        raise fail(fmt_path(path, "type"), f"unknown network type {ntype!r} "
                                           f"(expected one of {', '.join(sorted(_NETWORK_TYPES))})")
    link = str(net.get("link"))
    if link not in by_id:
        raise fail(fmt_path(path, "link"), f"no link with id {net.get('link')!r}")
    iface = by_id[link]
    subnet = Subnet(type=_NETWORK_TYPES[ntype])
    if subnet.type == "static":
        if net.get("ip_address") in (None, ""):
            raise fail(fmt_path(path, "ip_address"), "required for a static network")
        subnet.address, subnet.prefix = check_cidr(net["ip_address"], fmt_path(path, "ip_address"),
                                                   netmask=net.get("netmask"), mask_path=fmt_path(path, "netmask"))
        want = 6 if ntype in ("ipv6", "static6") else 4
        if ntype in ("ipv4", "ipv6") and subnet.family != want:
            raise fail(fmt_path(path, "ip_address"), f"{net['ip_address']!r} is not an IPv{want} address")
        if subnet.family == 6:
            iface.accept_ra = False       # static IPv6 from Neutron: no router advertisements
    if ntype in ("ipv6_dhcp", "ipv6_dhcpv6-stateful"):
        iface.accept_ra = True
    for j, r in enumerate(net.get("routes") or []):
        rpath = fmt_path(fmt_path(path, "routes"), j)
        check_mapping(r, rpath)
        network, prefix = check_network(r.get("network"), fmt_path(rpath, "network"),
                                        netmask=r.get("netmask"), prefix=r.get("prefix"),
                                        mask_path=fmt_path(rpath, "netmask"))
        route = Route(network=network or "0.0.0.0", prefix=prefix)
        if r.get("gateway") not in (None, ""):
            route.gateway = check_ip(r["gateway"], fmt_path(rpath, "gateway"), route.family)
        if r.get("metric") not in (None, ""):
            route.metric = check_int(r["metric"], fmt_path(rpath, "metric"), 0)
        subnet.routes.append(route)
    servers = []
    for k, svc in enumerate(net.get("services") or []):
        spath = fmt_path(fmt_path(path, "services"), k)
        check_mapping(svc, spath)
        if svc.get("type") == "dns":
            servers.append(check_ip(svc.get("address"), fmt_path(spath, "address")))
    subnet.nameservers = servers + [
        s for s in check_nameservers(net.get("dns_nameservers"), fmt_path(path, "dns_nameservers"))
        if s not in servers]
    subnet.search = check_search(net.get("dns_search"), fmt_path(path, "dns_search"))
    iface.subnets.append(subnet)


# ---------------------------------------------------------------------- model -> network_data.json
_SUBNET_TO_TYPE = {
    "dhcp4": "ipv4_dhcp", "dhcp6": "ipv6_dhcp", "ipv6_slaac": "ipv6_slaac",
    "ipv6_dhcpv6-stateless": "ipv6_dhcpv6-stateless", "ipv6_dhcpv6-stateful": "ipv6_dhcpv6-stateful",
}
_OS_BOND_KEYS = {canon: "bond_" + opt for canon, (opt, _kind) in BOND_PARAMS.items()}


def to_network_data(model: NetworkModel) -> dict:
    """The model as ``network_data.json``; NetworkConfigError for what the format cannot express."""
    from cloudseed.network.renderers._common import assign_global_routes

    links, networks = [], []
    net_no = 0
    global_routes = assign_global_routes(model, strict=True)  # each on the interface that reaches its gateway
    for iface in model.ordered():
        where = f"interface {iface.name!r}"
        if iface.type == "bridge":
            raise NetworkConfigError(f"{where}: network_data.json cannot express a bridge")
        if iface.match_name or (iface.match_driver and not iface.mac):
            raise NetworkConfigError(f"{where}: network_data.json can only match NICs by MAC address")
        for attr, label in (("dhcp4_overrides", "dhcp4-overrides"), ("dhcp6_overrides", "dhcp6-overrides")):
            if getattr(iface, attr):
                raise NetworkConfigError(f"{where}: network_data.json cannot express {label}")
        if iface.wakeonlan:
            raise NetworkConfigError(f"{where}: network_data.json cannot express wakeonlan")
        if (iface.nameservers or iface.search) and not any(s.type != "manual" for s in iface.subnets):
            raise NetworkConfigError(f"{where}: network_data.json can only give DNS servers with a network")
        link: dict = {"id": iface.name, "name": iface.name}
        if iface.type == "physical":
            link["type"] = "phy"
            if iface.mac:
                link["ethernet_mac_address"] = iface.mac
                if not iface.set_name:
                    del link["name"]        # matched by MAC only: the guest finds its name
        elif iface.type == "bond":
            link.update(type="bond", bond_links=list(iface.members))
            if iface.mac:
                link["ethernet_mac_address"] = iface.mac
            for canon, value in iface.bond_params.items():
                link[_OS_BOND_KEYS[canon]] = value
        elif iface.type == "vlan":
            link.update(type="vlan", vlan_link=iface.vlan_link, vlan_id=iface.vlan_id)
            if iface.mac:
                link["vlan_mac_address"] = iface.mac
        else:
            raise NetworkConfigError(f"{where}: network_data.json cannot express a {iface.type} interface")
        mtu = iface.effective_mtu()
        if mtu:
            link["mtu"] = mtu
        links.append(link)
        iface_routes = list(iface.routes) + global_routes.get(iface.name, [])
        first_dns = True
        for s in iface.subnets:
            if s.type == "manual":
                continue
            if s.control != "auto":
                raise NetworkConfigError(f"{where}: network_data.json cannot express control {s.control}")
            if s.mtu and s.mtu != mtu:
                raise NetworkConfigError(f"{where}: network_data.json cannot express a per-network MTU")
            net: dict = {"id": f"network{net_no}", "link": iface.name}
            net_no += 1
            if s.type == "static":
                net["type"] = "ipv6" if s.family == 6 else "ipv4"
                net["ip_address"] = s.address
                net["netmask"] = str(ipaddress.ip_interface(s.cidr).netmask)
            else:
                net["type"] = _SUBNET_TO_TYPE[s.type]
            routes = []
            if s.gateway:
                routes.append(Route(network="::" if s.family == 6 else "0.0.0.0", prefix=0,
                                    gateway=s.gateway, metric=s.metric))
            routes += s.routes
            routes += [r for r in iface_routes if r.family == s.family]
            iface_routes = [r for r in iface_routes if r.family != s.family]
            if routes:
                net["routes"] = [_route_out(r, where) for r in routes]
            servers = list(s.nameservers)
            search = list(s.search)
            if first_dns:
                servers += [n for n in iface.nameservers if n not in servers]
                search += [d for d in iface.search if d not in search]
                first_dns = False
            if servers:
                net["services"] = [{"type": "dns", "address": a} for a in servers]
                net["dns_nameservers"] = servers
            if search:
                net["dns_search"] = search
            networks.append(net)
        if iface_routes:
            raise NetworkConfigError(f"{where}: network_data.json can only give routes with a network "
                                     f"of the same address family")
    if model.search:
        raise NetworkConfigError("search: network_data.json cannot express global search domains")
    services = [{"type": "dns", "address": a} for a in model.nameservers]
    return {"links": links, "networks": networks, "services": services}


def _route_out(r: Route, where: str) -> dict:
    if r.table is not None or r.on_link:
        raise NetworkConfigError(f"{where}: network_data.json cannot express route tables or on-link routes")
    net = ipaddress.ip_network(r.destination)
    out = {"network": str(net.network_address), "netmask": str(net.netmask)}
    if r.gateway:
        out["gateway"] = r.gateway
    if r.metric is not None:
        out["metric"] = r.metric
    return out
