"""Network config version 2 (the netplan subset cloud-init documents) into the model.

Device IDs (the keys under ``ethernets``...) are resolved to interface names: ``set-name``,
else the name of the NIC with ``match.macaddress`` on this system (or the given MAC map), else
a literal ``match.name``, else the ID itself. Bonds, bridges and VLAN links refer to IDs.
"""

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
from cloudseed.network.params import BOND_PARAMS, BRIDGE_PARAMS, check_bond_value, check_bridge_value
from cloudseed.network.validate import check_references

_SECTIONS = {"ethernets": "physical", "bonds": "bond", "bridges": "bridge", "vlans": "vlan"}
_COMMON = {
    "addresses", "gateway4", "gateway6", "routes", "nameservers", "dhcp4", "dhcp6",
    "dhcp4-overrides", "dhcp6-overrides", "mtu", "accept-ra", "renderer", "optional",
}
# netplan keys the model has no field for: checked, then written as given by the netplan renderer
# (as cloud-init passes v2 to netplan) and reported as left out by the others (cloud-init drops them)
_NETPLAN_ONLY = {
    "critical": "bool", "ignore-carrier": "bool", "ipv6-privacy": "bool", "emit-lldp": "bool",
    "dhcp-identifier": ("mac", "duid"), "ipv6-address-generation": ("eui64", "stable-privacy"),
    "link-local": ["ipv4", "ipv6"], "routing-policy": "rules",
}
_RULE_KEYS = {"from": "ip", "to": "ip", "table": "int", "priority": "int", "mark": "int", "type-of-service": "int"}
_COMMON |= set(_NETPLAN_ONLY)
_KEYS = {
    "physical": _COMMON | {"match", "set-name", "wakeonlan", "macaddress"},
    "bond": _COMMON | {"interfaces", "parameters", "macaddress"},
    "bridge": _COMMON | {"interfaces", "parameters", "macaddress"},
    "vlan": _COMMON | {"id", "link", "macaddress"},
}
_ROUTE_KEYS = {"to", "via", "metric", "on-link", "table"}
_OVERRIDES = {
    "use-dns": "bool", "use-ntp": "bool", "send-hostname": "bool", "use-hostname": "bool",
    "use-mtu": "bool", "hostname": "str", "use-routes": "bool", "route-metric": "int",
    "use-domains": "domains",
}
_RENDERERS = ("networkd", "NetworkManager")


def parse_v2(data: dict, prefix: str, resolver) -> NetworkModel:
    allowed = {"version", "renderer"} | set(_SECTIONS)
    for key in data:
        if key == "wifis":
            raise fail(fmt_path(prefix, key), "wifi configuration is not supported")
        if key not in allowed:
            raise fail(fmt_path(prefix, key), "unknown or unsupported key")
    model = NetworkModel(source_kind="v2")
    if data.get("renderer") is not None:
        model.renderer = _renderer(data["renderer"], fmt_path(prefix, "renderer"))
    ids: dict[str, str] = {}        # device id -> interface name
    raw: list = []
    for section, kind in _SECTIONS.items():
        entries = data.get(section)
        if entries is None:
            continue
        spath = fmt_path(prefix, section)
        check_mapping(entries, spath)
        for dev_id, cfg in entries.items():
            path = fmt_path(spath, dev_id)
            if cfg is None:
                cfg = {}
            check_mapping(cfg, path)
            check_keys(cfg, _KEYS[kind], path)
            dev_id = str(dev_id)
            if dev_id in ids:
                raise fail(path, f"duplicate device id {dev_id!r}")
            iface = _device(dev_id, cfg, kind, path, resolver)
            for other in model.interfaces.values():
                if other.name == iface.name:
                    raise fail(path, f"duplicate interface name {iface.name!r} (also {other.path})")
            ids[dev_id] = iface.name
            model.interfaces[iface.name] = iface
            raw.append((iface, cfg, path))
    # second pass: references by id
    for iface, cfg, path in raw:
        if iface.type in ("bond", "bridge"):
            mpath = fmt_path(path, "interfaces")
            members = cfg.get("interfaces") or []
            if not isinstance(members, list):
                raise fail(mpath, f"expected a list of device ids, got {type(members).__name__}")
            for i, m in enumerate(members):
                if str(m) not in ids:
                    raise fail(fmt_path(mpath, i), f"interface {m!r} is not defined")
                if ids[str(m)] in iface.members:
                    raise fail(fmt_path(mpath, i), f"{m!r} is listed twice")
                iface.members.append(ids[str(m)])
            _parameters(iface, cfg.get("parameters"), fmt_path(path, "parameters"), ids)
        if iface.type == "vlan":
            for key in ("id", "link"):
                if cfg.get(key) in (None, ""):
                    raise fail(fmt_path(path, key), "required")
            iface.vlan_id = check_int(cfg["id"], fmt_path(path, "id"), 0, 4094, "a VLAN id")
            link = str(cfg["link"])
            if link not in ids:
                raise fail(fmt_path(path, "link"), f"vlan link {link!r} is not defined")
            iface.vlan_link = ids[link]
    check_references(model, {"bond": "interfaces", "bridge": "interfaces"}, "link", "addresses")
    return model


