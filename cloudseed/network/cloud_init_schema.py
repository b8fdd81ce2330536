"""The forms cloudseed's network parser takes that cloud-init 26.x's network-config schema refuses.

``cloudseed schema -t network-config`` is what users run before booting an image, and the images
ship cloud-init 24.x-26.x: its boot checks network-config against its JSON schemas (v1, v2) and a
document they refuse leaves the boot degraded with a warning, though its renderers apply it. So
after the parser has accepted a document, ``problems`` names each form those schemas refuse for
which a spelling exists that they accept and that cloud-init's renderers (and, for v2, netplan)
read the same way: an MTU in quotes, ``prefix`` where the schema knows only ``netmask``, a list
written as one string, a bridge without ``params``, an unquoted ``bridge_stp: off`` (a YAML
boolean)... The message says what to write. The agent itself applies every one of these forms.

Only warned about, because no such spelling exists (cloudseed's verdict differs from 26.x's there
on purpose, ``tests/network/test_net_schema_reference.py`` names each case): v1 ``wakeonlan``, v1
bond options of two words spelled with hyphens (``bond-xmit-hash-policy``: cloud-init's networkd
and sysconfig renderers read only that spelling, its NetworkManager renderer only the schema's
``bond-xmit_hash_policy``), v2 routes with ``on-link`` or ``table``, v2 bridge ``path-cost`` per
port (netplan's form; the schema wants one number, which netplan refuses).
"""

from __future__ import annotations

from cloudseed.network.model import BOND_MODES, fmt_path
from cloudseed.network.params import BOND_WORDS, v1_bond_key

RELEASE = "cloud-init 26.x"

# cloud-init's v1 schema spelling of each bond option cloudseed reads -> the type it wants there
_V1_BOND_TYPES = {
    "bond-mode": str, "bond-miimon": int, "bond-lacp_rate": str, "bond-min_links": int,
    "bond-xmit_hash_policy": str, "bond-ad_select": str, "bond-arp_interval": int,
    "bond-arp_ip_target": str, "bond-updelay": str, "bond-downdelay": int, "bond-fail_over_mac": str,
    "bond-num_grat_arp": int, "bond-primary_reselect": str, "bond-primary": str,
    "bond-all_slaves_active": str, "bond-packets_per_slave": int, "bond-resend_igmp": str,
    "bond-lp_interval": int,
}
_V1_BRIDGE_INTS = ("bridge_ageing", "bridge_bridgeprio", "bridge_fd", "bridge_hello", "bridge_maxage",
                   "bridge_maxwait")
_V2_BOND_TYPES = {
    "min-links": int, "arp-interval": int, "up-delay": int, "down-delay": int, "gratuitous-arp": int,
    "packets-per-slave": int, "mii-monitor-interval": str, "learn-packet-interval": str,
    "all-slaves-active": bool,
}
_V2_BRIDGE_TYPES = {"ageing-time": int, "priority": int, "forward-delay": int, "hello-time": int, "max-age": int,
                    "stp": bool}
_V2_OVERRIDE_TYPES = {"route-metric": int, "send-hostname": bool, "use-dns": bool, "use-hostname": bool,
                      "use-mtu": bool, "use-ntp": bool, "use-routes": bool, "use-domains": str}


def problems(cfg: dict) -> list[tuple[str, str, str]]:
    """(key path, message, level) for each form of ``cfg`` (a document the parser accepted) 26.x's schema
    refuses: ``error`` where a spelling both accept exists, ``warning`` where none does."""
    prefix = ""
    if isinstance(cfg.get("network"), dict):
        cfg, prefix = cfg["network"], "network"
    found: list[tuple[str, str]] = []
    version = cfg.get("version")
    if isinstance(version, str):
        found.append((fmt_path(prefix, "version"), _want(version, int)))
    if str(version) == "1":
        _v1(cfg, prefix, found)
    elif str(version) == "2":
        _v2(cfg, prefix, found)
    return [(entry[0], entry[1], entry[2] if len(entry) > 2 else "error") for entry in found]


def _kept(found: list, path: str, why: str) -> None:
    """A form kept although 26.x's schema refuses it: a warning, the verdict unchanged."""
    found.append((path, f"{RELEASE}'s schema refuses this and its boot warns about it; kept: {why}", "warning"))


