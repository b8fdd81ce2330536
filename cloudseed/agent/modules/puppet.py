"""puppet: install the Puppet agent, write puppet.conf and csr_attributes.yaml, run and start it.

Install (``install``, default true): ``install_type: packages`` (default) installs
``package_name`` (default ``puppet``; ``version`` pins it) through the distro's package manager
when puppet is missing or a version is asked; ``install_type: aio`` fetches Puppet's install
script (``aio_install_url``) through ``cloudseed.core.http`` (bounded time and size) and runs it
with ``-v VERSION``, ``-c COLLECTION`` and ``--cleanup`` (``cleanup``, default true); the AIO
agent lives in ``/opt/puppetlabs``. The file paths (``conf_file``, ``ssl_dir``,
``csr_attributes_path``) default to what ``puppet config print`` reports, else to the layout of
the install type. ``conf``: each section (main, server, agent, user) is merged into puppet.conf
(the previous file kept as ``.old``); ``certname`` expands ``%i`` (instance id) and ``%f``
(fqdn) and is lowercased; booleans are written ``true``/``false`` (puppet refuses ``True``);
``ca_cert`` is written to ``<ssl_dir>/certs/ca.pem`` (the ssl dir 0771, owned by the puppet
user). ``csr_attributes`` is written as YAML, 0600 (it may hold a challenge password).
``start_service`` (default true) enables the service and starts it where systemd runs; ``exec``
runs ``puppet agent`` once with ``exec_args`` (default ``--test``), bounded in time; with
``--test`` an exit status of 2 means "changes applied", not a failure.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import (
    checked,
    enable_service,
    fetch_script,
    install_packages,
    require_absolute,
    run_script,
    systemd_running,
)
from cloudseed.core.root import CommandError

KEY = "puppet"
AIO_INSTALL_URL = "https://raw.githubusercontent.com/puppetlabs/install-puppet/main/install.sh"
AGENT_SECONDS = 1800.0
LAYOUTS = {  # install type -> (puppet binary, package, owner of the ssl dir, conf, ssl dir, csr attributes)
    "packages": ("puppet", "puppet", "puppet", "/etc/puppet/puppet.conf", "/var/lib/puppet/ssl",
                 "/etc/puppet/csr_attributes.yaml"),
    "aio": ("/opt/puppetlabs/bin/puppet", "puppet-agent", "root", "/etc/puppetlabs/puppet/puppet.conf",
            "/etc/puppetlabs/puppet/ssl", "/etc/puppetlabs/puppet/csr_attributes.yaml"),
}
_SECTION = {"type": "object", "patternProperties": {"^.+$": {"type": ["string", "number", "boolean"]}}}

MODULE = ModuleSpec(
    name=KEY, stage=STAGE_FINAL, activate_by=(KEY,),
    title="Install, configure and start the Puppet agent",
    schema={"properties": {KEY: {
        "type": "object",
        "additionalProperties": False,
        "description": "Install the Puppet agent, configure it, and run or start it.",
        "properties": {
            "install": {"type": "boolean", "default": True,
                        "description": "Install puppet (when false, puppet must already be there). Default: true."},
            "version": {"type": "string", "description": "Version to install (package version, or the AIO "
                                                         "script's ``-v``). Default: the latest."},
            "install_type": {"type": "string", "enum": ["packages", "aio"], "default": "packages",
                             "description": "``packages`` (the distro's) or ``aio`` (Puppet's all-in-one agent "
                                            "from its own repositories). Default: packages."},
            "collection": {"type": "string", "description": "AIO only: the release stream (``puppet``, "
                                                            "``puppet7``, ``puppet8``, nightlies)."},
            "aio_install_url": {"type": "string", "description": "AIO only: URL of the install script."},
            "cleanup": {"type": "boolean", "default": True,
                        "description": "AIO only: remove the puppetlabs repository after installing. Default: true."},
            "conf_file": {"type": "string", "description": "Path of puppet.conf. Default: from puppet, "
                                                           "by install type."},
            "ssl_dir": {"type": "string", "description": "Puppet's SSL directory. Default: from puppet, "
                                                         "by install type."},
            "csr_attributes_path": {"type": "string", "description": "Path of csr_attributes.yaml. Default: "
                                                                     "from puppet, by install type."},
            "package_name": {"type": "string", "description": "Package to install with ``install_type: "
                                                              "packages``. Default: ``puppet``."},
            "exec": {"type": "boolean", "default": False,
                     "description": "Run ``puppet agent`` once after configuring. Default: false."},
            "exec_args": {"type": "array", "items": {"type": "string"},
                          "description": "Arguments of that run. Default: ``[--test]``."},
            "start_service": {"type": "boolean", "default": True,
                              "description": "Enable the puppet service (and start it). Default: true."},
            "conf": {
                "type": "object", "additionalProperties": False,
                "description": "puppet.conf sections (``main``, ``server``, ``agent``, ``user``), each a mapping "
                               "of settings; ``certname`` expands ``%i`` and ``%f``. ``ca_cert``: the "
                               "server's CA certificate (PEM), written to ``<ssl_dir>/certs/ca.pem``.",
                "properties": {"main": _SECTION, "server": _SECTION, "agent": _SECTION, "user": _SECTION,
                               "ca_cert": {"type": "string"}},
            },
            "csr_attributes": {
                "type": "object", "additionalProperties": False,
                "description": "Written as csr_attributes.yaml: attributes and extension requests of the "
                               "agent's certificate signing request.",
                "properties": {"custom_attributes": {"type": "object"}, "extension_requests": {"type": "object"}},
            },
        },
    }}},
    examples=(
        """\
