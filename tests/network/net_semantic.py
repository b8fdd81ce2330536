"""Semantic normal forms of rendered network files, for comparing with the reference.

Each ``facts_<renderer>(tree)`` takes ``{path: text}`` (paths inside the root) and returns a set
of tuples, one per thing the files *mean*: an address on an interface, a route, a bond option,
a nameserver. Spelling that does not change meaning is normalised away (key order, file names,
numbering of ``address1=``, ``gateway4`` vs a default route, MAC case, yes/true/on). Nameservers
and search domains become system-wide facts (``("dns", ip)``): every one of these stacks feeds
per-interface servers into one resolver configuration (resolvconf, systemd-resolved,
NetworkManager), and cloud-init and cloudseed attach global servers to different interfaces.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import re
import shlex

import yaml


def load_tree(top: str) -> dict:
    out = {}
    for dirpath, _dirs, files in os.walk(top):
        for fn in files:
            full = os.path.join(dirpath, fn)
            if not os.path.isfile(full):
                continue                    # a dangling link
            with open(full, encoding="utf-8") as f:
                out["/" + os.path.relpath(full, top)] = f.read()
    return out


def _cidr(text: str) -> str:
    return str(ipaddress.ip_interface(text.strip()))


def _net(text: str) -> str:
    return str(ipaddress.ip_network(text.strip(), strict=False))


def _default_for(gw: str) -> str:
    return "::/0" if ":" in gw else "0.0.0.0/0"


def _bool(value) -> str:
    v = str(value).strip().strip('"').lower()
    if v in ("yes", "true", "on", "1"):
        return "true"
    if v in ("no", "false", "off", "0"):
        return "false"
    return v


def _route(iface, dest, gw=None, metric=None) -> tuple:
    if dest in (None, "", "default"):
        dest = _default_for(gw) if gw else "0.0.0.0/0"
    return ("route", iface, _net(dest), gw and str(ipaddress.ip_address(gw)), None if metric is None else str(metric))


def _udev(tree: dict) -> set:
    facts = set()
    for path, text in tree.items():
        if not path.startswith("/etc/udev/rules.d/"):
            continue
        for line in text.splitlines():
            m = re.search(r'ATTR\{address\}=="([^"]+)".*NAME="([^"]+)"', line)
            if m:
                facts.add(("udev-rename", m.group(1).lower(), m.group(2)))
    return facts


# ---------------------------------------------------------------------- netplan
def facts_netplan(tree: dict) -> set:
    facts: set = set()
    for path, text in tree.items():
        if not path.startswith("/etc/netplan/"):
            continue
        data = yaml.safe_load(text) or {}
        net = data.get("network", data)
        if net.get("renderer"):
            facts.add(("renderer", net["renderer"]))
        ids = {}
        for section in ("ethernets", "bonds", "bridges", "vlans"):
            for dev_id, cfg in (net.get(section) or {}).items():
                ids[dev_id] = (cfg or {}).get("set-name") or dev_id
        for section in ("ethernets", "bonds", "bridges", "vlans"):
            for dev_id, cfg in (net.get(section) or {}).items():
                _netplan_device(facts, section, ids[dev_id], cfg or {}, ids)
    return facts


def _netplan_device(facts: set, section: str, name: str, cfg: dict, ids: dict) -> None:
    facts.add(("device", section, name))
    for k, v in (cfg.get("match") or {}).items():
        facts.add(("match", name, k, str(v).lower()))
    if cfg.get("set-name"):
        facts.add(("set-name", name))
    for key in ("mtu", "ipv6-mtu", "accept-ra", "wakeonlan", "activation-mode", "macaddress", "id"):
        if key in cfg:
            v = cfg[key]
            facts.add(("opt", name, key, _bool(v) if isinstance(v, bool) else str(v).lower()))
    if "link" in cfg:
        facts.add(("opt", name, "link", ids.get(cfg["link"], cfg["link"])))
    for fam in ("dhcp4", "dhcp6"):
        if _bool(cfg.get(fam, False)) == "true":
            facts.add((fam, name))
        for k, v in (cfg.get(f"{fam}-overrides") or {}).items():
            facts.add(("override", name, fam, k, str(v)))
    for a in cfg.get("addresses") or []:
        facts.add(("address", name, _cidr(a)))
    for fam in ("4", "6"):
        if cfg.get(f"gateway{fam}"):
            facts.add(_route(name, None, cfg[f"gateway{fam}"]))
    for r in cfg.get("routes") or []:
        facts.add(_route(name, r.get("to"), r.get("via"), r.get("metric")))
    ns = cfg.get("nameservers") or {}
    for s in ns.get("addresses") or []:
        facts.add(("dns", str(ipaddress.ip_address(s))))
    for d in ns.get("search") or []:
        facts.add(("search", d))
    for m in cfg.get("interfaces") or []:
        facts.add(("member", name, ids.get(m, m)))
    for k, v in (cfg.get("parameters") or {}).items():
        if isinstance(v, dict):
            for port, n in v.items():
                facts.add(("param", name, k, ids.get(port, port), str(n)))
        else:
            facts.add(("param", name, k, _bool(v) if isinstance(v, bool) else str(v)))


# ---------------------------------------------------------------------- ENI
_ROUTE_CMD = re.compile(r"^(?:post-up|up)\s+(.*?)(?:\s*\|\|\s*true)?$")


def parse_eni(text: str) -> list:
    """[(name, family, method, [(option, value)])] plus ('auto', name) markers."""
    stanzas: list = []
    autos: list = []
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] in ("auto", "allow-hotplug") or words[0].startswith("allow-"):
            autos += [(words[0], w) for w in words[1:]]
            current = None
            continue
        if words[0] == "iface":
            current = (words[1], words[2], words[3], [])
            stanzas.append(current)
            continue
        if words[0] in ("source", "source-directory", "mapping"):
            current = None
            continue
        if current is None:
            if stanzas:            # a stray option belongs to the last stanza for ifupdown
                current = stanzas[-1]
            else:
                continue
        current[3].append((words[0], " ".join(words[1:])))
    return [("auto",) + a for a in autos] + stanzas


def _route_command(name: str, cmd: str):
    """A route from `route add ...` or `ip route add ...`, or None."""
    w = cmd.split()
    if w[:2] == ["route", "add"]:
        w = w[2:]
        dest = gw = metric = None
        if w and w[0] == "-A":
            w = w[2:]
        i = 0
        while i < len(w):
            if w[i] in ("-net", "-host"):
                dest = w[i + 1]
                i += 2
            elif w[i] == "default":
                dest = "default"
                i += 1
            elif w[i] == "gw":
                gw = w[i + 1]
                i += 2
            elif w[i] == "metric":
                metric = w[i + 1]
                i += 2
            elif "/" in w[i] or re.match(r"^[0-9a-f:.]+$", w[i]):
                dest = w[i]
                i += 1
            else:
                i += 1
        return _route(name, dest, gw, metric)
    if w and w[0] == "ip":
        w = w[1:]
        if w[:2] in (["-family", "inet6"], ["-family", "inet"]):  # cloud-init 24.x+ writes the long form
            w = w[2:]
        w = [x for x in w if x not in ("-4", "-6")]
        if w[:2] != ["route", "add"]:
            return None
        w = w[2:]
        dest, rest = w[0], w[1:]
        opts = dict(zip(rest[::2], rest[1::2]))
        return _route(name, dest, opts.get("via"), opts.get("metric"))
    return None


def facts_eni(tree: dict) -> set:
    facts: set = _udev(tree)
    for path, text in tree.items():
        if not path.startswith("/etc/network/"):
            continue
        for entry in parse_eni(text):
            if entry[0] == "auto":
                facts.add(("auto", entry[2], entry[1]))
                continue
            name, fam, method, opts = entry
            if name == "lo" and method == "loopback":
                for k, v in opts:
                    _eni_opt(facts, name, fam, method, k, v, dict(opts))
                continue
            facts.add(("stanza", name, fam, method))
            odict = dict(opts)
            for k, v in opts:
                _eni_opt(facts, name, fam, method, k, v, odict)
    return facts


def _eni_opt(facts: set, name: str, fam: str, method: str, k: str, v: str, opts: dict) -> None:
    if k == "address":
        if "/" not in v and "netmask" in opts:
            v = f"{v}/{opts['netmask']}"
        facts.add(("address", name, _cidr(v)))
    elif k == "netmask":
        return
    elif k == "gateway":
        metric = opts.get("metric") if fam == "inet" and method == "static" else None
        facts.add(_route(name, None, v, metric))
    elif k == "metric" and method == "static":
        return                      # part of the gateway route above
    elif k == "dns-nameservers":
        for s in v.split():
            facts.add(("dns", s))
    elif k == "dns-search":
        for d in v.split():
            facts.add(("search", d))
    elif k in ("post-up", "up"):
        if v.startswith("ip link set dev") and " mtu " in v:
            facts.add(("mtu", name, v.split()[-1]))
            return
        route = _route_command(name, v)
        facts.add(route if route else ("opt", name, k, v))
    elif k in ("pre-up",) and v.startswith("ip link set dev") and " mtu " in v:
        facts.add(("mtu", name, v.split()[-1]))
    elif k in ("pre-down", "down", "post-down"):
        return                      # the undo of an up command
    elif k == "mtu":
        if fam == "inet6" and method == "static":
            facts.add(("ipv6-mtu", name, v))
        elif method in ("static", "manual"):
            facts.add(("mtu", name, v))
        else:
            facts.add(("mtu-ignored", name, fam, method, v))  # ifupdown's dhcp/auto take no mtu
    else:
        key = k.replace("_", "-")
        if key.startswith("bridge-") and key not in ("bridge-ports",):
            v = _bool(v) if key == "bridge-stp" else v
        if key == "bridge-ports":
            v = " ".join(sorted(v.split()))
        if key == "hwaddress":
            v = v.replace("ether ", "").lower()
        if key == "vlan-id" and (name.endswith(f".{v}") or name == f"vlan{v}"):
            return                  # implied by the name for ifupdown's vlan support
        facts.add(("opt", name, fam if key in ("accept-ra", "dhcp", "metric") else "*", key, v))


# ---------------------------------------------------------------------- networkd
def _ini_sections(text: str) -> list:
    out: list = []
    cur = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(";"):
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = (line[1:-1], [])
            out.append(cur)
        elif cur is not None and "=" in line:
            k, v = line.split("=", 1)
            cur[1].append((k.strip(), v.strip()))
    return out


def facts_networkd(tree: dict) -> set:
    facts: set = set()
    for path, text in tree.items():
        if path.startswith("/etc/systemd/resolved.conf"):
            for _sec, entries in _ini_sections(text):
                for k, v in entries:
                    if k == "DNS":
                        facts.update(("dns", s) for s in v.split())
                    elif k == "Domains":
                        facts.update(("search", d) for d in v.split())
            continue
        if not path.startswith("/etc/systemd/network/"):
            continue
        sections = _ini_sections(text)
        kind = path.rsplit(".", 1)[-1]
        match = dict(e for s, es in sections if s == "Match" for e in es)
        if kind == "netdev":
            nd = dict(e for s, es in sections if s == "NetDev" for e in es)
            name = nd.get("Name")
            for sec, entries in sections:
                for k, v in entries:
                    if (sec, k) != ("NetDev", "Name"):
                        v = v.lower() if "MAC" in k else v
                        if v.lower() in ("yes", "no", "true", "false"):
                            v = _bool(v)
                        facts.add(("netdev", name, sec, k, v))
            continue
        if kind == "link":
            for sec, entries in sections:
                for k, v in entries:
                    if sec == "Match" and "MACAddress" in k:
                        k, v = "MACAddress", v.lower()
                    facts.add(("link", sec, k, v))
            continue
        name = match.get("Name") or match.get("MACAddress") or match.get("PermanentMACAddress")
        for sec, entries in sections:
            sec = "DHCPv4" if sec == "DHCP" else sec     # the old name of the section
            if sec == "Route":
                r = dict(entries)
                facts.add(_route(name, r.get("Destination"), r.get("Gateway"), r.get("Metric")))
                for k, v in entries:
                    if k not in ("Destination", "Gateway", "Metric"):
                        facts.add(("opt", name, "Route", k, v))
                continue
            for k, v in entries:
                if sec == "Match" and k in ("MACAddress", "PermanentMACAddress"):
                    facts.add(("match", name, "MACAddress", v.lower()))
                elif sec == "Match" and k == "Name":
                    facts.add(("match", name, "Name", v))
                elif k == "Address" and sec in ("Network", "Address"):
                    facts.add(("address", name, _cidr(v)))
                elif sec == "Network" and k == "Gateway":
                    facts.add(_route(name, None, v))
                elif sec == "Network" and k == "DNS":
                    facts.update(("dns", s) for s in v.split())
                elif sec == "Network" and k == "Domains":
                    facts.update(("search", d) for d in v.split())
                elif sec == "Network" and k == "DHCP":
                    for fam in {"yes": ("ipv4", "ipv6"), "ipv4": ("ipv4",), "ipv6": ("ipv6",)}.get(v, ()):
                        facts.add(("dhcp", name, fam))
                elif sec == "Link" and k == "MTUBytes":
                    facts.add(("mtu", name, v))
                else:
                    facts.add(("opt", name, sec, k, _bool(v) if v.lower() in ("yes", "no", "true", "false") else v))
    return facts


# ---------------------------------------------------------------------- sysconfig
def _shell_kv(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        try:
            parts = shlex.split(v)
            v = parts[0] if len(parts) == 1 else " ".join(parts)
        except ValueError:
            pass
        out[k.strip()] = v
    return out


def facts_sysconfig(tree: dict) -> set:
    facts: set = _udev(tree)
    for path, text in tree.items():
        base = os.path.basename(path)
        if path.startswith("/etc/sysconfig/network-scripts/ifcfg-"):
            name = base[len("ifcfg-"):]
            for k, v in _shell_kv(text).items():
                if k == "BONDING_OPTS":
                    for opt in v.split():
                        ok, _, ov = opt.partition("=")
                        facts.add(("bondopt", name, ok, ov))
                elif k in ("IPV6ADDR", "IPV6ADDR_SECONDARIES"):
                    for a in v.split():
                        facts.add(("ifcfg", name, "IPV6ADDR*", _cidr(a)))
                elif re.match(r"^DNS\d+$", k):
                    facts.add(("dns", v))
                    facts.add(("ifcfg-dns", name, v))
                elif k == "DOMAIN":
                    for d in v.split():
                        facts.add(("search", d))
                        facts.add(("ifcfg-search", name, d))
                elif re.match(r"^BONDING_SLAVE\d+$", k):
                    facts.add(("ifcfg", name, "BONDING_SLAVE*", v))
                elif k in ("HWADDR", "MACADDR"):
                    facts.add(("ifcfg", name, k, v.lower()))
                else:
                    facts.add(("ifcfg", name, k, _bool(v) if v.lower() in ("yes", "no") else v))
        elif path.startswith("/etc/sysconfig/network-scripts/route-"):
            name = base[len("route-"):]
            kv = _shell_kv(text)
            for k, v in kv.items():
                m = re.match(r"^ADDRESS(\d+)$", k)
                if m:
                    n = m.group(1)
                    facts.add(_route(name, f"{v}/{kv.get('NETMASK' + n, '255.255.255.255')}",
                                     kv.get("GATEWAY" + n), kv.get("METRIC" + n)))
        elif path.startswith("/etc/sysconfig/network-scripts/route6-"):
            name = base[len("route6-"):]
            for line in text.splitlines():
                w = line.split()
                if not w or w[0].startswith("#"):
                    continue
                opts = dict(zip(w[1::2], w[2::2]))
                facts.add(_route(name, w[0], opts.get("via"), opts.get("metric")))
        elif path == "/etc/sysconfig/network":
            for k, v in _shell_kv(text).items():
                facts.add(("sysnet", k, _bool(v)))
        elif path == "/etc/resolv.conf":
            for line in text.splitlines():
                w = line.split()
                if w and w[0] == "nameserver":
                    facts.add(("dns", w[1]))
                elif w and w[0] in ("search", "domain"):
                    facts.update(("search", d) for d in w[1:])
        elif path.startswith("/etc/NetworkManager/conf.d/"):
            for sec, entries in _ini_sections(text):
                for k, v in entries:
                    facts.add(("nmconf", sec, k, v))
    return facts


# ---------------------------------------------------------------------- NetworkManager
def facts_network_manager(tree: dict) -> set:
    facts: set = _udev(tree)
    conns = {}
    for path, text in tree.items():
        if not path.startswith("/etc/NetworkManager/system-connections/"):
            continue
        cp = configparser.ConfigParser(interpolation=None, strict=False)
        cp.optionxform = str
        cp.read_string(text)
        conns[path] = cp
    names = {}
    for cp in conns.values():
        ident = cp.get("connection", "interface-name", fallback=None) or \
            cp.get("connection", "id").split(" ", 1)[1]
        names[cp.get("connection", "uuid")] = ident
    for cp in conns.values():
        name = names[cp.get("connection", "uuid")]
        for sec in cp.sections():
            for k, v in cp.items(sec):
                if (sec, k) in (("connection", "id"), ("connection", "uuid")) or sec == "user":
                    continue
                if k in ("master", "parent"):
                    v = names.get(v, v)
                if k in ("mac-address", "cloned-mac-address"):
                    v = v.lower()
                if k == "dns":
                    facts.update(("dns", s) for s in v.split(";") if s)
                    continue
                if k == "dns-search":
                    facts.update(("search", d) for d in v.split(";") if d)
                    continue
                if re.match(r"^address\d+$", k):
                    facts.add(("nm", name, sec, "address", _cidr(v.split(",")[0])))
                    continue
                if re.match(r"^route\d+$", k):
                    parts = v.split(",")
                    gw = parts[1] if len(parts) > 1 and parts[1] else None
                    metric = parts[2] if len(parts) > 2 else None
                    dest = _net(parts[0])
                    if dest in ("0.0.0.0/0", "::/0") and gw:
                        facts.add(("nm", name, sec, "gateway", gw))
                        if metric:
                            facts.add(("nm", name, sec, "route-metric", metric))
                    else:
                        facts.add(("route", name, dest, gw, metric))
                    continue
                facts.add(("nm", name, sec, k, v))
    return facts


FACTS = {
    "eni": facts_eni, "netplan": facts_netplan, "networkd": facts_networkd,
    "sysconfig": facts_sysconfig, "network-manager": facts_network_manager,
}