def _renderer(value, path: str) -> str:
    if value not in _RENDERERS:
        raise fail(path, f"{value!r} is not a renderer (networkd or NetworkManager)")
    return value


def _device(dev_id: str, cfg: dict, kind: str, path: str, resolver) -> Interface:
    iface = Interface(name=dev_id, type=kind, path=path)
    if kind == "physical":
        match = cfg.get("match")
        if match is not None:
            mpath = fmt_path(path, "match")
            check_mapping(match, mpath)
            check_keys(match, {"macaddress", "name", "driver"}, mpath)
            if match.get("macaddress") not in (None, ""):
                iface.mac = check_mac(match["macaddress"], fmt_path(mpath, "macaddress"))
            if match.get("name") not in (None, ""):
                iface.match_name = str(match["name"])
            if match.get("driver") not in (None, ""):
                iface.match_driver = str(match["driver"])
        name = None
        if cfg.get("set-name") not in (None, ""):
            if not match:
                raise fail(fmt_path(path, "set-name"), "set-name needs a match")
            name = check_name(cfg["set-name"], fmt_path(path, "set-name"))
            iface.set_name = True
        elif iface.mac:
            name = resolver.name_for(iface.mac)
        elif iface.match_name and not any(c in iface.match_name for c in "*?["):
            name = iface.match_name
        iface.name = check_name(name or dev_id, path if not name else fmt_path(path, "set-name"))
        if cfg.get("wakeonlan") is not None:
            iface.wakeonlan = check_bool(cfg["wakeonlan"], fmt_path(path, "wakeonlan"))
        if cfg.get("macaddress") not in (None, ""):  # the address to give the NIC (match.macaddress finds it)
            iface.netplan_only["macaddress"] = check_mac(cfg["macaddress"], fmt_path(path, "macaddress"))
    else:
        check_name(dev_id, path)
        if cfg.get("macaddress") not in (None, ""):
            iface.mac = check_mac(cfg["macaddress"], fmt_path(path, "macaddress"))
    for key, kind in _NETPLAN_ONLY.items():
        if cfg.get(key) is not None:
            iface.netplan_only[key] = netplan_value(cfg[key], kind, fmt_path(path, key))
    if cfg.get("renderer") is not None:
        _renderer(cfg["renderer"], fmt_path(path, "renderer"))
    if cfg.get("mtu") is not None:
        iface.mtu = check_mtu(cfg["mtu"], fmt_path(path, "mtu"))
    if cfg.get("accept-ra") is not None:
        iface.accept_ra = check_bool(cfg["accept-ra"], fmt_path(path, "accept-ra"))
    if cfg.get("optional") is not None:
        iface.optional = check_bool(cfg["optional"], fmt_path(path, "optional"))
    _ip_config(iface, cfg, path)
    return iface


def netplan_value(value, kind, path: str):
    """A netplan-only key's value checked as netplan would: a boolean, one word of a tuple, a list of words."""
    if kind == "bool":
        return check_bool(value, path)
    if kind == "rules":  # routing-policy: a list of rules
        if not isinstance(value, list):
            raise fail(path, f"expected a list of rules, got {type(value).__name__}")
        rules = []
        for i, rule in enumerate(value):
            rpath = fmt_path(path, i)
            check_mapping(rule, rpath)
            check_keys(rule, set(_RULE_KEYS), rpath)
            for key, what in _RULE_KEYS.items():
                if rule.get(key) is not None:
                    (check_network if what == "ip" else check_int)(rule[key], fmt_path(rpath, key))
            rules.append(dict(rule))
        return rules
    if isinstance(kind, tuple):
        if str(value) not in kind:
            raise fail(path, f"{value!r} is not one of {', '.join(kind)}")
        return str(value)
    if not isinstance(value, list) or any(str(v) not in kind for v in value):
        raise fail(path, f"{value!r} is not a list of {' and '.join(kind)}")
    return [str(v) for v in value]