#cloud-config
puppet:
  install: true
  install_type: packages
  package_name: puppet-agent
  conf:
    agent:
      server: puppetserver.example.org
      certname: "%i.%f"
      runinterval: 30m
  start_service: true
""",
        """\
#cloud-config
puppet:
  install_type: aio
  collection: puppet8
  cleanup: true
  exec: true
  exec_args: ['--test', '--waitforcert', '60']
  csr_attributes:
    custom_attributes:
      1.2.840.113549.1.9.7: a-one-time-challenge-password
    extension_requests:
      pp_uuid: 6f1c2a9e-3b7d-4e52-9a0c-d81f4b27e3a6
      pp_image_name: web-frontend-2026
""",
    ),
)


def conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if "\n" in text:
        raise ValueError("a puppet.conf value must be one line")
    return text


def merge_conf(existing: str, sections: dict[str, dict[str, str]]) -> str:
    """puppet.conf text with ``sections``' settings set (in place, else at the end of their section)."""
    import re

    header = re.compile(r"^\s*\[([^\]]+)\]\s*$")
    setting = re.compile(r"^\s*([^#;=\s][^=]*?)\s*=")
    lines: list[str] = []
    current = ""
    done: set[tuple[str, str]] = set()

    def flush(name: str) -> None:
        for key, value in sections.get(name, {}).items():
            if (name, key) not in done:
                lines.append(f"{key} = {value}")
                done.add((name, key))

    for raw in existing.splitlines():
        line = raw.lstrip()
        found = header.match(line)
        if found:
            flush(current)
            current = found.group(1).strip()
            lines.append(line)
            continue
        match = setting.match(line)
        if match and match.group(1) in sections.get(current, {}):
            key = match.group(1)
            if (current, key) not in done:
                lines.append(f"{key} = {sections[current][key]}")
                done.add((current, key))
            continue
        lines.append(line)
    flush(current)
    seen = {header.match(line).group(1).strip() for line in lines if header.match(line)}
    for name, settings in sections.items():
        if name not in seen and settings:
            if lines and lines[-1].strip():
                lines.append("")
            lines.append(f"[{name}]")
            flush(name)
    return "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    cfg = checked(ctx, KEY, MODULE.schema)
    install_type = cfg.get("install_type", "packages")
    binary, default_package, ssl_owner, *default_paths = LAYOUTS[install_type]
    for name in ("conf_file", "ssl_dir", "csr_attributes_path", "aio_install_url"):
        if name in cfg and name != "aio_install_url":
            require_absolute(f"{KEY}.{name}", cfg[name])
    sections = _sections(ctx, cfg.get("conf") or {})

    _install(ctx, cfg, install_type, binary, default_package)
    conf_file, ssl_dir, csr_path = _paths(ctx, cfg, binary, default_paths)
    conf = cfg.get("conf") or {}
    if "ca_cert" in conf:
        owner = ssl_owner if ctx.root.user_entry(ssl_owner) else "root"
        ctx.root.makedirs(ssl_dir, mode=0o771, owner=owner, group="root")
        ctx.root.makedirs(f"{ssl_dir}/certs", mode=0o755, owner=owner, group="root")
        ctx.root.write(f"{ssl_dir}/certs/ca.pem", conf["ca_cert"], mode=0o644, owner=owner, group="root")
        ctx.log.info("puppet: CA certificate written to %s/certs/ca.pem", ssl_dir)
    if sections:
        existing = ctx.root.read_text(conf_file) if ctx.root.isfile(conf_file) else None
        if existing is not None:
            ctx.root.write(f"{conf_file}.old", existing, mode=0o644)
        ctx.root.write(conf_file, merge_conf(existing or "", sections), mode=0o644, keep_mode=existing is not None)
        ctx.log.info("puppet: %s written (sections %s)", conf_file, ", ".join(sections))
    if "csr_attributes" in cfg:
        import yaml

        ctx.root.write(csr_path, yaml.safe_dump(cfg["csr_attributes"], default_flow_style=False), mode=0o600)
        ctx.log.info("puppet: %s written", csr_path)
    start = cfg.get("start_service", True)
    if start:
        _autostart(ctx)
    if cfg.get("exec", False):
        _run_agent(ctx, binary, cfg.get("exec_args", ["--test"]))
    if start and systemd_running(ctx):
        try:
            ctx.root.run(["systemctl", "start", "puppet"], timeout=90)
        except CommandError as e:
            raise ModuleError(f"puppet.start_service: starting puppet failed ({e.returncode}; "
                              "see journalctl -u puppet)") from None


