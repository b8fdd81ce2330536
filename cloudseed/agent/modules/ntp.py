"""ntp: configure the time client (chrony, ntp/ntpsec, ntpdate, systemd-timesyncd, openntpd).

``ntp_client: auto`` (the default, or ``system_info.ntp_client``) takes the first client of the
distro's preference order that the image has (chrony, systemd-timesyncd, ntp, ntpdate, as
cloud-init), else the first of that order. ``pools``, ``servers``, ``peers`` and ``allow`` fill the
client's configuration; with neither pools nor servers, four ``N.<distro>.pool.ntp.org`` pools are
used. The configuration comes from ``config.template`` when given (Jinja with ``## template:jinja``),
else from a ``<client>.conf.<distro>.tmpl`` template the image provides (``/etc/cloudseed/templates``
or ``/etc/cloud/templates``), else from the built-in one. ``config`` overrides any of the client's
facts (``confpath``, ``check_exe``, ``packages``, ``service_name``, ``template``), which is also how
an unknown client is described. An existing configuration is kept once as ``<confpath>.dist``.
A client that is not installed is installed with the distro's package manager (its ``packages``),
after its configuration is written (apt keeps that file: --force-confold). On the running system
the service is then restarted.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_HOSTS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}

MODULE = ModuleSpec(
    name="ntp", stage=STAGE_CONFIG,
    title="Configure the NTP client",
    schema={"properties": {"ntp": {
        "type": ["object", "null"], "additionalProperties": False,
        "properties": {
            "pools": dict(_HOSTS, description="NTP pools (default: 4 pools of <distro>.pool.ntp.org)."),
            "servers": dict(_HOSTS, description="NTP servers."),
            "peers": dict(_HOSTS, description="NTP peers (chrony, ntp)."),
            "allow": dict(_HOSTS, description="Networks (CIDR) allowed to query this host (chrony, ntp)."),
            "ntp_client": {"type": "string", "description": "auto, chrony, ntp, ntpsec, ntpdate, openntpd, "
                                                            "systemd-timesyncd, or a name described by config."},
            "enabled": {"type": "boolean", "description": "false: leave time synchronisation alone."},
            "config": {
                "type": "object", "additionalProperties": False, "minProperties": 1,
                "properties": {
                    "confpath": {"type": "string"}, "check_exe": {"type": "string"},
                    "packages": {"type": "array", "items": {"type": "string"}},
                    "service_name": {"type": "string"}, "template": {"type": "string"},
                },
            },
        },
    }}},
    examples=(
        "ntp:\n  enabled: true\n  ntp_client: chrony\n",
        "ntp:\n  pools: [0.int.pool.ntp.org, 1.int.pool.ntp.org]\n  servers: [ntp.example.com, 192.168.23.2]\n"
        "  peers: [peer1.example.com]\n  allow: [10.0.0.0/8]\n",
        "ntp:\n  ntp_client: myntpclient\n  config:\n    confpath: /etc/myntpclient/myntpclient.conf\n"
        "    check_exe: myntpclientd\n    packages: [myntpclient]\n    service_name: myntpclient\n"
        "    template: |\n      ## template:jinja\n      {% for pool in pools -%}\n      pool {{pool}} iburst\n"
        "      {% endfor %}\n  servers: [ntp.example.com]\n",
    ),
)

PREFERENCE = ("chrony", "systemd-timesyncd", "ntp", "ntpdate")


def client_table(family: str) -> dict[str, dict[str, Any]]:
    """The built-in clients with this family's paths and service names."""
    rhel = family == "rhel"
    timesyncd = "/usr/lib/systemd/systemd-timesyncd" if rhel else "/lib/systemd/systemd-timesyncd"
    return {
        "chrony": {"check_exe": "chronyd", "confpath": "/etc/chrony.conf" if rhel else "/etc/chrony/chrony.conf",
                   "packages": ["chrony"], "service_name": "chronyd" if rhel else "chrony", "kind": "chrony"},
        "ntp": {"check_exe": "ntpd", "confpath": "/etc/ntp.conf", "packages": ["ntp"],
                "service_name": "ntpd" if rhel else "ntp", "kind": "ntp"},
        "ntpsec": {"check_exe": "ntpd", "confpath": "/etc/ntpsec/ntp.conf", "packages": ["ntpsec"],
                   "service_name": "ntpsec", "kind": "ntp"},
        "ntpdate": {"check_exe": "ntpdate", "confpath": "/etc/ntp.conf", "packages": ["ntpdate"],
                    "service_name": "ntpdate", "kind": "ntp"},
        "openntpd": {"check_exe": "ntpd", "confpath": "/etc/ntpd.conf" if rhel else "/etc/openntpd/ntpd.conf",
                     "packages": ["openntpd"], "service_name": "ntpd" if rhel else "openntpd", "kind": "openntpd"},
        "systemd-timesyncd": {"check_exe": timesyncd, "confpath": "/etc/systemd/timesyncd.conf.d/cloudseed.conf",
                              "packages": [] if rhel else ["systemd-timesyncd"],
                              "service_name": "systemd-timesyncd", "kind": "timesyncd"},
    }


