"""Every top-level cloud-config key cloud-init documents, and the cloud-init module it belongs to.

Data only. The facts come from cloud-init's documentation and its schema (Debian's 22.4, plus
the keys of the modules added since: ``ubuntu_pro``, ``raspberry_pi``, ``create_hostname_file``).
Which of these keys cloudseed implements is *not* recorded here: a key is implemented when a
cloudseed module declares it in its schema (``cloudseed.agent.config.schema``). This table only says,
for a key no cloudseed module declares, whether cloud-init knows it, through which module, and
why it may not apply to this system; the module status page (``docs/modules-status.md``) is
generated from it and from the module files.

``MODULES``: cloud-init module name -> facts:
- ``stage``: the stage cloud-init runs it in (init, config, final);
- ``keys``: the top-level keys it reads (old spellings cloud-init still reads included);
- ``distros``: the distros cloud-init runs it on (os-release ``ID`` or ``ID_LIKE`` words);
  empty means every distro;
- ``why``: for a module tied to a platform or distro, what it is for, in a few words;
- ``note``: anything else a user should know (renamed, removed upstream, no configuration).
"""

from __future__ import annotations

from typing import Any

MODULES: dict[str, dict[str, Any]] = {
    "ansible": {"stage": "final", "keys": ("ansible",)},
    "apk_configure": {"stage": "config", "keys": ("apk_repos",), "distros": ("alpine",),
                      "why": "configures Alpine's apk"},
    "apt_configure": {"stage": "config", "distros": ("debian", "ubuntu"), "why": "configures APT",
                      "keys": ("apt", "apt_sources", "apt_mirror", "apt_mirror_search", "apt_mirror_search_dns",
                               "apt_proxy", "apt_http_proxy", "apt_ftp_proxy", "apt_https_proxy",
                               "apt_preserve_sources_list", "apt_custom_sources_list", "add_apt_repo_match",
                               "debconf_selections")},
    "apt_pipelining": {"stage": "config", "keys": ("apt_pipelining",), "distros": ("debian", "ubuntu"),
                       "why": "configures APT"},
    "bootcmd": {"stage": "init", "keys": ("bootcmd",)},
    "byobu": {"stage": "config", "keys": ("byobu_by_default",), "distros": ("debian", "ubuntu"),
              "why": "uses Debian's byobu packaging"},
    "ca_certs": {"stage": "init", "keys": ("ca_certs", "ca-certs"),
                 "distros": ("alpine", "debian", "ubuntu", "rhel", "fedora", "opensuse", "sles")},
    "chef": {"stage": "final", "keys": ("chef",)},
    "disable_ec2_metadata": {"stage": "config", "keys": ("disable_ec2_metadata",)},
    "disk_setup": {"stage": "init", "keys": ("disk_setup", "fs_setup", "device_aliases")},
    "fan": {"stage": "final", "keys": ("fan",), "distros": ("ubuntu",), "why": "configures Ubuntu FAN networking"},
    "final_message": {"stage": "final", "keys": ("final_message",)},
    "growpart": {"stage": "init", "keys": ("growpart",)},
    "grub_dpkg": {"stage": "config", "keys": ("grub_dpkg", "grub-dpkg"), "distros": ("debian", "ubuntu"),
                  "why": "sets the grub-pc debconf answers"},
    "install_hotplug": {"stage": "final", "keys": ("updates",)},
    "keyboard": {"stage": "config", "keys": ("keyboard",),
                 "distros": ("arch", "debian", "ubuntu", "rhel", "fedora", "centos", "opensuse", "sles", "suse")},
    "keys_to_console": {"stage": "final", "keys": ("ssh", "ssh_fp_console_blacklist", "ssh_key_console_blacklist")},
    "landscape": {"stage": "final", "keys": ("landscape",), "distros": ("ubuntu",),
                  "why": "registers with Canonical's Landscape"},
    "locale": {"stage": "config", "keys": ("locale", "locale_configfile")},
    "lxd": {"stage": "final", "keys": ("lxd",), "distros": ("ubuntu",), "why": "sets up LXD from Ubuntu's snap"},
    "mcollective": {"stage": "final", "keys": ("mcollective",)},
    "migrator": {"stage": "init", "keys": ("migrate",),
                 "note": "renames the semaphores of old cloud-init versions; nothing to migrate in cloudseed"},
    "mounts": {"stage": "init", "keys": ("mounts", "mount_default_fields", "swap")},
    "ntp": {"stage": "config", "keys": ("ntp",)},
    "package_update_upgrade_install": {
        "stage": "final",
        "keys": ("packages", "package_update", "package_upgrade", "package_reboot_if_required",
                 "apt_update", "apt_upgrade", "apt_reboot_if_required")},
    "phone_home": {"stage": "final", "keys": ("phone_home",)},
    "power_state_change": {"stage": "final", "keys": ("power_state",)},
    "puppet": {"stage": "final", "keys": ("puppet",)},
    "raspberry_pi": {"stage": "config", "keys": ("rpi",), "distros": ("raspberry-pi-os", "raspbian"),
                     "why": "drives Raspberry Pi OS's raspi-config"},
    "refresh_rmc_and_interface": {"stage": "final", "keys": (), "why": "IBM PowerVM's RMC daemon",
                                  "note": "no configuration; acts only where IBM's RMC is installed"},
    "reset_rmc": {"stage": "final", "keys": (), "why": "IBM PowerVM's RMC daemon",
                  "note": "no configuration; acts only where IBM's RMC is installed"},
    "resizefs": {"stage": "init", "keys": ("resize_rootfs", "resize_rootfs_tmp")},
    "resolv_conf": {"stage": "init", "keys": ("manage_resolv_conf", "resolv_conf")},
    "rh_subscription": {"stage": "config", "keys": ("rh_subscription",), "distros": ("rhel", "fedora"),
                        "why": "registers with Red Hat Subscription Manager"},
    "rightscale_userdata": {"stage": "final", "keys": (), "why": "RightScale's user-data format",
                            "note": "no configuration; removed from cloud-init in 23.2"},
    "rsyslog": {"stage": "init", "keys": ("rsyslog", "rsyslog_filename", "rsyslog_dir")},
    "runcmd": {"stage": "config", "keys": ("runcmd",)},
    "salt_minion": {"stage": "final", "keys": ("salt_minion",)},
    "scripts_per_boot": {"stage": "final", "keys": ()},
    "scripts_per_instance": {"stage": "final", "keys": ()},
    "scripts_per_once": {"stage": "final", "keys": ()},
    "scripts_user": {"stage": "final", "keys": ()},
    "scripts_vendor": {"stage": "final", "keys": ("vendor_data",)},
    "seed_random": {"stage": "init", "keys": ("random_seed",)},
    "set_hostname": {"stage": "init",
                     "keys": ("hostname", "fqdn", "prefer_fqdn_over_hostname", "preserve_hostname",
                              "create_hostname_file")},
    "set_passwords": {"stage": "config", "keys": ("chpasswd", "password", "ssh_pwauth")},
    "snap": {"stage": "config", "keys": ("snap", "snappy"), "distros": ("ubuntu",), "why": "drives Ubuntu's snapd"},
    "spacewalk": {"stage": "config", "keys": ("spacewalk",), "distros": ("rhel", "fedora"),
                  "why": "registers with a Spacewalk server"},
    "ssh": {"stage": "init",
            "keys": ("ssh_keys", "ssh_authorized_keys", "ssh_deletekeys", "ssh_genkeytypes", "disable_root",
                     "disable_root_opts", "allow_public_ssh_keys", "ssh_quiet_keygen", "ssh_publish_hostkeys")},
    "ssh_authkey_fingerprints": {"stage": "final", "keys": ("no_ssh_fingerprints", "authkey_hash")},
    "ssh_import_id": {"stage": "config", "keys": ("ssh_import_id",), "distros": ("debian", "ubuntu", "cos"),
                      "why": "uses the ssh-import-id tool"},
    "timezone": {"stage": "config", "keys": ("timezone",)},
    "ubuntu_autoinstall": {"stage": "config", "keys": ("autoinstall",), "distros": ("ubuntu",),
                           "why": "hands over to Ubuntu's installer (subiquity)"},
    "ubuntu_drivers": {"stage": "final", "keys": ("drivers",), "distros": ("ubuntu",),
                       "why": "drives Ubuntu's ubuntu-drivers"},
    "ubuntu_pro": {"stage": "config", "keys": ("ubuntu_pro", "ubuntu_advantage"), "distros": ("ubuntu",),
                   "why": "attaches Ubuntu Pro", "note": "called ubuntu_advantage before cloud-init 23.4"},
    "update_etc_hosts": {"stage": "init", "keys": ("manage_etc_hosts",)},
    "update_hostname": {"stage": "init", "keys": ()},
    "users_groups": {"stage": "init", "keys": ("users", "groups", "user")},
    "wireguard": {"stage": "config", "keys": ("wireguard",),
                  "note": "cloud-init 22.4 declares it for Ubuntu only; it needs only the wireguard tools"},
    "write_files": {"stage": "init", "keys": ("write_files",)},
    "write_files_deferred": {"stage": "final", "keys": ()},
    "yum_add_repo": {"stage": "config", "keys": ("yum_repos", "yum_repo_dir"),
                     "distros": ("rhel", "fedora", "centos", "almalinux", "rocky", "cloudlinux", "eurolinux",
                                 "virtuozzo", "openeuler", "openmandriva", "photon", "mariner"),
                     "why": "configures yum/dnf repositories"},
    "zypper_add_repo": {"stage": "config", "keys": ("zypper",), "distros": ("opensuse", "sles", "suse"),
                        "why": "configures SUSE's zypper"},
}

