"""Bond and bridge parameters: one canonical spelling (netplan's) and the maps to every format.

The model stores bond parameters under netplan's names (``mode``, ``mii-monitor-interval``...)
and bridge parameters likewise (``stp``, ``forward-delay``, ``priority``...). Each input format's
spelling is mapped here, and each renderer maps from here.
"""

from __future__ import annotations

from cloudseed.network.model import BOND_MODES, check_bool, check_int, fail, fmt_path

# canonical name -> (kernel/ifenslave option name, value kind)
BOND_PARAMS: dict[str, tuple[str, str]] = {
    "mode": ("mode", "mode"),
    "mii-monitor-interval": ("miimon", "int"),
    "lacp-rate": ("lacp_rate", "lacp-rate"),
    "min-links": ("min_links", "int"),
    "transmit-hash-policy": ("xmit_hash_policy", "transmit-hash-policy"),
    "ad-select": ("ad_select", "ad-select"),
    "all-slaves-active": ("all_slaves_active", "bool"),
    "arp-interval": ("arp_interval", "int"),
    "arp-ip-targets": ("arp_ip_target", "list"),
    "arp-validate": ("arp_validate", "arp-validate"),
    "arp-all-targets": ("arp_all_targets", "arp-all-targets"),
    "up-delay": ("updelay", "int"),
    "down-delay": ("downdelay", "int"),
    "fail-over-mac-policy": ("fail_over_mac", "fail-over-mac-policy"),
    "gratuitous-arp": ("num_grat_arp", "int"),
    "packets-per-slave": ("packets_per_slave", "int"),
    "primary-reselect-policy": ("primary_reselect", "primary-reselect-policy"),
    "resend-igmp": ("resend_igmp", "int"),
    "learn-packet-interval": ("lp_interval", "int"),
    "primary": ("primary", "str"),
}

# v1 (ifenslave) spellings, with '-' or '_' after "bond"
_V1_BOND = {
    "bond-mode": "mode", "bond-miimon": "mii-monitor-interval", "bond-lacp-rate": "lacp-rate",
    "bond-min-links": "min-links", "bond-xmit-hash-policy": "transmit-hash-policy",
    "bond-ad-select": "ad-select", "bond-arp-interval": "arp-interval",
    "bond-arp-ip-target": "arp-ip-targets", "bond-arp-validate": "arp-validate",
    "bond-updelay": "up-delay", "bond-downdelay": "down-delay",
    "bond-fail-over-mac": "fail-over-mac-policy", "bond-num-grat-arp": "gratuitous-arp",
    "bond-primary-reselect": "primary-reselect-policy", "bond-primary": "primary",
    "bond-all-slaves-active": "all-slaves-active", "bond-packets-per-slave": "packets-per-slave",
    "bond-resend-igmp": "resend-igmp", "bond-lp-interval": "learn-packet-interval",
}

# canonical bridge name -> value kind
BRIDGE_PARAMS: dict[str, str] = {
    "ageing-time": "int", "priority": "int", "forward-delay": "int", "hello-time": "int",
    "max-age": "int", "stp": "bool", "path-cost": "ports", "port-priority": "ports",
}

# v1 (bridge-utils) spellings; None: an ifupdown timing knob with no meaning elsewhere, dropped
_V1_BRIDGE = {
    "bridge_ageing": "ageing-time", "bridge_bridgeprio": "priority", "bridge_fd": "forward-delay",
    "bridge_hello": "hello-time", "bridge_maxage": "max-age", "bridge_stp": "stp",
    "bridge_pathcost": "path-cost", "bridge_portprio": "port-priority",
    "bridge_gcint": None, "bridge_maxwait": None, "bridge_waitport": None,
}

_NUMERIC_MODES = {str(i): m for i, m in enumerate(BOND_MODES)}

# the kernel bonding driver's values for its word-valued options, in the order of their numbers
# (the driver takes either: "fast" or "1"); the kind of each such parameter above is its own name
BOND_WORDS: dict[str, tuple[str, ...]] = {
    "lacp-rate": ("slow", "fast"),
    "transmit-hash-policy": ("layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4", "vlan+srcmac"),
    "ad-select": ("stable", "bandwidth", "count"),
    "arp-validate": ("none", "active", "backup", "all", "filter", "filter_active", "filter_backup"),
    "arp-all-targets": ("any", "all"),
    "fail-over-mac-policy": ("none", "active", "follow"),
    "primary-reselect-policy": ("always", "better", "failure"),
}


def v1_bond_key(key: str) -> str | None:
    """Canonical name for a v1/OpenStack bond parameter (``bond-miimon``, ``bond_miimon``)."""
    k = key.replace("_", "-")
    return _V1_BOND.get(k)


def v1_bridge_key(key: str) -> str | None | bool:
    """Canonical name for a v1 bridge parameter; None when dropped; False when unknown."""
    k = key.replace("-", "_")
    if k not in _V1_BRIDGE:
        return False
    return _V1_BRIDGE[k]


def check_bond_value(name: str, value, path: str):
    kind = BOND_PARAMS[name][1]
    if kind == "mode":
        text = str(value).strip()
        text = _NUMERIC_MODES.get(text, text)
        if text not in BOND_MODES:
            raise fail(path, f"{value!r} is not a bond mode (one of {', '.join(BOND_MODES)})")
        return text
    if kind in BOND_WORDS:
        words = BOND_WORDS[kind]
        text = str(value).strip().lower()
        if text.isdigit() and int(text) < len(words):
            text = words[int(text)]
        if isinstance(value, (bool, dict, list)) or value is None or text not in words:
            raise fail(path, f"{value!r} is not a {kind} value (one of {', '.join(words)})")
        return text
    if kind == "int":
        text = str(value).strip()
        if text.endswith("ms") and text[:-2].isdigit():
            text = text[:-2]
        return check_int(text, path, 0)
    if kind == "bool":
        return check_bool(value, path)
    if kind == "list":
        from cloudseed.network.model import check_ip, check_str_list

        return [check_ip(v, fmt_path(path, i)) for i, v in enumerate(check_str_list(value, path))]
    if isinstance(value, (dict, list)) or value is None:
        raise fail(path, f"{value!r} is not a valid value")
    return str(value)


def check_bridge_value(name: str, value, path: str):
    kind = BRIDGE_PARAMS[name]
    if kind == "int":
        return check_int(value, path, 0)
    if kind == "bool":
        return check_bool(value, path)
    # per-port values: v2 mapping {port: n}; v1 list of "port n" strings
    out = {}
    if isinstance(value, dict):
        for port, n in value.items():
            out[str(port)] = check_int(n, fmt_path(path, port), 0)
        return out
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise fail(path, f"{value!r} is not a list of 'port value' entries")
    for i, item in enumerate(items):
        parts = str(item).split()
        if len(parts) != 2:
            raise fail(fmt_path(path, i), f"{item!r} is not 'port value'")
        out[parts[0]] = check_int(parts[1], fmt_path(path, i), 0)
    return out
