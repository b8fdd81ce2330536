"""RHEL network-scripts (``/etc/sysconfig/network-scripts/ifcfg-*``, ``route-*``, ``route6-*`` and
``/etc/sysconfig/network``), with ``/etc/resolv.conf`` for global nameservers.

Keys follow what initscripts read (and what cloud-init writes). Routes that have no default
destination go to ``route-NAME`` (``ADDRESSn``/``NETMASKn``/``GATEWAYn``) and ``route6-NAME``.
"""

from __future__ import annotations

import re

from cloudseed.network.model import Interface, NetworkModel
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

NAME = "sysconfig"
DESCRIPTION = "RHEL network-scripts (/etc/sysconfig/network-scripts)"
SCRIPTS = "/etc/sysconfig/network-scripts"
OWNED = [f"{SCRIPTS}/ifcfg-*", f"{SCRIPTS}/route-*", f"{SCRIPTS}/route6-*",
         "/etc/NetworkManager/conf.d/99-cloudseed.conf", "/etc/udev/rules.d/70-cloudseed-net.rules"]
_TYPES = {"physical": "Ethernet", "bond": "Bond", "bridge": "Bridge"}
_BRIDGE = {"stp": "STP", "ageing-time": "AGEING", "priority": "PRIO", "forward-delay": "DELAY",
           "hello-time": "HELLO_TIME", "max-age": "MAX_AGE"}
_DHCP4 = {"route-metric": "IPV4_ROUTE_METRIC", "use-dns": "PEERDNS", "use-routes": "PEERROUTES",
          "use-ntp": "PEERNTP", "hostname": "DHCP_HOSTNAME", "send-hostname": "DHCP_SEND_HOSTNAME"}


def available(root) -> bool:
    return root.isdir(SCRIPTS) and bool(root.which("ifup") or root.isfile(f"{SCRIPTS}/network-functions"))


