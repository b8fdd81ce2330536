"""System configuration: built-in defaults merged with the config files and the kernel command line.

Order (later wins; mappings merge key by key, everything else is replaced):
  1. built-in defaults (``BUILTIN`` below),
  2. ``/etc/cloud/cloud.cfg`` then ``/etc/cloud/cloud.cfg.d/*.cfg`` in name order
     (images prepared for cloud-init keep their settings),
  3. ``/etc/cloudseed/cloud.cfg`` then ``/etc/cloudseed/cloud.cfg.d/*.cfg``,
  4. the kernel command line: ``cc: <yaml> end_cc`` (URL-encoded or with ``\\n`` escapes).
A file that does not parse is skipped with an error naming the file and line.

The package holds the rest of configuration: ``schema`` (checking cloud-config against what the
modules declare), ``validator`` (the JSON-schema checker it uses, which knows nothing of the
modules), ``known_keys`` (every key cloud-init documents), ``simple_yaml`` (the small reader
for the first stage's meta-data), ``module_reference`` (``docs/modules.md``).
"""

from __future__ import annotations

import copy
import logging

from cloudseed.core.root import TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.config")

CONFIG_FILES = (
    ("/etc/cloud/cloud.cfg", "/etc/cloud/cloud.cfg.d"),
    ("/etc/cloudseed/cloud.cfg", "/etc/cloudseed/cloud.cfg.d"),
)

BUILTIN: dict[str, Any] = {
    "datasource_list": ["NoCloud", "ConfigDrive", "OpenStack", "AltCloud", "MAAS", "CloudSigma", "SmartOS",
                        "Bigstep", "Scaleway", "AliYun", "Ec2", "CloudStack", "GCE",
                        "DigitalOcean", "Hetzner", "IBMCloud", "Oracle", "Exoscale", "RbxCloud",
                        "Azure", "OpenNebula", "OVF", "UpCloud", "VMware", "Vultr", "NWCS",
                        "LXD", "Akamai", "WSL", "CloudCIX", "None"],
    "users": ["default"],
    "disable_root": True,
    "preserve_hostname": False,
    "ssh_pwauth": None,
    # cloud-init's module lists and order (modules of other distro families skip themselves)
    "cloud_init_modules": [
        "seed_random", "bootcmd", "write_files", "growpart", "resizefs", "disk_setup", "mounts",
        "set_hostname", "update_hostname", "update_etc_hosts", "ca_certs", "rsyslog", "users_groups", "ssh",
        "resolv_conf",
    ],
    "cloud_config_modules": [
        "wireguard", "snap", "ubuntu_autoinstall", "ssh_import_id", "keyboard", "locale", "set_passwords",
        "grub_dpkg", "apt_pipelining", "apt_configure", "yum_add_repo", "zypper_add_repo", "apk_configure",
        "rh_subscription", "spacewalk", "ubuntu_pro", "ntp", "timezone", "disable_ec2_metadata", "runcmd",
        "byobu", "raspberry_pi",
    ],
    "cloud_final_modules": [
        "package_update_upgrade_install", "fan", "landscape", "lxd", "ubuntu_drivers", "write_files_deferred",
        "puppet", "chef", "ansible", "mcollective", "salt_minion", "reset_rmc", "scripts_vendor",
        "scripts_per_once", "scripts_per_boot", "scripts_per_instance", "scripts_user", "ssh_authkey_fingerprints",
        "keys_to_console", "install_hotplug", "phone_home", "metadata_access", "final_message", "power_state_change",
    ],
    "vendor_data": {"enabled": True},
    "system_info": {},
}


class ConfigFileError(Exception):
    """A config file could not be parsed; the message names the file and line."""