def _want(value, kind) -> str:
    """The message for ``value`` where the schema wants ``kind``."""
    if kind is int:
        what, write = "a number", str(value).strip().removesuffix("ms")
    elif kind is bool:
        what, write = "true or false", "true" if str(value).lower() in ("true", "yes", "on", "1") else "false"
    else:
        what, write = "a string", f'"{value}"' if not isinstance(value, bool) else f'"{str(value).lower()}"'
    return f"{RELEASE}'s schema wants {what} here (its boot warns otherwise): write {write}"


def _typed(found: list, path: str, value, kind) -> None:
    if value is None:
        return
    if kind is bool:
        wrong = not isinstance(value, bool)
    elif kind is int:
        wrong = isinstance(value, bool) or not isinstance(value, int)
    else:
        wrong = not isinstance(value, str)
    if wrong:
        found.append((path, _want(value, kind)))


def _as_list(found: list, path: str, value) -> None:
    if isinstance(value, str):
        found.append((path, f"{RELEASE}'s schema wants a list here (its boot warns otherwise): write [{value}]"))


def _prefix(found: list, path: str, entry: dict, key: str) -> None:
    """``prefix`` beside ``key`` (a subnet's address, a route's network): the CIDR form says the same."""
    where = entry.get(key) or entry.get("destination") or "ADDRESS"
    found.append((fmt_path(path, "prefix"), f"{RELEASE}'s schema has no prefix here (its boot warns otherwise): "
                                            f"write {key}: {where}/{entry['prefix']}, or give netmask"))


# --------------------------------------------------------------------------- v1
def _v1(cfg: dict, prefix: str, found: list) -> None:
    for i, item in enumerate(cfg.get("config") or []):
        path = fmt_path(fmt_path(prefix, "config"), i)
        kind = item.get("type")
        if "id" in item:
            found.append((fmt_path(path, "id"), f"{RELEASE}'s schema has no id (a curtin key; entries are "
                                                "referred to by name): remove it"))
        for key in ("mtu", "vlan_id", "metric"):
            if item.get(key) is not None:
                _typed(found, fmt_path(path, key), item[key], int)
        if "wakeonlan" in item:
            _kept(found, fmt_path(path, "wakeonlan"), "its renderers apply it, its v1 schema forgot it")
        if kind == "nameserver":
            if "address" not in item:
                found.append((path, f"{RELEASE} needs address in a nameserver entry (its boot skips the "
                                    "entry): add address, or put dns_search on a subnet"))
            _as_list(found, fmt_path(path, "search"), item.get("search"))
        elif kind == "route":
            if "prefix" in item:
                _prefix(found, path, item, "destination" if "destination" in item else "network")
        elif kind == "bridge":
            _v1_bridge(item, path, found)
        elif kind == "bond":
            _v1_bond(item.get("params") or {}, fmt_path(path, "params"), found)
        for j, subnet in enumerate(item.get("subnets") or []):
            _v1_subnet(subnet, fmt_path(fmt_path(path, "subnets"), j), found)


def _v1_subnet(subnet: dict, path: str, found: list) -> None:
    if not isinstance(subnet, dict):
        return
    if "prefix" in subnet:
        _prefix(found, path, subnet, "address")
    for key in ("dns_nameservers", "dns_search"):
        _as_list(found, fmt_path(path, key), subnet.get(key))
    _typed(found, fmt_path(path, "metric"), subnet.get("metric"), int)
    for k, route in enumerate(subnet.get("routes") or []):
        rpath = fmt_path(fmt_path(path, "routes"), k)
        if isinstance(route, dict):
            if "prefix" in route:
                _prefix(found, rpath, route, "destination" if "destination" in route else "network")
            _typed(found, fmt_path(rpath, "metric"), route.get("metric"), int)


def _v1_bridge(item: dict, path: str, found: list) -> None:
    params = item.get("params")
    if params is None:
        found.append((path, f"{RELEASE}'s schema requires params on a bridge (its boot warns otherwise): "
                            "add params: {}"))
        return
    ppath = fmt_path(path, "params")
    stp = params.get("bridge_stp")
    if isinstance(stp, bool):  # YAML reads an unquoted on/off as a boolean
        found.append((fmt_path(ppath, "bridge_stp"), f"{RELEASE}'s schema wants 'on' or 'off' here, quoted "
                                                     f"(unquoted, YAML reads a boolean): write "
                                                     f"\"{'on' if stp else 'off'}\""))
    for key in _V1_BRIDGE_INTS:
        _typed(found, fmt_path(ppath, key), params.get(key), int)


