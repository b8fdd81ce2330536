"""Network config from the kernel command line: ``network-config=`` and the initramfs's ``ip=``.

``network-config=`` carries a v1/v2 config as base64 (optionally gzipped) YAML, or ``disabled``.
``ip=``/``ip6=`` means the initramfs already configured a NIC: its klibc ``ipconfig`` leaves
``/run/net-DEV.conf`` files, which we turn into a v1 config (subnets with ``control: manual``:
the initramfs brings them up on every boot). Without those files, the ``ip=`` value itself is
read (``ip=dhcp``, ``ip=CLIENT:SERVER:GW:NETMASK:HOST:DEV:AUTOCONF:DNS0:DNS1``).
"""

from __future__ import annotations

import base64
import binascii

from cloudseed.network.errors import NetworkConfigError

DISABLED = {"config": "disabled"}


def _tokens(cmdline: str) -> list:
    try:
        import shlex

        return shlex.split(cmdline or "")
    except ValueError:
        return (cmdline or "").split()


def network_config_from_cmdline(cmdline: str) -> dict | None:
    """The ``network-config=`` value decoded, ``DISABLED``, or None when absent."""
    value = None
    for tok in _tokens(cmdline):
        if tok.startswith("network-config="):
            value = tok.split("=", 1)[1]
    if not value:
        return None
    if value == "disabled":
        return dict(DISABLED)
    try:
        blob = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise NetworkConfigError("kernel command line network-config=: not valid base64") from None
    if blob[:2] == b"\x1f\x8b":
        try:
            import gzip

            blob = gzip.decompress(blob)
        except OSError as e:
            raise NetworkConfigError(f"kernel command line network-config=: bad gzip data ({e})") from None
    import yaml

    from cloudseed.core.yaml_loading import load_yaml

    try:
        data = load_yaml(blob.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise NetworkConfigError(f"kernel command line network-config=: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise NetworkConfigError("kernel command line network-config=: expected a mapping")
    return data


def has_ip_param(cmdline: str) -> bool:
    return any(t.startswith(("ip=", "ip6=")) for t in _tokens(cmdline))


def initramfs_config(cmdline: str, root=None, macs: dict | None = None) -> dict | None:
    """v1 config for what the initramfs configured (``ip=`` on the command line), or None."""
    if not has_ip_param(cmdline):
        return None
    files = _klibc_files(root)
    if files:
        return _from_klibc(files, macs or {})
    return _from_ip_param(cmdline, root)


def _host(root, inner: str) -> str:
    from cloudseed.network.sysnet import host_path

    return host_path(root, inner)


def _klibc_files(root) -> list:
    import glob

    return sorted(glob.glob(_host(root, "/run/net-*.conf")) + glob.glob(_host(root, "/run/net6-*.conf")))


def _shell_vars(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        try:
            import shlex

            parts = shlex.split(v)
            v = parts[0] if parts else ""
        except ValueError:
            v = v.strip("'\"")
        out[k.strip()] = v
    return out


def _from_klibc(files: list, macs: dict) -> dict:
    by_name: dict = {}
    names_to_mac = {name: mac for mac, name in macs.items()}
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            data = _shell_vars(f.read())
        name = data.get("DEVICE") or data.get("DEVICE6")
        if not name:
            raise NetworkConfigError(f"{path}: no DEVICE or DEVICE6")
        proto = data.get("PROTO", data.get("IPV6PROTO")) or ("dhcp" if data.get("filename") else "none")
        iface = by_name.setdefault(name, {"type": "physical", "name": name, "subnets": []})
        if name in names_to_mac:
            iface["mac_address"] = names_to_mac[name]
        for pre in ("IPV4", "IPV6"):
            if pre + "ADDR" not in data:
                continue
            cur = data.get(pre + "PROTO", proto)
            if cur not in ("none", "dhcp", "dhcp6"):
                raise NetworkConfigError(f"{path}: unexpected PROTO {cur!r}")
            subnet: dict = {"type": "static" if cur == "none" else cur, "control": "manual"}
            if cur == "none":
                subnet["address"] = data[pre + "ADDR"]
                for key in ("NETMASK", "GATEWAY"):
                    if data.get(pre + key) and data[pre + key].strip(":.0"):
                        subnet[key.lower()] = data[pre + key]
            dns = [data[pre + k] for k in ("DNS0", "DNS1") if data.get(pre + k, "").strip(":.0")]
            if dns:
                subnet["dns_nameservers"] = dns
                search = data.get("DOMAINSEARCH")
                if search:
                    subnet["dns_search"] = search.replace(",", " ").split()
            if subnet["type"] == "dhcp" and pre == "IPV4":
                subnet["type"] = "dhcp4"
            iface["subnets"].append(subnet)
    return {"version": 1, "config": list(by_name.values())}


def _from_ip_param(cmdline: str, root) -> dict | None:
    """Read ``ip=`` itself (kernel/dracut syntax) when no klibc state files exist."""
    config = []
    for tok in _tokens(cmdline):
        if not tok.startswith("ip="):
            continue
        fields = tok[3:].split(":")
        if len(fields) == 1:
            method, device, static = fields[0], "", None
        else:
            fields += [""] * (10 - len(fields))
            client, _server, gw, mask, _host, device, autoconf, dns0, dns1 = fields[:9]
            method = autoconf or ("none" if client else "dhcp")
            static = (client, gw, mask, dns0, dns1)
        if method in ("off", "none") and not (static and static[0]):
            continue
        if not device:
            from cloudseed.network.fallback import choose_fallback_nic

            nic = choose_fallback_nic(root)
            if nic is None:
                continue
            device = nic[0]
        if method in ("dhcp", "on", "any", "both", "dhcp4"):
            subnets = [{"type": "dhcp4", "control": "manual"}]
        elif method in ("dhcp6", "auto6"):
            subnets = [{"type": "dhcp6" if method == "dhcp6" else "ipv6_slaac", "control": "manual"}]
        else:
            client, gw, mask, dns0, dns1 = static
            subnet: dict = {"type": "static", "control": "manual", "address": client.strip("[]")}
            if mask:
                subnet["netmask" if "." in mask else "prefix"] = mask
            if gw:
                subnet["gateway"] = gw.strip("[]")
            dns = [d for d in (dns0, dns1) if d]
            if dns:
                subnet["dns_nameservers"] = dns
            subnets = [subnet]
        config.append({"type": "physical", "name": device, "subnets": subnets})
    return {"version": 1, "config": config} if config else None


def read_cmdline(root=None) -> str:
    """The target's kernel command line (``/proc/cmdline`` under the root)."""
    try:
        with open(_host(root, "/proc/cmdline"), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""

