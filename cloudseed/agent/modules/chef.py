"""chef: write Chef Infra Client's client.rb, validation key and first-boot JSON; install and run it.

``server_url`` and ``validation_name`` are required (client.rb is useless without them). The
``directories`` (default /etc/chef, /var/log/chef, /var/lib/chef, /var/cache/chef,
/var/backups/chef, /var/run/chef) are created. ``validation_cert`` (the key's PEM text) is
written 0600 to ``validation_key`` (default /etc/chef/validation.pem); the value ``system``
keeps the key already in the image. ``/etc/chef/client.rb`` gets one line per setting that has a
value: ``chef_license``, ``log_level`` and ``ssl_verify_mode`` (Ruby symbols, unquoted),
``log_location``, ``validation_client_name``, ``validation_key`` (when a validation key is
given), ``client_key``, ``chef_server_url``, ``environment`` (default ``_default``),
``node_name`` (default: the instance id), ``json_attribs``, ``file_cache_path``,
``file_backup_path``, ``pid_file``, ``http_proxy``/``https_proxy``/``no_proxy``,
``encrypted_data_bag_secret`` (a path), and the log time stamp (``show_time``). ``run_list`` and
``initial_attributes`` are written as JSON to ``firstboot_path`` (0600). When
``/usr/bin/chef-client`` is missing (or ``force_install``), Chef is installed by
``install_type``: ``packages`` (package ``chef``; not in Debian's archive), ``gems`` (Ruby from
the distro, then ``gem install chef``; runs by default) or ``omnibus`` (the script at
``omnibus_url``, fetched through ``cloudseed.core.http`` with a deadline and a size limit, run
with ``-v omnibus_version``). ``exec`` runs ``chef-client`` (``exec_arguments``, default as a
daemon: ``-d -i 1800 -s 20``), bounded in time; ``delete_validation_post_exec`` then removes the
validation key. Like cloud-init this module runs at every boot (client.rb stays current and the
daemon is started again); the key contents are never logged.
"""

from __future__ import annotations

import json

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import (
    checked,
    fetch_script,
    install_packages,
    require_absolute,
    run_script,
)
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.root import CommandError

KEY = "chef"
CLIENT_RB = "/etc/chef/client.rb"
CHEF_CLIENT = "/usr/bin/chef-client"
OMNIBUS_URL = "https://www.chef.io/chef/install.sh"
DIRECTORIES = ("/etc/chef", "/var/log/chef", "/var/lib/chef", "/var/cache/chef", "/var/backups/chef",
               "/var/run/chef")
DAEMON_ARGS = ("-d", "-i", "1800", "-s", "20")
RUN_SECONDS = 1800.0
DEFAULTS = {
    "ssl_verify_mode": ":verify_none", "log_level": ":info", "log_location": "/var/log/chef/client.log",
    "validation_key": "/etc/chef/validation.pem", "client_key": "/etc/chef/client.pem",
    "json_attribs": "/etc/chef/firstboot.json", "file_cache_path": "/var/cache/chef",
    "file_backup_path": "/var/backups/chef", "pid_file": "/var/run/chef/client.pid",
    "environment": "_default", "firstboot_path": "/etc/chef/firstboot.json",
}
# client.rb line order: (client.rb setting, chef key, quoted)
CLIENT_RB_LINES = (
    ("chef_license", "chef_license", True), ("log_level", "log_level", False),
    ("ssl_verify_mode", "ssl_verify_mode", False), ("log_location", "log_location", True),
    ("validation_client_name", "validation_name", True), ("validation_key", "validation_key", True),
    ("client_key", "client_key", True), ("chef_server_url", "server_url", True),
    ("environment", "environment", True), ("node_name", "node_name", True),
    ("json_attribs", "json_attribs", True), ("file_cache_path", "file_cache_path", True),
    ("file_backup_path", "file_backup_path", True), ("pid_file", "pid_file", True),
    ("http_proxy", "http_proxy", True), ("https_proxy", "https_proxy", True), ("no_proxy", "no_proxy", True),
    ("encrypted_data_bag_secret", "encrypted_data_bag_secret", True),
)
PATH_KEYS = ("log_location", "validation_key", "client_key", "file_cache_path", "json_attribs", "pid_file",
             "encrypted_data_bag_secret", "file_backup_path")


def _text(description: str, default: str | None = None) -> dict:
    out = {"type": "string", "description": description}
    if default is not None:
        out["default"] = default
    return out