# Top-level keys cloud-init's core reads (no module owns them): key -> what it is for.
CORE_KEYS: dict[str, str] = {
    "output": "redirecting the stages' output",
    "log_cfgs": "cloud-init's Python logging configuration",
    "def_log_file": "cloud-init's log file",
    "syslog_fix_perms": "the owner of cloud-init's log file",
    "disable_network_activation": "cloud-init's network activation",
    "allow_userdata": "ignoring user-data",
    "disable_vmware_customization": "VMware's guest customization",
    "datasource": "datasource settings",
    "datasource_list": "the datasources to look for",
    "system_info": "the distro and its default user",
    "network": "the network configuration",
    "vendor_data2": "the second vendor-data",
    "cloud_init_modules": "the init stage's modules",
    "cloud_config_modules": "the config stage's modules",
    "cloud_final_modules": "the final stage's modules",
    "merge_how": "how user-data parts merge",
    "merge_type": "how user-data parts merge",
    "manual_cache_clean": "keeping the instance cache",
    "launch-index": "the launch index a part is for",
    "_doc": "a comment",
}

# Core keys cloud-init reads from the system configuration only (``/etc/cloud/cloud.cfg`` and its
# ``.d``): the user-data schema of cloud-init 24.x and later refuses them (22.4 let any top-level
# key pass). Valid in the system configuration.
SYSTEM_ONLY_KEYS: frozenset[str] = frozenset({
    "network", "datasource", "datasource_list", "vendor_data2", "manual_cache_clean", "_doc", "log_cfgs",
    "def_log_file", "syslog_fix_perms", "disable_network_activation", "allow_userdata",
    "disable_vmware_customization",
})

# os-release ID words as people write them
DISTRO_NAMES: dict[str, str] = {
    "alpine": "Alpine", "arch": "Arch Linux", "centos": "CentOS", "cos": "Container-Optimized OS",
    "debian": "Debian", "fedora": "Fedora", "opensuse": "openSUSE", "raspberry-pi-os": "Raspberry Pi OS",
    "raspbian": "Raspberry Pi OS", "rhel": "RHEL", "sles": "SLES", "suse": "SUSE", "ubuntu": "Ubuntu",
    "almalinux": "AlmaLinux", "rocky": "Rocky Linux", "photon": "Photon OS", "mariner": "CBL-Mariner",
}
