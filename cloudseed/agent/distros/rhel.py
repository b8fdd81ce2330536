"""The RHEL family (RHEL, Rocky, Alma, CentOS Stream, Fedora, Oracle Linux): sysconfig-style files.

Systemd-era files only: the static hostname in ``/etc/hostname`` (``hostnamectl`` needs a running
systemd-hostnamed, which neither a chroot nor early boot has), ``/etc/locale.conf``, an
``/etc/localtime`` link, and ``update-ca-trust`` for CA anchors. Host private keys belong to the
``ssh_keys`` group when it exists.
"""

from __future__ import annotations

from cloudseed.agent.distros import Distro
from cloudseed.agent.distros.debian import update_shell_assignments

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

_CLOUD_USER = {"lock_passwd": True, "groups": ["adm", "systemd-journal"],
               "sudo": ["ALL=(ALL) NOPASSWD:ALL"], "shell": "/bin/bash"}


class RhelDistro(Distro):
    family = "rhel"
    os_ids = ("centos", "fedora", "rocky", "almalinux", "ol", "cloudlinux", "eurolinux", "virtuozzo",
              "miraclelinux")  # os-release IDs served besides "rhel"
    renderers = ("sysconfig", "network-manager", "networkd", "netplan", "eni")  # network renderer order
    package_manager = "dnf"  # dnf, or yum where the image has no dnf (package_managers/dnf.py)
    hostname_file = "/etc/hostname"
    hosts_template = "hosts.redhat"
    localhost_ip = "127.0.0.1"
    prefer_fqdn = True
    ssh_service = "sshd"
    locale_file = "/etc/locale.conf"
    ssh_keys_group = "ssh_keys"
    default_users = {
        "rhel": dict(_CLOUD_USER, name="cloud-user", gecos="Cloud User"),
        "centos": dict(_CLOUD_USER, name="centos", gecos="CentOS Cloud User"),
        "fedora": dict(_CLOUD_USER, name="fedora", gecos="fedora Cloud User"),
        "rocky": dict(_CLOUD_USER, name="rocky", gecos="Rocky Cloud User"),
        "almalinux": dict(_CLOUD_USER, name="almalinux", gecos="Alma Cloud User"),
        "ol": dict(_CLOUD_USER, name="cloud-user", gecos="Cloud User"),
    }

    def default_user(self) -> dict[str, Any]:
        user = super().default_user()
        return user or dict(self.default_users["rhel"])

    def set_timezone(self, tz: str) -> None:
        zone_file = self.timezone_file(tz)
        self.root.symlink(f"..{zone_file}", "/etc/localtime")

    def set_locale(self, locale: str, config_file: str | None = None) -> None:
        update_shell_assignments(self.root, config_file or self.locale_file, {"LANG": locale})

    def ca_certs_layout(self) -> dict[str, Any]:
        return {"cert_dir": "/usr/share/pki/ca-trust-source/anchors", "cert_file": "cloudseed-ca-certs.crt",
                "config": None, "update": ["update-ca-trust", "extract"],
                "default_bundles": ["/usr/share/pki/ca-trust-source/ca-bundle.trust.p11-kit"]}


DISTRO = RhelDistro