MODULE = ModuleSpec(
    name=KEY, stage=STAGE_FINAL, frequency=PER_BOOT, activate_by=(KEY,),
    title="Configure, install and run Chef Infra Client",
    schema={"properties": {KEY: {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "description": "Write client.rb, the validation key and the first-boot JSON; install and run chef-client.",
        "properties": {
            "directories": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True,
                            "description": "Directories to create (default: /etc/chef, /var/log/chef, "
                                           "/var/lib/chef, /var/cache/chef, /var/backups/chef, /var/run/chef)."},
            "validation_cert": _text("The validation key (PEM), written 0600 to ``validation_key``; ``system`` "
                                     "keeps the file already there."),
            "validation_key": _text("Path of the validation key.", DEFAULTS["validation_key"]),
            "firstboot_path": _text("Where ``run_list`` and ``initial_attributes`` are written as JSON.",
                                    DEFAULTS["firstboot_path"]),
            "exec": {"type": "boolean", "default": False,
                     "description": "Run chef-client after configuring (default false; true for gem installs)."},
            "exec_arguments": {"type": ["array", "string"], "items": {"type": "string"},
                               "description": "Arguments of that run. Default: ``-d -i 1800 -s 20`` (a daemon)."},
            "delete_validation_post_exec": {"type": "boolean", "default": False,
                                            "description": "Remove the validation key after chef-client ran."},
            "client_key": _text("Path of the client key.", DEFAULTS["client_key"]),
            "encrypted_data_bag_secret": _text("Path of the secret that decrypts encrypted data bags."),
            "environment": _text("The Chef environment.", DEFAULTS["environment"]),
            "file_backup_path": _text("Where backups of changed files go.", DEFAULTS["file_backup_path"]),
            "file_cache_path": _text("Chef's cache directory.", DEFAULTS["file_cache_path"]),
            "json_attribs": _text("The JSON attributes file chef-client reads.", DEFAULTS["json_attribs"]),
            "log_level": _text("Log level (a Ruby symbol).", DEFAULTS["log_level"]),
            "log_location": _text("Log file.", DEFAULTS["log_location"]),
            "node_name": _text("The node's name. Default: the instance id."),
            "omnibus_url": _text("URL of the omnibus install script.", OMNIBUS_URL),
            "omnibus_url_retries": {"type": "integer", "default": 5, "minimum": 0,
                                    "description": "Attempts to fetch the omnibus script."},
            "omnibus_version": _text("Version the omnibus installer installs (``-v``)."),
            "pid_file": _text("chef-client's pid file.", DEFAULTS["pid_file"]),
            "server_url": _text("URL of the Chef server (required)."),
            "show_time": {"type": "boolean", "default": True, "description": "Time stamps in Chef's log."},
            "ssl_verify_mode": _text("``:verify_none`` or ``:verify_peer``.", DEFAULTS["ssl_verify_mode"]),
            "validation_name": _text("Name of the validator client (required)."),
            "force_install": {"type": "boolean", "default": False,
                              "description": "Install chef even when chef-client is there."},
            "initial_attributes": {"type": "object", "description": "Attributes for the first-boot JSON."},
            "install_type": {"type": "string", "enum": ["packages", "gems", "omnibus"], "default": "packages",
                             "description": "How chef is installed when missing."},
            "run_list": {"type": "array", "items": {"type": "string"}, "description": "The first-boot run list."},
            "chef_license": _text("Accept Chef's license (``accept``, ``accept-silent``, ``accept-no-persist``)."),
            "http_proxy": _text("Proxy for HTTP (client.rb ``http_proxy``); a cloudseed addition."),
            "https_proxy": _text("Proxy for HTTPS (client.rb ``https_proxy``); a cloudseed addition."),
            "no_proxy": _text("Hosts reached without the proxy (client.rb ``no_proxy``); a cloudseed addition."),
            "version": _text("With ``install_type: gems``: the chef gem version."),
            "ruby_version": _text("With ``install_type: gems``: accepted for compatibility; the distro's Ruby "
                                  "is used."),
        },
    }}},
    examples=(
        """\
#cloud-config
chef:
  install_type: omnibus
  omnibus_url: https://omnitruck.chef.io/install.sh
  omnibus_version: "18.3.0"
  omnibus_url_retries: 2
  server_url: https://chef.example.com/organizations/example
  validation_name: example-validator
  validation_cert: |
    -----BEGIN RSA PRIVATE KEY-----
    MIIEexample
    -----END RSA PRIVATE KEY-----
  node_name: web-01
  environment: production
  run_list:
    - recipe[apache2]
    - role[db]
  initial_attributes:
    apache:
      keepalive: false
  chef_license: accept
  exec: true
  delete_validation_post_exec: true
""",
    ),
)


def client_rb(cfg: dict, instance_id: str) -> str:
    """client.rb text for ``cfg`` (one line per setting that has a value)."""
    values = dict(DEFAULTS)
    values.update({k: v for k, v in cfg.items() if not isinstance(v, (dict, list))})
    values.setdefault("node_name", instance_id)
    if not cfg.get("node_name"):
        values["node_name"] = instance_id
    if not cfg.get("validation_cert"):
        values.pop("validation_key", None)  # no key given: chef-client registers with its own
    lines = ["# Written by cloudseed (chef module); rewritten at every boot"]
    for setting, key, quoted in CLIENT_RB_LINES:
        value = values.get(key)
        if value in (None, ""):
            continue
        text = str(value)
        if quoted:
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        lines.append(f"{setting:<22} {text}" if len(setting) < 23 else f"{setting} {text}")
    if cfg.get("show_time", True):
        lines.append("Chef::Log::Formatter.show_time = true")
    return "\n".join(lines) + "\n"


