"""Network config v1 from the ``/etc/network/interfaces`` text a config drive may carry instead of
``network_data.json`` (``meta_data.json``'s ``network_config: {content_path: /content/0000}``), as
Proxmox VE's configdrive2 and old Nova write it.

Read as cloud-init 22.4's ``convert_eni_data`` reads it (``auto``, ``iface NAME inet|inet6 METHOD``,
``address``, ``netmask``, ``gateway``, ``broadcast``, ``hwaddress``, ``mtu``, ``dns-nameservers``,
``dns-search``; one physical device per name, sorted; ``lo`` a loopback), with two named
differences where 22.4 loses what Proxmox writes: a NIC with both ``inet`` and ``inet6`` stanzas is
one device with both subnets (22.4 raises "can only be defined once" and reads nothing), and
Proxmox's ``dns_nameservers``/``dns_search`` (underscores, under ``lo``) become a global
``nameserver`` entry (22.4 ignores them). IPv6 ``static`` is ``static6`` with ``address/prefix``,
``auto`` is ``ipv6_slaac``, ``dhcp`` is ``dhcp6``. ``source`` and ``source-directory`` lines are
refused (they would read files of the guest), as is anything that is not a stanza or option.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

OPTIONS = ("address", "netmask", "gateway", "broadcast", "mtu")


class ENIError(Exception):
    """The interfaces text cannot be read; the message names the line."""


def eni_to_v1(text: str, where: str = "interfaces") -> dict[str, Any]:
    devices: dict[str, dict[str, Any]] = {}
    auto: set[str] = set()
    nameservers: list[str] = []
    search: list[str] = []
    current: dict[str, Any] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        option = words[0]
        if option in ("source", "source-directory"):
            raise ENIError(f"{where}, line {number}: {option!r} is not followed (it would read the guest's files)")
        if option in ("auto", "allow-hotplug"):
            auto.update(words[1:])
            continue
        if option == "iface":
            if len(words) < 4:
                raise ENIError(f"{where}, line {number}: 'iface' needs a name, a family and a method")
            name, family, method = words[1].partition(":")[0], words[2], words[3]
            dev = devices.setdefault(name, {"type": "loopback" if name == "lo" else "physical", "name": name,
                                            "subnets": []})
            current = {"_family": family, "type": method}
            dev["subnets"].append(current)
            continue
        if current is None:
            raise ENIError(f"{where}, line {number}: {option!r} outside an 'iface' stanza")
        if len(words) < 2:
            continue
        if option in OPTIONS:
            current[option] = words[1]
        elif option == "hwaddress":
            devices[list(devices)[-1]]["mac_address"] = (words[2] if words[1] == "ether" else words[1]).lower()
        elif option in ("dns-nameservers", "dns_nameservers"):
            nameservers.extend(w for w in words[1:] if w not in nameservers)
        elif option in ("dns-search", "dns_search"):
            search.extend(w for w in words[1:] if w not in search)
    config: list[dict[str, Any]] = []
    for name in sorted(devices):
        dev = devices[name]
        subnets = []
        for sub in dev["subnets"]:
            family, method = sub.pop("_family"), sub["type"]
            sub["control"] = "auto" if name in auto else "manual"
            if family == "inet6":
                if method == "static":
                    prefix = sub.pop("netmask", "64")
                    sub.update(type="static6", address=f"{sub.get('address')}/{prefix}")
                else:
                    sub["type"] = {"auto": "ipv6_slaac", "dhcp": "dhcp6"}.get(method, method)
            elif method == "static" and "address" not in sub:
                raise ENIError(f"{where}: {name} inet static has no address")
            if "mtu" in sub and name != "lo":
                dev["mtu"] = int(sub.pop("mtu")) if sub["mtu"].isdigit() else sub.pop("mtu")
            subnets.append(sub)
        dev["subnets"] = subnets
        config.append(dev)
    if nameservers or search:
        entry: dict[str, Any] = {"type": "nameserver", "address": nameservers}
        if search:
            entry["search"] = search
        config.append(entry)
    return {"version": 1, "config": config}
