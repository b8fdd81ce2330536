"""Which hostname and FQDN this instance gets, and the ``/etc/hosts`` edits that follow from them.

Precedence (as cloud-init users expect): ``fqdn`` in the config, then ``hostname`` (a dotted
``hostname`` is taken as the FQDN), then the datasource's ``local-hostname``, then the name the
system already has. An IPv4 address given as a name becomes ``ip-10-0-0-1``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


class HostnameError(ValueError):
    """A configured name is not a usable hostname; the message names the key."""


@dataclass(frozen=True)
class HostNames:
    hostname: str  # short name
    fqdn: str  # fully qualified (equal to hostname when no domain is known)
    from_metadata: bool = False  # True when neither fqdn nor hostname was configured


def check_hostname(value: Any, key: str) -> str:
    """``value`` as a hostname string, or HostnameError naming ``key``."""
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise HostnameError(f"{key}: expected a host name string, got {type(value).__name__}")
    name = str(value).strip().rstrip(".")
    if not name or len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        raise HostnameError(f"{key}: {value!r} is not a valid host name "
                            "(letters, digits and '-', labels of 1-63 characters separated by dots)")
    return name


def _split_metadata_name(name: str) -> tuple[str, str]:
    """(short, fqdn) for a datasource name, turning an IPv4 address into ip-a-b-c-d."""
    try:
        if isinstance(ipaddress.ip_address(name), ipaddress.IPv4Address):
            short = "ip-" + name.replace(".", "-")
            return short, short
    except ValueError:
        pass
    short, _, domain = name.partition(".")
    return short, (f"{short}.{domain}" if domain and domain != "localdomain" else short)


def resolve(cfg: dict, datasource: Any = None, current: str = "") -> HostNames:
    """The (hostname, fqdn) the config, the metadata or the system give."""
    if cfg.get("fqdn"):
        fqdn = check_hostname(cfg["fqdn"], "fqdn")
        hostname = check_hostname(cfg["hostname"], "hostname") if cfg.get("hostname") else fqdn.split(".")[0]
        return HostNames(hostname, fqdn)
    if cfg.get("hostname"):
        name = check_hostname(cfg["hostname"], "hostname")
        return HostNames(name.split(".")[0], name)
    local = getattr(datasource, "local_hostname", None) if datasource is not None else None
    if local:
        short, fqdn = _split_metadata_name(str(local).strip())
        return HostNames(short, fqdn, from_metadata=True)
    name = current or "localhost"
    return HostNames(name.split(".")[0], name, from_metadata=True)


def choose(names: HostNames, prefer_fqdn: bool) -> str:
    """The name written to the hostname file."""
    if prefer_fqdn and names.fqdn:
        return names.fqdn
    return names.hostname or names.fqdn


def update_hosts_entry(text: str, address: str, fqdn: str, hostname: str) -> str | None:
    """``/etc/hosts`` text with ``address`` mapping ``fqdn hostname``; None when already so.

    Used for ``manage_etc_hosts: localhost``: every other line is kept as it was; when the
    address already names the FQDN with the short name as an alias nothing changes, otherwise
    the entry is added to the address's existing names.
    """
    names_of_address: list[list[str]] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if fields and fields[0] == address:
            names_of_address.append(fields[1:])
    for names in names_of_address:
        if names and names[0] == fqdn and hostname in names[1:]:
            return None
    wanted = [fqdn] + ([hostname] if hostname != fqdn else [hostname])
    if not names_of_address:
        body = text if not text or text.endswith("\n") else text + "\n"
        return body + f"{address} {' '.join(wanted)}\n"
    out, placed = [], False
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if fields and fields[0] == address:
            if not placed:
                out.append(f"{address} {' '.join(wanted)}")
                placed = True
            out.append(line)
            continue
        out.append(line)
    return "\n".join(out) + "\n"