def firstboot(cfg: dict) -> dict:
    out: dict = {}
    if "run_list" in cfg:
        out["run_list"] = cfg["run_list"]
    out.update(cfg.get("initial_attributes") or {})
    return out


def handle(ctx: ModuleContext) -> None:
    cfg = checked(ctx, KEY, MODULE.schema)
    for required in ("server_url", "validation_name"):
        if not cfg.get(required):
            raise ModuleError(f"chef.{required}: required (client.rb cannot reach a Chef server without it)")
    for name in (*PATH_KEYS, "firstboot_path"):
        if cfg.get(name):
            require_absolute(f"chef.{name}", cfg[name])
    for index, directory in enumerate(cfg.get("directories") or []):
        require_absolute(f"chef.directories[{index}]", directory)
    for name in ("chef_license", "log_level", "ssl_verify_mode", "node_name", "environment", "server_url",
                 "validation_name", "http_proxy", "https_proxy", "no_proxy"):
        if "\n" in str(cfg.get(name, "")):
            raise ModuleError(f"chef.{name}: must be one line")
    for name in ("log_level", "ssl_verify_mode"):
        if name in cfg and not str(cfg[name]).startswith(":"):
            raise ModuleError(f"chef.{name}: expected a Ruby symbol such as {DEFAULTS[name]}")
    text = client_rb(cfg, ctx.instance_id)
    first = json.dumps(firstboot(cfg), sort_keys=True)

    for directory in list(cfg.get("directories") or DIRECTORIES) + ["/etc/chef"]:
        ctx.root.makedirs(directory)
    key_path = cfg.get("validation_key") or DEFAULTS["validation_key"]
    cert = cfg.get("validation_cert")
    if cert and cert != "system":
        ctx.root.write(key_path, cert, mode=0o600, owner="root", group="root")
        ctx.log.info("chef: validation key written to %s", key_path)
    elif cert == "system" and not ctx.root.isfile(key_path):
        ctx.warn(f"chef.validation_cert is 'system' but {key_path} does not exist")
    for name in PATH_KEYS:
        value = cfg.get(name, DEFAULTS.get(name))
        if value:
            ctx.root.makedirs(value.rsplit("/", 1)[0] or "/")
    ctx.root.write(CLIENT_RB, text, mode=0o644, owner="root", group="root")
    fb_path = cfg.get("firstboot_path", DEFAULTS["firstboot_path"])
    if fb_path:
        ctx.root.write(fb_path, first + "\n", mode=0o600, owner="root", group="root")

    installed = ctx.root.isfile(CHEF_CLIENT)
    run = bool(cfg.get("exec", False))
    if not installed or cfg.get("force_install", False):
        run = _install(ctx, cfg)
    if run:
        _run(ctx, cfg)
        if cfg.get("delete_validation_post_exec", False) and ctx.root.remove(key_path):
            ctx.log.info("chef: validation key %s removed after the run", key_path)


def _install(ctx: ModuleContext, cfg: dict) -> bool:
    """Install chef by ``install_type``; whether chef-client should then run."""
    install_type = cfg.get("install_type", "packages")
    if install_type == "packages":
        install_packages(ctx, KEY, [("chef", None)],
                         hint="chef is not in Debian's archive: use chef.install_type omnibus")
    elif install_type == "omnibus":
        retries = cfg.get("omnibus_url_retries", 5)
        script = fetch_script("chef.omnibus_url", cfg.get("omnibus_url") or OMNIBUS_URL, attempts=retries + 1)
        version = cfg.get("omnibus_version")
        run_script(ctx, "chef.install_type omnibus", script, "chef-omnibus-install",
                   ["-v", version] if version else [])
    else:  # gems
        install_packages(ctx, KEY, [("ruby", None), ("ruby-dev", None)])
        argv = ["gem", "install", "chef", "--bindir", "/usr/bin", "--no-document", "-q"]
        if cfg.get("version"):
            argv[3:3] = ["-v", cfg["version"]]
        try:
            ctx.root.run(argv, timeout=RUN_SECONDS)
        except CommandError as e:
            raise ModuleError(f"chef.install_type gems: gem install chef failed ({e.returncode})") from None
        return bool(cfg.get("exec", True))
    if not ctx.root.isfile(CHEF_CLIENT):
        raise ModuleError(f"chef.install_type {install_type}: the install finished but {CHEF_CLIENT} is missing")
    return bool(cfg.get("exec", False))


def _run(ctx: ModuleContext, cfg: dict) -> None:
    args = cfg.get("exec_arguments", list(DAEMON_ARGS))
    args = [args] if isinstance(args, str) else list(args)
    try:
        ctx.root.run([CHEF_CLIENT, *args], timeout=RUN_SECONDS)
    except CommandError as e:
        raise ModuleError(f"chef.exec: chef-client exited {e.returncode}") from None
    ctx.log.info("chef: chef-client %s finished", " ".join(args))