def _ip_config(iface: Interface, cfg: dict, path: str) -> None:
    if cfg.get("dhcp4") is not None and check_bool(cfg["dhcp4"], fmt_path(path, "dhcp4")):
        iface.subnets.append(Subnet(type="dhcp4"))
    if cfg.get("dhcp6") is not None and check_bool(cfg["dhcp6"], fmt_path(path, "dhcp6")):
        iface.subnets.append(Subnet(type="dhcp6"))
    for fam in ("4", "6"):
        key = f"dhcp{fam}-overrides"
        if cfg.get(key) is not None:
            opath = fmt_path(path, key)
            check_mapping(cfg[key], opath)
            target = iface.dhcp4_overrides if fam == "4" else iface.dhcp6_overrides
            for k, v in cfg[key].items():
                kind = _OVERRIDES.get(k)
                if kind is None:
                    raise fail(fmt_path(opath, k), "unknown or unsupported override")
                kpath = fmt_path(opath, k)
                if kind == "bool":
                    target[k] = check_bool(v, kpath)
                elif kind == "int":
                    target[k] = check_int(v, kpath, 0)
                elif kind == "domains":
                    target[k] = "route" if str(v) == "route" else check_bool(v, kpath)
                else:
                    target[k] = str(v)
    addresses = cfg.get("addresses") or []
    apath = fmt_path(path, "addresses")
    if not isinstance(addresses, list):
        raise fail(apath, f"expected a list, got {type(addresses).__name__}")
    for i, a in enumerate(addresses):
        if isinstance(a, dict):
            raise fail(fmt_path(apath, i), "address options (lifetime, label) are not supported")
        ip, plen = check_cidr(a, fmt_path(apath, i), default_prefix=False)
        iface.subnets.append(Subnet(type="static", address=ip, prefix=plen))
    for fam in (4, 6):
        key = f"gateway{fam}"
        if cfg.get(key) in (None, ""):
            continue
        gw = check_ip(cfg[key], fmt_path(path, key), fam)
        subnet = next((s for s in iface.static_subnets(fam)), None)
        if subnet is not None:
            subnet.gateway = gw
        else:
            iface.routes.append(Route(network="0.0.0.0" if fam == 4 else "::", prefix=0, gateway=gw))
    routes = cfg.get("routes") or []
    rpath = fmt_path(path, "routes")
    if not isinstance(routes, list):
        raise fail(rpath, f"expected a list, got {type(routes).__name__}")
    for i, r in enumerate(routes):
        iface.routes.append(_route(r, fmt_path(rpath, i)))
    ns = cfg.get("nameservers")
    if ns is not None:
        npath = fmt_path(path, "nameservers")
        check_mapping(ns, npath)
        check_keys(ns, {"addresses", "search"}, npath)
        for key in ("addresses", "search"):
            if ns.get(key) is not None and not isinstance(ns[key], list):  # netplan wants a sequence
                raise fail(fmt_path(npath, key), f"expected a list, got {type(ns[key]).__name__}")
        iface.nameservers = check_nameservers(ns.get("addresses"), fmt_path(npath, "addresses"))
        iface.search = check_search(ns.get("search"), fmt_path(npath, "search"))


def _route(r, path: str) -> Route:
    check_mapping(r, path)
    check_keys(r, _ROUTE_KEYS, path)
    if r.get("to") in (None, ""):
        raise fail(fmt_path(path, "to"), "required")
    network, prefix = check_network(r["to"], fmt_path(path, "to"), host_default=True)
    route = Route(network=network or "0.0.0.0", prefix=prefix)
    if r.get("via") not in (None, ""):
        gw = check_ip(r["via"], fmt_path(path, "via"))
        if network is None and ":" in gw:
            route.network = "::"
        if (":" in gw) != (route.family == 6):
            raise fail(fmt_path(path, "via"), f"{gw!r} is not in the same address family as {route.destination}")
        route.gateway = gw
    elif network is None:
        raise fail(fmt_path(path, "via"), "a default route needs a gateway")
    if r.get("metric") is not None:
        route.metric = check_int(r["metric"], fmt_path(path, "metric"), 0)
    if r.get("table") is not None:
        route.table = check_int(r["table"], fmt_path(path, "table"), 0)
    if r.get("on-link") is not None:
        route.on_link = check_bool(r["on-link"], fmt_path(path, "on-link"))
    return route


def _parameters(iface: Interface, params, path: str, ids: dict) -> None:
    if params is None:
        return
    check_mapping(params, path)
    for key, value in params.items():
        kpath = fmt_path(path, key)
        if key == "gratuitious-arp":        # netplan accepts the old misspelling too
            key = "gratuitous-arp"
        if iface.type == "bond":
            if key not in BOND_PARAMS:
                raise fail(kpath, "unknown bond parameter")
            value = check_bond_value(key, value, kpath)
            if key == "primary":
                value = ids.get(value, value)
            iface.bond_params[key] = value
        else:
            if key not in BRIDGE_PARAMS:
                raise fail(kpath, "unknown bridge parameter")
            value = check_bridge_value(key, value, kpath)
            if isinstance(value, dict):
                value = {ids.get(p, p): n for p, n in value.items()}
            iface.bridge_params[key] = value