def _sections(ctx: ModuleContext, conf: dict) -> dict[str, dict[str, str]]:
    """The puppet.conf settings to set, by section, rendered (and checked) before anything is done."""
    out: dict[str, dict[str, str]] = {}
    for name, settings in conf.items():
        if name == "ca_cert":
            continue
        rendered = {}
        for key, value in settings.items():
            try:
                text = conf_value(value)
            except ValueError as e:
                raise ModuleError(f"puppet.conf.{name}.{key}: {e}") from None
            if key == "certname":
                text = text.replace("%f", _fqdn(ctx)).replace("%i", ctx.instance_id).lower()
            rendered[str(key)] = text
        out[name] = rendered
    return out


def _fqdn(ctx: ModuleContext) -> str:
    import socket

    hostname = ctx.cfg.get("fqdn") or ""
    if isinstance(hostname, str) and hostname:
        return hostname
    return socket.getfqdn() if ctx.root.is_live else (ctx.root.read_text("/etc/hostname", default="").strip()
                                                      or socket.getfqdn())


def _install(ctx: ModuleContext, cfg: dict, install_type: str, binary: str, default_package: str) -> None:
    present = ctx.root.isfile(binary) if binary.startswith("/") else ctx.root.which(binary) is not None
    version = cfg.get("version")
    if not cfg.get("install", True):
        if version:
            ctx.warn("puppet.version is ignored: puppet.install is false")
        if not present:
            raise ModuleError(f"puppet.install is false but puppet is not installed ({binary} not found); "
                              f"install {default_package} in the image or set puppet.install: true")
        return
    if install_type == "aio":
        if present and not version:
            return
        args = (["-v", version] if version else []) + (["-c", cfg["collection"]] if cfg.get("collection") else [])
        args += ["--cleanup"] if cfg.get("cleanup", True) else []
        script = fetch_script("puppet.aio_install_url", cfg.get("aio_install_url") or AIO_INSTALL_URL)
        run_script(ctx, "puppet.install_type aio", script, "puppet-install", args)
        return
    if present and not version:
        return
    install_packages(ctx, KEY, [(cfg.get("package_name") or default_package, version)])


def _paths(ctx: ModuleContext, cfg: dict, binary: str, defaults: list[str]) -> tuple[str, str, str]:
    """conf_file, ssl_dir, csr_attributes_path: given, else what puppet says, else the layout's."""
    names = ("conf_file", "ssl_dir", "csr_attributes_path")
    settings = {"conf_file": "config", "ssl_dir": "ssldir", "csr_attributes_path": "csr_attributes"}
    found = dict(zip(names, defaults))
    wanted = [n for n in names if not cfg.get(n)]
    if wanted:
        try:
            out = ctx.root.run([binary, "config", "print", *(settings[n] for n in wanted)], timeout=120).stdout
            printed = dict(line.split(" = ", 1) for line in out.splitlines() if " = " in line)
            if len(wanted) == 1 and out.strip() and " = " not in out:
                printed = {settings[wanted[0]]: out.strip()}
            for name in wanted:
                value = printed.get(settings[name], "").strip()
                if value.startswith("/"):
                    found[name] = value
        except CommandError as e:
            ctx.log.info("puppet config print failed (%s); using the default paths", e.returncode)
    for name in names:
        if cfg.get(name):
            found[name] = cfg[name]
    return found["conf_file"], found["ssl_dir"], found["csr_attributes_path"]


def _autostart(ctx: ModuleContext) -> None:
    if ctx.root.isfile("/etc/default/puppet") and "START=" in ctx.root.read_text("/etc/default/puppet"):
        import re

        text = ctx.root.read_text("/etc/default/puppet")
        ctx.root.write("/etc/default/puppet", re.sub(r"(?m)^START=.*$", "START=yes", text), keep_mode=True)
        return
    if ctx.root.which("systemctl"):
        enable_service(ctx, "puppet.start_service", "puppet.service")
    elif ctx.root.isfile("/sbin/chkconfig"):
        try:
            ctx.root.run(["/sbin/chkconfig", "puppet", "on"], timeout=60)
        except CommandError as e:
            raise ModuleError(f"puppet.start_service: chkconfig puppet on failed ({e.returncode})") from None
    else:
        raise ModuleError("puppet.start_service: no systemctl or chkconfig on the target to enable puppet with")


def _run_agent(ctx: ModuleContext, binary: str, args: list[str]) -> None:
    detailed = "--test" in args or "-t" in args or "--detailed-exitcodes" in args
    try:
        proc = ctx.root.run([binary, "agent", *args], timeout=AGENT_SECONDS, check=False)
    except CommandError as e:
        raise ModuleError(f"puppet.exec: puppet agent could not run: {e.stderr.strip() or e.returncode}") from None
    if proc.returncode == 0 or (detailed and proc.returncode == 2):
        ctx.log.info("puppet agent finished (%s)", "changes applied" if proc.returncode == 2 else "no changes")
        return
    raise ModuleError(f"puppet.exec: puppet agent {' '.join(args)} exited {proc.returncode}")