def _v1_bond(params: dict, path: str, found: list) -> None:
    for key, value in params.items():
        key = str(key)
        canon = v1_bond_key(key)
        if canon is None:
            continue
        schema_key = "bond-" + key[5:].replace("-", "_")
        if key != schema_key:
            if "_" in schema_key[5:]:  # a two-word option: cloud-init's renderers disagree on the spelling
                _kept(found, fmt_path(path, key), f"its schema spells it {schema_key}, which only its NetworkManager "
                                                  "renderer reads; its networkd and sysconfig renderers read this one")
                continue
            found.append((fmt_path(path, key), f"{RELEASE}'s schema spells it {schema_key} (every renderer of "
                                               f"cloud-init reads that): write {schema_key}"))
            continue
        kind = _V1_BOND_TYPES.get(key)
        if kind is not None:
            _typed(found, fmt_path(path, key), value, kind)
        if key == "bond-mode" and str(value).strip().isdigit():
            found.append((fmt_path(path, key), f"{RELEASE}'s schema wants the mode's name: write "
                                               f"{_bond_mode(value)}"))


def _bond_mode(value) -> str:
    n = int(str(value).strip())
    return BOND_MODES[n] if n < len(BOND_MODES) else str(value)


# --------------------------------------------------------------------------- v2
def _v2(cfg: dict, prefix: str, found: list) -> None:
    for section in ("ethernets", "bonds", "bridges", "vlans"):
        for dev_id, dev in (cfg.get(section) or {}).items():
            if not isinstance(dev, dict):
                continue
            path = fmt_path(fmt_path(prefix, section), dev_id)
            _v2_device(dev, path, found)
            params = dev.get("parameters") or {}
            ppath = fmt_path(path, "parameters")
            if section == "bonds":
                for key, kind in _V2_BOND_TYPES.items():
                    _typed(found, fmt_path(ppath, key), params.get(key), kind)
                for key, value in params.items():
                    words = BOND_WORDS.get(key, ())
                    if str(value).strip().isdigit() and (words or key == "mode"):
                        name = words[int(value)] if words and int(value) < len(words) else _bond_mode(value)
                        found.append((fmt_path(ppath, key), f"{RELEASE}'s schema wants the name: write {name}"))
            elif section == "bridges":
                for key, kind in _V2_BRIDGE_TYPES.items():
                    _typed(found, fmt_path(ppath, key), params.get(key), kind)
                if isinstance(params.get("path-cost"), dict):
                    _kept(found, fmt_path(ppath, "path-cost"), "netplan's cost per port; the schema wants one "
                                                               "number, which netplan refuses")
            elif section == "vlans":
                _typed(found, fmt_path(path, "id"), dev.get("id"), int)


def _v2_device(dev: dict, path: str, found: list) -> None:
    for key in ("dhcp4", "dhcp6"):
        value = dev.get(key)
        if value is not None and not isinstance(value, bool) and value not in ("yes", "no"):
            found.append((fmt_path(path, key), _want(value, bool)))
    for key in ("optional", "wakeonlan"):
        _typed(found, fmt_path(path, key), dev.get(key), bool)
    _typed(found, fmt_path(path, "mtu"), dev.get("mtu"), int)
    for key in ("dhcp4-overrides", "dhcp6-overrides"):
        overrides = dev.get(key) or {}
        for name, kind in _V2_OVERRIDE_TYPES.items():
            _typed(found, fmt_path(fmt_path(path, key), name), overrides.get(name), kind)
    for i, route in enumerate(dev.get("routes") or []):
        if isinstance(route, dict):
            rpath = fmt_path(fmt_path(path, "routes"), i)
            _typed(found, fmt_path(rpath, "metric"), route.get("metric"), int)
            for key in ("on-link", "table"):
                if key in route:
                    _kept(found, fmt_path(rpath, key), "netplan takes it (and so does cloud-init where netplan "
                                                       "is installed); the schema allows only to, via and metric")