def _installed(ctx: ModuleContext, name: str, spec: dict[str, Any]) -> bool:
    exe = str(spec.get("check_exe") or "")
    found = ctx.root.isfile(exe) if exe.startswith("/") else ctx.root.which(exe) is not None
    if found and name in ("ntp", "ntpsec"):  # both ship /usr/sbin/ntpd: ntpsec's config is in /etc/ntpsec
        return ctx.root.isdir("/etc/ntpsec") == (name == "ntpsec")
    return found


def select_client(ctx: ModuleContext, wanted: str, table: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    if wanted in ("", "auto"):
        wanted = str((ctx.distro.system_info or {}).get("ntp_client") or "auto")
    if wanted != "auto":
        return wanted, dict(table.get(wanted, {}))
    order = list(PREFERENCE)
    if ctx.distro.family == "debian":
        order.insert(order.index("ntp"), "ntpsec")
    for name in order:
        if _installed(ctx, name, table[name]):
            return name, dict(table[name])
    return order[0], dict(table[order[0]])


def default_pools(distro_id: str) -> list[str]:
    name = {"sles": "opensuse", "alpine": "", "eurolinux": ""}.get(distro_id, distro_id)
    return [".".join(p for p in (str(n), name, "pool.ntp.org") if p) for n in range(4)]


def _netmask_form(cidr: str) -> str:
    import ipaddress

    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return cidr
    if network.version == 6:
        return f"-6 {network.network_address} mask {network.netmask}"
    return f"{network.network_address} mask {network.netmask}"


def builtin_config(kind: str, family: str, values: dict[str, list[str]]) -> str:
    """The configuration text the built-in template of ``kind`` gives for ``values``."""
    pools, servers, peers, allow = (values[k] for k in ("pools", "servers", "peers", "allow"))
    head = ["# Written by cloudseed from the ntp settings of the cloud-config."]
    if kind == "timesyncd":
        hosts = servers + pools
        return "\n".join(head + ["[Time]"] + ([f"NTP={' '.join(hosts)}"] if hosts else [])) + "\n"
    sources = [f"pool {p} iburst" for p in pools] + [f"server {s} iburst" for s in servers]
    if kind == "openntpd":
        lines = head + [f"servers {p}" for p in pools] + [f"server {s}" for s in servers] + ["sensor *"]
        return "\n".join(lines) + "\n"
    if kind == "chrony":
        lines = head + sources + [f"peer {p}" for p in peers] + [f"allow {a}" for a in allow]
        if family == "rhel":
            lines += ["driftfile /var/lib/chrony/drift", "makestep 1.0 3", "rtcsync", "logdir /var/log/chrony"]
        else:
            lines += ["keyfile /etc/chrony/chrony.keys", "driftfile /var/lib/chrony/chrony.drift",
                      "logdir /var/log/chrony", "maxupdateskew 100.0", "rtcsync", "makestep 1 3"]
        return "\n".join(lines) + "\n"
    # ntp, ntpsec, ntpdate
    if family == "rhel":
        lines = head + ["driftfile /var/lib/ntp/drift", "restrict default kod nomodify notrap nopeer noquery",
                        "restrict -6 default kod nomodify notrap nopeer noquery", "restrict 127.0.0.1",
                        "restrict -6 ::1"]
        lines += sources + [f"peer {p}" for p in peers]
        lines += [f"restrict {_netmask_form(a)} nomodify notrap nopeer" for a in allow]
        lines += ["includefile /etc/ntp/crypto/pw", "keys /etc/ntp/keys"]
        return "\n".join(lines) + "\n"
    lines = head + ["driftfile /var/lib/ntp/ntp.drift", "statistics loopstats peerstats clockstats",
                    "filegen loopstats file loopstats type day enable",
                    "filegen peerstats file peerstats type day enable",
                    "filegen clockstats file clockstats type day enable"]
    lines += sources + [f"peer {p}" for p in peers]
    lines += ["restrict -4 default kod notrap nomodify nopeer noquery limited",
              "restrict -6 default kod notrap nomodify nopeer noquery limited",
              "restrict 127.0.0.1", "restrict ::1", "restrict source notrap nomodify noquery"]
    lines += [f"restrict {_netmask_form(a)} nomodify notrap nopeer" for a in allow]
    return "\n".join(lines) + "\n"


def _host_list(ntp: dict, key: str) -> list[str]:
    value = ntp.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ModuleError(f"ntp.{key}: expected a list of host names or addresses, got {value!r}")
    return list(dict.fromkeys(v.strip() for v in value))


def render_config(ctx: ModuleContext, name: str, spec: dict[str, Any], values: dict[str, list[str]]) -> str:
    from cloudseed.agent.modules import _system_templates as system_templates

    if spec.get("template"):
        try:
            return system_templates.render(str(spec["template"]), values, "ntp.config.template")
        except system_templates.TemplateError as e:
            raise ModuleError(f"ntp.config.template: {e}") from None
    kind = spec.get("kind")
    base = {"chrony": "chrony.conf", "ntp": "ntp.conf", "openntpd": "ntpd.conf", "timesyncd": "timesyncd.conf"}
    if kind:
        names = [f"{base[kind]}.{ctx.distro.id}", f"{base[kind]}.{ctx.distro.family}", base[kind]]
        for template in dict.fromkeys(names):
            for directory in system_templates.USER_TEMPLATE_DIRS:
                inner = f"{directory}/{template}.tmpl"
                if ctx.root.isfile(inner):
                    try:
                        return system_templates.render(ctx.root.read_text(inner), values, inner)
                    except system_templates.TemplateError as e:
                        raise ModuleError(f"ntp: {e}") from None
        return builtin_config(kind, ctx.distro.family, values)
    raise ModuleError(f"ntp.config.template: client {name!r} has no built-in template; give one")


def handle(ctx: ModuleContext) -> None:
    if "ntp" not in ctx.cfg:
        ctx.log.info("no ntp settings")
        return
    ntp = ctx.cfg.get("ntp")
    ntp = {} if ntp is None else ntp
    if not isinstance(ntp, dict):
        raise ModuleError(f"ntp: expected a mapping, got {type(ntp).__name__}")
    from cloudseed.core.values import as_bool

    if not as_bool(ntp.get("enabled", True), True):
        ctx.log.info("ntp.enabled is false: time synchronisation left alone")
        return
    overrides = ntp.get("config") or {}
    if not isinstance(overrides, dict):
        raise ModuleError(f"ntp.config: expected a mapping, got {type(overrides).__name__}")
    wanted = ntp.get("ntp_client") or "auto"
    if not isinstance(wanted, str):
        raise ModuleError(f"ntp.ntp_client: expected a client name, got {wanted!r}")
    table = client_table(ctx.distro.family)
    name, spec = select_client(ctx, wanted, table)
    spec.update(overrides)
    if overrides.get("template"):
        spec.pop("kind", None)
    missing = [k for k in ("confpath", "check_exe", "packages", "service_name") if not spec.get(k)
               and not (k == "packages" and "packages" in spec)]
    if missing:
        known = ", ".join(sorted(table))
        raise ModuleError(f"ntp.ntp_client: {name!r} is not a known client ({known}); describe it with "
                          f"ntp.config (missing: {', '.join(missing)})")
    for key in ("confpath", "check_exe", "service_name"):
        if not isinstance(spec[key], str):
            raise ModuleError(f"ntp.config.{key}: expected a string, got {spec[key]!r}")
    if not isinstance(spec["packages"], list):
        raise ModuleError(f"ntp.config.packages: expected a list of package names, got {spec['packages']!r}")
    values = {key: _host_list(ntp, key) for key in ("pools", "servers", "peers", "allow")}
    if not values["pools"] and not values["servers"]:
        values["pools"] = default_pools(ctx.distro.id)
    if spec.get("kind") in ("timesyncd", "openntpd") and (values["peers"] or values["allow"]):
        ctx.warn(f"ntp: peers and allow do not apply to {name} (it only synchronises this host); ignored")
    text = render_config(ctx, name, spec, values)
    confpath = spec["confpath"]
    if not confpath.startswith("/"):
        raise ModuleError(f"ntp.config.confpath: expected an absolute path, got {confpath!r}")
    current = ctx.root.read_text(confpath, default=None) if ctx.root.isfile(confpath) else None
    if current is not None and current != text and not ctx.root.exists(f"{confpath}.dist"):
        ctx.root.write(f"{confpath}.dist", current, mode=0o644, keep_mode=False)
    ctx.root.write(confpath, text, mode=0o644)
    ctx.log.info("ntp: %s configured in %s", name, confpath)
    if not _installed(ctx, name, spec):
        install_client(ctx, name, spec)
    restart(ctx, spec["service_name"])


def install_client(ctx: ModuleContext, name: str, spec: dict[str, Any]) -> None:
    """Install the client's packages with the distro's package manager (the configuration is written)."""
    from cloudseed.agent.package_managers import for_distro
    from cloudseed.agent.package_managers.base import PackageError

    packages = [str(p) for p in spec["packages"]]
    missing = f"ntp: {name} is not installed ({spec['check_exe']} not found)"
    if not packages:
        raise ModuleError(f"{missing} and ntp.config.packages names no package for it")
    manager = for_distro(ctx)
    if manager is None:
        raise ModuleError(f"{missing} and this distro declares no package manager; install {' '.join(packages)}")
    try:
        manager.update()
        manager.install([(package, None) for package in packages])
    except PackageError as e:
        raise ModuleError(f"{missing}; installing {' '.join(packages)}: {e}") from None
    if not _installed(ctx, name, spec):
        raise ModuleError(f"{missing} after installing {' '.join(packages)} (ntp.config.check_exe?)")
    ctx.log.info("ntp: installed %s", " ".join(packages))


def restart(ctx: ModuleContext, service: str) -> None:
    from cloudseed.core.root import CommandError

    argv = ["systemctl", "reload-or-restart", service]
    if not ctx.root.is_live or not ctx.root.exists("/run/systemd/system"):
        ctx.log.info("not a running systemd system: not running %s", " ".join(argv))
        return
    try:
        ctx.root.run(argv)
    except CommandError as e:
        raise ModuleError(f"ntp: the configuration is written but {' '.join(argv)} failed: {e}") from None
    ctx.log.info("ran %s", " ".join(argv))
