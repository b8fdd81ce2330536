"""salt_minion: install, configure and start the Salt minion (``salt_minion: {conf, grains, keys}``).

The package (``pkg_name``, default ``salt-minion``) is installed through the distro's package
manager first; Salt is not in Debian 12's archive, so on Debian its repository must be added
(``apt.sources``) for that to work, and the error says so. Then ``conf`` is written as YAML to
``<config_dir>/minion`` and ``grains`` to ``<config_dir>/grains`` (``config_dir`` default
``/etc/salt``). ``public_key`` and ``private_key`` (both, or neither) become ``minion.pub``
(0644) and ``minion.pem`` (0600) in ``pki_dir`` (default ``<config_dir>/pki/minion`` when that
directory exists, ``<config_dir>/pki`` otherwise; created 0700); key material is never logged.
The service (``service_name``) is enabled and, where systemd runs, restarted so it reads the new
configuration. Everything is checked before anything is written.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import (
    checked,
    enable_service,
    install_packages,
    require_absolute,
    restart_service,
)

KEY = "salt_minion"
DEFAULT_PACKAGE = "salt-minion"
DEFAULT_SERVICE = "salt-minion"
DEFAULT_CONFIG_DIR = "/etc/salt"

MODULE = ModuleSpec(
    name=KEY, stage=STAGE_FINAL, activate_by=(KEY,),
    title="Install, configure and start the Salt minion",
    schema={"properties": {KEY: {
        "type": "object",
        "additionalProperties": False,
        "description": "Install the Salt minion, write its configuration, grains and keys, and start it.",
        "properties": {
            "pkg_name": {"type": "string", "description": "Package to install. Default: ``salt-minion``."},
            "service_name": {"type": "string", "description": "Service to enable and restart. "
                                                              "Default: ``salt-minion``."},
            "config_dir": {"type": "string", "description": "Directory of the minion's configuration. "
                                                            "Default: ``/etc/salt``."},
            "conf": {"type": "object", "description": "Minion settings, written as YAML to ``<config_dir>/minion`` "
                                                      "(``master``, ``id``, ...)."},
            "grains": {"type": "object", "description": "Static grains, written as YAML to "
                                                        "``<config_dir>/grains``."},
            "public_key": {"type": "string", "description": "The minion's public key (``minion.pub``, 0644); "
                                                            "needs ``private_key``."},
            "private_key": {"type": "string", "description": "The minion's private key (``minion.pem``, 0600); "
                                                             "needs ``public_key``."},
            "pki_dir": {"type": "string", "description": "Where the keys go. Default: ``<config_dir>/pki/minion`` "
                                                         "if it exists, else ``<config_dir>/pki``."},
        },
    }}},
    examples=(
        """\
#cloud-config
salt_minion:
  conf:
    master: salt.example.com
    id: web-01
  grains:
    role:
      - web
""",
        """\
#cloud-config
salt_minion:
  pkg_name: salt-minion
  service_name: salt-minion
  config_dir: /etc/salt
  conf:
    master: salt.example.com
  public_key: |
    -----BEGIN PUBLIC KEY-----
    MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAexample
    -----END PUBLIC KEY-----
  private_key: |
    -----BEGIN RSA PRIVATE KEY-----
    MIIEowIBAAKCAQEAexample
    -----END RSA PRIVATE KEY-----
  pki_dir: /etc/salt/pki/minion
""",
    ),
)


def dump_yaml(value: dict) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=False, sort_keys=False)


def handle(ctx: ModuleContext) -> None:
    cfg = checked(ctx, KEY, MODULE.schema)
    package = cfg.get("pkg_name") or DEFAULT_PACKAGE
    service = cfg.get("service_name") or DEFAULT_SERVICE
    config_dir = require_absolute(f"{KEY}.config_dir", cfg.get("config_dir") or DEFAULT_CONFIG_DIR).rstrip("/")
    keys = [k for k in ("public_key", "private_key") if k in cfg]
    if len(keys) == 1:
        missing = "private_key" if keys == ["public_key"] else "public_key"
        raise ModuleError(f"{KEY}.{keys[0]}: given without {KEY}.{missing}; the minion needs both keys")
    if "pki_dir" in cfg:
        require_absolute(f"{KEY}.pki_dir", cfg["pki_dir"])
    # rendered before anything is installed or written: a value YAML cannot represent fails here
    files = {}
    for name in ("conf", "grains"):
        if name in cfg:
            try:
                files[f"{config_dir}/{'minion' if name == 'conf' else 'grains'}"] = dump_yaml(cfg[name])
            except Exception as e:  # a !!python tag cannot come from safe_load, but be explicit
                raise ModuleError(f"{KEY}.{name}: cannot be written as YAML ({type(e).__name__})") from None

    install_packages(ctx, KEY, [(package, None)],
                     hint="Salt is not in Debian's archive: add the Salt project's repository with apt.sources")
    ctx.root.makedirs(config_dir)
    for path, text in files.items():
        ctx.root.write(path, text, mode=0o644, owner="root", group="root")
        ctx.log.info("%s: wrote %s", KEY, path)
    if keys:
        pki_dir = cfg.get("pki_dir") or (f"{config_dir}/pki/minion" if ctx.root.isdir(f"{config_dir}/pki/minion")
                                         else f"{config_dir}/pki")
        ctx.root.makedirs(pki_dir, mode=0o700)
        ctx.root.write(f"{pki_dir}/minion.pem", cfg["private_key"], mode=0o600, owner="root", group="root")
        ctx.root.write(f"{pki_dir}/minion.pub", cfg["public_key"], mode=0o644, owner="root", group="root")
        ctx.log.info("%s: key pair written to %s", KEY, pki_dir)
    enable_service(ctx, KEY, service)
    restart_service(ctx, KEY, service)
