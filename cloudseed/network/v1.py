"""Network config version 1 (curtin/MAAS style: a list of typed entries) into the model."""

from __future__ import annotations

from cloudseed.network.model import (
    Interface,
    NetworkModel,
    Route,
    Subnet,
    check_bool,
    check_cidr,
    check_int,
    check_ip,
    check_keys,
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
from cloudseed.network.params import check_bond_value, check_bridge_value, v1_bond_key, v1_bridge_key
from cloudseed.network.validate import check_references

_COMMON = {"type", "name", "mac_address", "mtu", "subnets", "accept-ra", "wakeonlan", "id"}
_KEYS = {
    "physical": _COMMON | {"params", "keep_configuration"},
    "loopback": {"type", "name", "subnets", "id"},
    "bond": _COMMON | {"bond_interfaces", "params"},
    "bridge": _COMMON | {"bridge_interfaces", "params"},
    "vlan": _COMMON | {"vlan_link", "vlan_id"},
    "nameserver": {"type", "address", "search", "interface"},
    "route": {"type", "destination", "network", "netmask", "prefix", "gateway", "metric"},
}
_SUBNET_KEYS = {
    "type", "address", "netmask", "prefix", "gateway", "dns_nameservers", "dns_search", "routes",
    "mtu", "metric", "control", "broadcast", "ipv4", "ipv6",
}
_SUBNET_TYPES = {
    "dhcp": "dhcp4", "dhcp4": "dhcp4", "dhcp6": "dhcp6", "static": "static", "static6": "static",
    "ipv6_slaac": "ipv6_slaac", "ipv6_dhcpv6-stateless": "ipv6_dhcpv6-stateless",
    "ipv6_dhcpv6-stateful": "ipv6_dhcpv6-stateful", "manual": "manual",
}
_ROUTE_KEYS = {"network", "destination", "netmask", "prefix", "gateway", "metric"}


def parse_v1(data: dict, prefix: str = "") -> NetworkModel:
    check_keys(data, {"version", "config"}, prefix)
    cpath = fmt_path(prefix, "config")
    config = data.get("config")
    if not isinstance(config, list):
        raise fail(cpath, f"expected a list of network entries, got {type(config).__name__}")
    model = NetworkModel(source_kind="v1")
    bound_dns: list = []
    for i, item in enumerate(config):
        path = fmt_path(cpath, i)
        check_mapping(item, path)
        kind = item.get("type")
        if kind not in _KEYS:
            if kind == "infiniband":
                raise fail(fmt_path(path, "type"), "infiniband interfaces are not supported")
            raise fail(fmt_path(path, "type"), f"unknown entry type {kind!r} "
                                               f"(expected one of {', '.join(sorted(_KEYS))})")
        check_keys(item, _KEYS[kind], path)
        if kind == "nameserver":
            servers = check_nameservers(item.get("address"), fmt_path(path, "address"))
            search = check_search(item.get("search"), fmt_path(path, "search"))
            if "interface" in item:
                bound_dns.append((item["interface"], servers, search, fmt_path(path, "interface")))
            else:
                model.nameservers += [s for s in servers if s not in model.nameservers]
                model.search += [s for s in search if s not in model.search]
            continue
        if kind == "route":
            dest = item.get("destination", item.get("network"))
            model.routes.append(parse_route(dict(item, network=dest), path, dest_key=(
                "destination" if "destination" in item else "network")))
            continue
        iface = _interface(item, kind, path)
        if iface.name in model.interfaces:
            other = model.interfaces[iface.name].path
            raise fail(fmt_path(path, "name"), f"duplicate interface name {iface.name!r} (also {other})")
        model.interfaces[iface.name] = iface
    for name, servers, search, path in bound_dns:
        if name not in model.interfaces:
            raise fail(path, f"interface {name!r} is not defined")
        target = model.interfaces[name]
        target.nameservers += servers
        target.search += search
    check_references(model, {"bond": "bond_interfaces", "bridge": "bridge_interfaces"}, "vlan_link", "subnets")
    return model


def _interface(item: dict, kind: str, path: str) -> Interface:
    if "name" not in item:
        raise fail(fmt_path(path, "name"), "required")
    name = check_name(item["name"], fmt_path(path, "name"))
    iface = Interface(name=name, type=kind, path=path)
    if item.get("mac_address") not in (None, ""):
        iface.mac = check_mac(item["mac_address"], fmt_path(path, "mac_address"))
        iface.set_name = kind == "physical"
    if item.get("mtu") not in (None, ""):
        iface.mtu = check_mtu(item["mtu"], fmt_path(path, "mtu"))
    if item.get("accept-ra") is not None:
        iface.accept_ra = check_bool(item["accept-ra"], fmt_path(path, "accept-ra"))
    if item.get("wakeonlan") is not None:
        iface.wakeonlan = check_bool(item["wakeonlan"], fmt_path(path, "wakeonlan"))
    if item.get("keep_configuration") is not None:  # netplan's critical (cloud-init writes it so)
        iface.netplan_only["critical"] = check_bool(item["keep_configuration"], fmt_path(path, "keep_configuration"))
    subnets = item.get("subnets") or []
    spath = fmt_path(path, "subnets")
    if not isinstance(subnets, list):
        raise fail(spath, f"expected a list, got {type(subnets).__name__}")
    for j, sub in enumerate(subnets):
        if kind == "loopback" and isinstance(sub, dict) and sub.get("type") == "loopback":
            continue
        iface.subnets.append(parse_subnet(sub, fmt_path(spath, j)))
    params = item.get("params") or {}
    ppath = fmt_path(path, "params")
    check_mapping(params, ppath)
    if kind == "physical":
        check_keys(params, {"driver", "device_id"}, ppath)
        if params.get("driver"):
            iface.match_driver = str(params["driver"])
    elif kind == "bond":
        iface.members = _names(item.get("bond_interfaces"), fmt_path(path, "bond_interfaces"))
        for key, value in params.items():
            canon = v1_bond_key(str(key))
            if canon is None:
                if str(key).replace("_", "-") == "bond-slaves":
                    continue
                raise fail(fmt_path(ppath, key), "unknown bond parameter")
            iface.bond_params[canon] = check_bond_value(canon, value, fmt_path(ppath, key))
    elif kind == "bridge":
        if "bridge_interfaces" not in item:
            raise fail(fmt_path(path, "bridge_interfaces"), "required")
        iface.members = _names(item.get("bridge_interfaces"), fmt_path(path, "bridge_interfaces"))
        for key, value in params.items():
            canon = v1_bridge_key(str(key))
            if canon is False:
                raise fail(fmt_path(ppath, key), "unknown bridge parameter")
            if canon:
                iface.bridge_params[canon] = check_bridge_value(canon, value, fmt_path(ppath, key))
    elif kind == "vlan":
        for key in ("vlan_link", "vlan_id"):
            if item.get(key) in (None, ""):
                raise fail(fmt_path(path, key), "required")
        iface.vlan_link = str(item["vlan_link"])
        iface.vlan_id = check_int(item["vlan_id"], fmt_path(path, "vlan_id"), 1, 4094, "a VLAN id")
    return iface


def _names(value, path: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, f"expected a list of interface names, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise fail(fmt_path(path, i), f"{v!r} is not an interface name")
        if v in out:
            raise fail(fmt_path(path, i), f"{v!r} is listed twice")
        out.append(v)
    return out


def parse_subnet(sub, path: str) -> Subnet:
    check_mapping(sub, path)
    check_keys(sub, _SUBNET_KEYS, path)
    raw = sub.get("type")
    if raw not in _SUBNET_TYPES:
        raise fail(fmt_path(path, "type"), f"unknown subnet type {raw!r} "
                                           f"(expected one of {', '.join(sorted(_SUBNET_TYPES))})")
    subnet = Subnet(type=_SUBNET_TYPES[raw])
    if subnet.type == "static":
        addr = sub.get("address")
        key = "address"
        if addr in (None, ""):
            raise fail(fmt_path(path, "address"), "required for a static subnet")
        subnet.address, subnet.prefix = check_cidr(
            addr, fmt_path(path, key), netmask=sub.get("netmask"), prefix=sub.get("prefix"),
            mask_path=fmt_path(path, "netmask" if sub.get("netmask") is not None else "prefix"))
        if raw == "static6" and subnet.family != 6:
            raise fail(fmt_path(path, "address"), f"{addr!r} is not an IPv6 address (subnet type static6)")
        if sub.get("broadcast") not in (None, ""):
            subnet.broadcast = check_ip(sub["broadcast"], fmt_path(path, "broadcast"), 4)
    else:
        for key in ("address", "netmask", "prefix", "gateway", "broadcast"):
            if sub.get(key) not in (None, ""):
                raise fail(fmt_path(path, key), f"only valid for a static subnet, not {raw}")
    if sub.get("gateway") not in (None, ""):
        subnet.gateway = check_ip(sub["gateway"], fmt_path(path, "gateway"), subnet.family)
    subnet.nameservers = check_nameservers(sub.get("dns_nameservers"), fmt_path(path, "dns_nameservers"))
    subnet.search = check_search(sub.get("dns_search"), fmt_path(path, "dns_search"))
    routes = sub.get("routes") or []
    rpath = fmt_path(path, "routes")
    if not isinstance(routes, list):
        raise fail(rpath, f"expected a list, got {type(routes).__name__}")
    for k, r in enumerate(routes):
        check_mapping(r, fmt_path(rpath, k))
        check_keys(r, _ROUTE_KEYS, fmt_path(rpath, k))
        dest_key = "destination" if "destination" in r else "network"
        subnet.routes.append(parse_route(dict(r, network=r.get(dest_key)), fmt_path(rpath, k), dest_key))
    if sub.get("mtu") not in (None, ""):
        subnet.mtu = check_mtu(sub["mtu"], fmt_path(path, "mtu"))
    if sub.get("metric") not in (None, ""):
        subnet.metric = check_int(sub["metric"], fmt_path(path, "metric"), 0)
    if sub.get("control") not in (None, ""):
        if sub["control"] not in ("auto", "manual", "hotplug"):
            raise fail(fmt_path(path, "control"), f"{sub['control']!r} is not one of auto, manual, hotplug")
        subnet.control = sub["control"]
    return subnet


def parse_route(r: dict, path: str, dest_key: str = "network") -> Route:
    """A v1 route: network/destination with netmask or prefix, gateway, metric."""
    if r.get("network") in (None, ""):
        raise fail(fmt_path(path, dest_key), "required")
    mask_key = "netmask" if r.get("netmask") not in (None, "") else "prefix"
    network, prefix = check_network(r["network"], fmt_path(path, dest_key), netmask=r.get("netmask"),
                                    prefix=r.get("prefix"), mask_path=fmt_path(path, mask_key))
    route = Route(network=network or "0.0.0.0", prefix=prefix)
    if r.get("gateway") not in (None, ""):
        gw = check_ip(r["gateway"], fmt_path(path, "gateway"))
        if network is None and ":" in gw:
            route.network = "::"
        if (":" in gw) != (route.family == 6):
            raise fail(fmt_path(path, "gateway"), f"{gw!r} is not in the same address family as "
                                                  f"{route.destination}")
        route.gateway = gw
    if r.get("metric") not in (None, ""):
        route.metric = check_int(r["metric"], fmt_path(path, "metric"), 0)
    return route