def _quote(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    if re.search(r"[\s\"'$`\\;&|<>()]", text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`") + '"'
    return text


def _kv(cfg: dict) -> str:
    return header() + "".join(f"{k}={_quote(v)}\n" for k, v in sorted(cfg.items()))


def render(model: NetworkModel, distro: str = "rhel") -> list:
    model = expressible(model, "sysconfig", rename_by_name=True)
    global_routes = assign_global_routes(model)
    has_default = any(r.is_default for i in model.interfaces.values() for r in i.all_routes()) or \
        any(r.is_default for r in model.routes)
    files = []
    for iface in model.ordered():
        cfg, routes4, routes6 = _interface(model, iface, global_routes, has_default)
        files.append(RenderedFile(f"{SCRIPTS}/ifcfg-{iface.name}", _kv(cfg)))
        if routes4:
            files.append(RenderedFile(f"{SCRIPTS}/route-{iface.name}", header() + "".join(routes4)))
        if routes6:
            files.append(RenderedFile(f"{SCRIPTS}/route6-{iface.name}", header() + "".join(routes6)))
    net = {"NETWORKING": "yes"}
    if model.uses_ipv6:
        net.update(NETWORKING_IPV6="yes", IPV6_AUTOCONF="no")
    files.append(RenderedFile("/etc/sysconfig/network", header() + "".join(f"{k}={v}\n" for k, v in net.items())))
    if model.nameservers or model.search:
        resolv = header(";")
        resolv += "".join(f"nameserver {n}\n" for n in model.nameservers)
        if model.search:
            resolv += "search " + " ".join(model.search) + "\n"
        files.append(RenderedFile("/etc/resolv.conf", resolv))
    if model.nameservers or any(i.all_nameservers() for i in model.interfaces.values()):
        # initscripts write these servers to resolv.conf: NetworkManager must leave it alone
        files.append(RenderedFile("/etc/NetworkManager/conf.d/99-cloudseed.conf",
                                  header() + "[main]\ndns = none\n"))
    return files + udev_rules(model)


def _interface(model: NetworkModel, iface: Interface, global_routes: dict, has_default: bool):
    # no NM_CONTROLLED=no: NetworkManager's ifcfg-rh plugin may manage these files (cloud-init 24.x+)
    cfg: dict = {"DEVICE": iface.name, "ONBOOT": True, "USERCTL": False, "BOOTPROTO": "none"}
    if iface.type in _TYPES:
        cfg["TYPE"] = _TYPES[iface.type]
    if iface.mac:
        cfg["HWADDR" if iface.type == "physical" else "MACADDR"] = iface.mac
    if iface.effective_mtu():
        cfg["MTU"] = iface.effective_mtu()
    if iface.accept_ra is not None:
        cfg["IPV6_FORCE_ACCEPT_RA"] = iface.accept_ra
    if iface.wakeonlan and iface.type == "physical":
        cfg["ETHTOOL_OPTS"] = "wol g"
    if iface.control() == "manual":
        cfg["ONBOOT"] = False
    _subnets(model, iface, cfg)
    _dhcp_overrides(model, iface, cfg)
    _relations(model, iface, cfg)
    servers = iface.all_nameservers()
    for i, n in enumerate(servers[:3], 1):
        cfg[f"DNS{i}"] = n
    if iface.all_search():
        cfg["DOMAIN"] = " ".join(iface.all_search())
    if cfg["BOOTPROTO"] == "dhcp" and has_default:
        cfg["DHCLIENT_SET_DEFAULT_ROUTE"] = False
    routes4, routes6 = [], []
    for r in routes_for(model, iface, global_routes, with_gateways=False):
        if r.is_default and r.gateway:
            key = "IPV6_DEFAULTGW" if r.family == 6 else "GATEWAY"
            if key in cfg and cfg[key] != r.gateway:
                left_out(model, "sysconfig", iface, f"a second IPv{r.family} default route (via {r.gateway})",
                         "the first one is kept")
                continue
            cfg["DEFROUTE"] = True
            cfg[key] = r.gateway
            if cfg["BOOTPROTO"] == "dhcp":
                cfg["DHCLIENT_SET_DEFAULT_ROUTE"] = True
            if r.metric is not None:
                cfg[f"IPV{r.family}_ROUTE_METRIC"] = r.metric
            continue
        if r.table is not None or r.on_link:
            left_out(model, "sysconfig", iface, f"the route to {r.destination} (it has a table or on-link)",
                     "the route is left out")
            continue
        if r.family == 4:
            n = len(routes4)
            line = f"ADDRESS{n}={r.network}\nNETMASK{n}={r.netmask}\n"
            if r.gateway:
                line += f"GATEWAY{n}={r.gateway}\n"
            if r.metric is not None:
                line += f"METRIC{n}={r.metric}\n"
            routes4.append(line)
        else:
            line = r.destination
            if r.gateway:
                line += f" via {r.gateway}"
            if r.metric is not None:
                line += f" metric {r.metric}"
            routes6.append(f"{line} dev {iface.name}\n")
    return cfg, routes4, routes6


def _subnets(model: NetworkModel, iface: Interface, cfg: dict) -> None:
    v4 = v6 = 0
    for s in iface.subnets:
        t = s.type
        if t == "dhcp4":
            cfg["BOOTPROTO"] = "dhcp"
            if s.metric is not None:
                cfg["IPV4_ROUTE_METRIC"] = s.metric
        elif t in ("dhcp6", "ipv6_dhcpv6-stateful"):
            cfg.update(IPV6INIT=True, DHCPV6C=True)
            if t == "ipv6_dhcpv6-stateful":
                cfg["IPV6_AUTOCONF"] = False
        elif t == "ipv6_dhcpv6-stateless":
            cfg.update(IPV6INIT=True, IPV6_AUTOCONF=True, DHCPV6C=True, DHCPV6C_OPTIONS="-S")
        elif t == "ipv6_slaac":
            cfg.update(IPV6INIT=True, IPV6_AUTOCONF=True)
        elif t == "manual":
            cfg["ONBOOT"] = "MTU" in cfg and cfg["ONBOOT"]
        elif s.family == 6:
            cfg.update(IPV6INIT=True, IPV6_FORCE_ACCEPT_RA=False, IPV6_AUTOCONF=False)
            if v6 == 0:
                cfg["IPV6ADDR"] = s.cidr
            else:
                cfg["IPV6ADDR_SECONDARIES"] = (cfg.get("IPV6ADDR_SECONDARIES", "") + " " + s.cidr).strip()
            v6 += 1
            if s.mtu:
                cfg["IPV6_MTU"] = s.mtu
            if s.gateway:
                cfg.update(DEFROUTE=True, IPV6_DEFAULTGW=s.gateway)
        else:
            suffix = "" if v4 == 0 else str(v4)
            cfg["IPADDR" + suffix] = s.address
            cfg["NETMASK" + suffix] = s.netmask
            if s.broadcast:
                cfg["BROADCAST" + suffix] = s.broadcast
            v4 += 1
            if s.gateway:
                if "GATEWAY" in cfg and cfg["GATEWAY"] != s.gateway:
                    left_out(model, "sysconfig", iface, f"a second IPv4 gateway ({s.gateway})",
                             "the first one is kept")
                else:
                    cfg.update(DEFROUTE=True, GATEWAY=s.gateway)
            if s.metric is not None:
                cfg["IPV4_ROUTE_METRIC"] = s.metric


def _dhcp_overrides(model: NetworkModel, iface: Interface, cfg: dict) -> None:
    for key in sorted(iface.dhcp6_overrides):
        left_out(model, "sysconfig", iface, f"dhcp6-overrides {key}")
    for key, value in iface.dhcp4_overrides.items():
        if key not in _DHCP4:
            left_out(model, "sysconfig", iface, f"dhcp4-overrides {key}")
            continue
        cfg[_DHCP4[key]] = value


def _relations(model: NetworkModel, iface: Interface, cfg: dict) -> None:
    if iface.type == "bond":
        opts = []
        for key, value in iface.bond_params.items():
            if isinstance(value, list):
                value = ",".join(value)
            elif isinstance(value, bool):
                value = int(value)
            opts.append(f"{BOND_PARAMS[key][0]}={value}")
        if opts:
            cfg["BONDING_OPTS"] = " ".join(opts)
        cfg["BONDING_MASTER"] = True
        for i, m in enumerate(iface.members):
            cfg[f"BONDING_SLAVE{i}"] = m
    if iface.type == "bridge":
        for key, value in iface.bridge_params.items():
            if key in ("path-cost", "port-priority"):
                continue
            cfg[_BRIDGE[key]] = value
    if iface.type == "vlan":
        cfg.update(VLAN=True, PHYSDEV=iface.vlan_link)
    if iface.master is not None:
        master = model.interfaces[iface.master]
        if master.type == "bond":
            cfg.update(MASTER=master.name, SLAVE=True)
        else:
            cfg["BRIDGE"] = master.name
            params = master.bridge_params
            opts = []
            if iface.name in params.get("path-cost", {}):
                opts.append(f"path_cost={params['path-cost'][iface.name]}")
            if iface.name in params.get("port-priority", {}):
                opts.append(f"priority={params['port-priority'][iface.name]}")
            if opts:
                cfg["BRIDGING_OPTS"] = " ".join(opts)