def merge_config(base: dict, override: dict) -> dict:
    """A new dict: ``override`` over ``base``, recursing into mappings, replacing other values."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_config(result[key], value)
        else:
            result[key] = value
    return result


def load_yaml_mapping(text: str, source: str) -> dict:
    """Parse ``text`` as a YAML mapping; errors name ``source`` and the line."""
    from cloudseed.agent.config import simple_yaml

    simple = simple_yaml.load(text)  # most meta-data: no PyYAML import in the first stage
    if simple is not None:
        return simple
    import yaml

    from cloudseed.core.yaml_loading import load_yaml  # safe, with aliases bounded

    try:
        loaded = load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}, line {mark.line + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigFileError(f"{where}: invalid YAML: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigFileError(f"{source}: expected a mapping of settings, got {type(loaded).__name__}")
    return loaded


def load_config_files(paths: list[str]) -> dict:
    """The settings of files named on the command line (``init``/``modules``/``single --file``, as
    cloud-init's ``-f``): YAML mappings, the first file winning where they overlap. They are read
    from this machine as given (not inside ``--root``); ConfigFileError names a file that cannot be."""
    cfg: dict = {}
    for path in reversed(paths):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigFileError(f"{path}: cannot read it: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigFileError(f"{path}: not UTF-8 text") from None
        cfg = merge_config(cfg, load_yaml_mapping(text, path))
    return cfg


FILE_HELP = "more YAML configuration over every other source, for this run only (cloud-init's -f; repeatable)"


def files_for_command(paths: list[str], verb: str) -> dict | None:
    """``load_config_files`` for a stage command: None (the problem printed) when a file is unusable,
    so the command stops before doing anything (cloud-init logs it and runs without the file)."""
    try:
        return load_config_files(paths)
    except ConfigFileError as e:
        import sys

        print(f"cloudseed {verb}: --file {e}", file=sys.stderr)
        return None


def read_cmdline(root: TargetRoot) -> str:
    """The kernel command line of the running system (a file in the root for tests)."""
    override = "/etc/cloudseed/cmdline"  # lets tests and offline roots supply one
    if not root.is_live and root.exists(override):
        return root.read_text(override).strip()
    if root.is_live:
        try:
            with open("/proc/cmdline") as f:
                return f.read().strip()
        except OSError:
            return ""
    return ""


def config_from_cmdline(cmdline: str) -> str:
    """The YAML text carried by ``cc: ... end_cc`` fragments of the kernel command line."""
    if "cc:" not in cmdline:
        return ""  # nearly always: no urllib (with ipaddress) to import at every stage's start
    from urllib.parse import unquote

    pieces = []
    start = cmdline.find("cc:")
    while start >= 0:
        if start > 0 and not cmdline[start - 1].isspace():
            start = cmdline.find("cc:", start + 3)
            continue
        end = cmdline.find("end_cc", start + 3)
        if end < 0:
            end = len(cmdline)
        pieces.append(unquote(cmdline[start + 3:end]).strip())
        start = cmdline.find("cc:", end)
    return "\n".join(pieces).replace("\\n", "\n")


def load_system_config(root: TargetRoot, cmdline: str | None = None,
                       errors: list[str] | None = None) -> dict:
    """The merged system configuration of ``root``; parse problems go to ``errors``."""
    cfg = copy.deepcopy(BUILTIN)
    problems = errors if errors is not None else []
    for main_file, drop_dir in CONFIG_FILES:
        files = [main_file] + [f"{drop_dir}/{n}" for n in root.listdir(drop_dir) if n.endswith(".cfg")]
        for path in files:
            if not root.isfile(path):
                continue
            try:
                cfg = merge_config(cfg, load_yaml_mapping(root.read_text(path), path))
            except ConfigFileError as e:
                LOG.error("%s", e)
                problems.append(str(e))
    text = config_from_cmdline(cmdline if cmdline is not None else read_cmdline(root))
    if text.strip():
        try:
            cfg = merge_config(cfg, load_yaml_mapping(text, "kernel command line (cc:)"))
        except ConfigFileError as e:
            LOG.error("%s", e)
            problems.append(str(e))
    return cfg


def is_disabled(root: TargetRoot, cmdline: str) -> str | None:
    """Why the agent is switched off, or None when it should run."""
    for marker in ("/etc/cloudseed/disabled", "/etc/cloud/cloud-init.disabled"):
        if root.exists(marker):
            return f"{marker} exists"
    for token in cmdline.split():
        if token in ("cloudseed=disabled", "cloud-init=disabled"):
            return f"kernel command line has {token}"
    return None
