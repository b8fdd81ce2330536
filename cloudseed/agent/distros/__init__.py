"""Distro families: how this system does a thing (users, passwords, hostname, services...).

A distro is one file here named after its family (``debian.py``, ``rhel.py``) that sets
``DISTRO`` to a ``Distro`` subclass declaring its ``family``, the os-release IDs it serves
(``os_ids``), the order in which it looks for a network renderer (``renderers``) and how things
are done. The registry finds them: the family is chosen from the target root's
``/etc/os-release`` (``ID`` then ``ID_LIKE``); ``system_info: {distro: NAME}`` in the config
overrides it. Every command runs through the target root (chrooted when it is not ``/``); secrets
go to commands on stdin, never in argv or logs. The contract is in ``_contract.py``.
"""

from __future__ import annotations

import importlib
import logging
import os
import time

from cloudseed.core.root import CommandError, TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Sequence

LOG = logging.getLogger("cloudseed.distro")

DEFAULT_FAMILY = "debian"  # when os-release names nothing a distro file serves
# Systems some modules are for (apk_configure: Alpine; zypper_add_repo: SUSE) that have no distro
# file of their own: a module may name them in ``distros``, and elsewhere says it does not apply.
OTHER_SYSTEMS = ("alpine", "suse", "opensuse", "opensuse-leap", "opensuse-tumbleweed", "sles", "sled",
                 "sle-micro", "raspberry-pi-os", "arch", "gentoo", "freebsd")


class Family(str):
    """A family's name (what ``family_of`` returns), carrying the renderer order its file declares.

    The network layer may not import the agent: the agent hands it this (``apply_network(distro=)``)
    and the renderer registry reads ``renderers`` from it.
    """

    renderers: tuple[str, ...] = ()


def distro_names() -> list[str]:
    """Every distro file of this package (the family names), without importing any."""
    here = os.path.dirname(__file__)
    return sorted(n[:-3] for n in os.listdir(here) if n.endswith(".py") and not n.startswith("_"))


def distro_class(family: str) -> type[Distro]:
    """The class the distro file ``family`` declares (ImportError or AttributeError when none)."""
    return importlib.import_module(f"{__name__}.{family}").DISTRO


_FAMILIES: dict[str, str] = {}


def families() -> dict[str, str]:
    """os-release ID -> family, from the ``os_ids`` every distro file declares (imports them all)."""
    if not _FAMILIES:
        for family in distro_names():
            try:
                cls = distro_class(family)
            except (ImportError, AttributeError) as e:
                LOG.warning("distro file %s.py declares no DISTRO: %s", family, e)
                continue
            for os_id in (cls.family, *cls.os_ids):
                _FAMILIES.setdefault(str(os_id).lower(), cls.family)
    return _FAMILIES


def _family_for(word: str) -> str | None:
    word = word.lower()
    if not word:
        return None
    # a file named after the word serves it (the contract test checks that no two files claim an ID);
    # only a word that names no file needs every distro file imported
    if word in distro_names():
        return word
    return families().get(word)


def read_os_release(root: TargetRoot) -> dict[str, str]:
    """``/etc/os-release`` (or ``/usr/lib/os-release``) of the target as a dict."""
    text = root.read_text("/etc/os-release", default="") or root.read_text("/usr/lib/os-release", default="")
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            info[key.strip()] = value.strip().strip("\"'")
    return info


def family_of(os_release: dict[str, str]) -> Family:
    """The family serving this os-release (``ID`` first, then each ``ID_LIKE`` word), with its renderer order."""
    words = [os_release.get("ID", "")] + os_release.get("ID_LIKE", "").split()
    for word in words:
        found = _family_for(word)
        if found:
            return family_named(found)
    return family_named(DEFAULT_FAMILY)


def family_named(family: str) -> Family:
    """``family`` as a ``Family`` carrying the renderer order its distro file declares."""
    named = Family(family)
    try:
        named.renderers = tuple(distro_class(family).renderers)
    except (ImportError, AttributeError):
        pass
    return named


class DistroError(Exception):
    """The system could not do what was asked (a command failed, a name is unknown)."""


def file_header(action: str = "Created") -> str:
    """The comment line put at the top of files the agent creates."""
    from cloudseed import __version__

    stamp = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime())
    return f"# {action} by cloudseed v. {__version__} on {stamp}"


class Distro:
    """Base of the distro families; subclasses fill in how things are done."""

    family = "generic"
    # os-release IDs (ID, or a word of ID_LIKE) this family serves, besides its own name
    os_ids: tuple[str, ...] = ()
    # network renderers to look for on the system, in this order (names of network/renderers files)
    renderers: tuple[str, ...] = ()
    hostname_file = "/etc/hostname"
    hosts_template = "hosts.debian"
    localhost_ip = "127.0.1.1"
    prefer_fqdn = False
    ssh_service = "ssh"
    sudoers_file = "/etc/sudoers.d/90-cloudseed-users"
    doas_file = "/etc/doas.conf"
    locale_file = "/etc/default/locale"
    zoneinfo_dir = "/usr/share/zoneinfo"
    ssh_keys_group: str | None = None  # group owning private host keys (RHEL: ssh_keys)
    # the default user each os-release ID gets when system_info has none
    default_users: dict[str, dict[str, Any]] = {}

    def __init__(self, root: TargetRoot, cfg: dict, os_release: dict[str, str]):
        self.root = root
        self.cfg = cfg
        self.os_release = os_release

    @property
    def id(self) -> str:
        return self.os_release.get("ID", self.family)

    @property
    def version(self) -> str:
        return self.os_release.get("VERSION_ID", "")

    @property
    def system_info(self) -> dict[str, Any]:
        info = self.cfg.get("system_info")
        return info if isinstance(info, dict) else {}

    # ------------------------------------------------------------------ default user
    def default_user(self) -> dict[str, Any]:
        """``system_info.default_user`` when configured, else this distro's built-in one."""
        configured = self.system_info.get("default_user")
        if isinstance(configured, dict) and configured.get("name"):
            return dict(configured)
        builtin = self.default_users.get(self.id) or self.default_users.get(self.family) or {}
        return {key: (list(value) if isinstance(value, list) else value) for key, value in builtin.items()}

    @property
    def ssh_service_name(self) -> str:
        return str(self.system_info.get("ssh_svcname") or self.ssh_service)

    # ------------------------------------------------------------------ commands
    def run(self, argv: Sequence[str], input: str | None = None, what: str = "") -> str:
        """Run a command in the target; a failure becomes DistroError naming ``what``."""
        try:
            return self.root.run(argv, input=input).stdout
        except CommandError as e:
            raise DistroError(f"{what or argv[0]}: {e}") from None

    def has_command(self, name: str) -> bool:
        return self.root.which(name) is not None

    # ------------------------------------------------------------------ hostname
    def read_hostname(self) -> str:
        """The static hostname the system files hold ('' when none)."""
        for line in self.root.read_text(self.hostname_file, default="").splitlines():
            head = line.split("#", 1)[0].strip()
            if head:
                return head
        return ""

    def write_hostname(self, hostname: str) -> None:
        """Put ``hostname`` in the hostname file, keeping its comment lines."""
        text = self.root.read_text(self.hostname_file, default="")
        lines, replaced = [], False
        for line in text.splitlines():
            head, sep, tail = line.strip().partition("#")
            if head.strip():
                if not replaced:
                    lines.append(hostname + (f" #{tail}" if sep else ""))
                    replaced = True
                continue
            lines.append(line)
        if not replaced:
            lines.append(hostname)
        # 0644 like cloud-init, whatever the image had (the lab image ships it 0755)
        self.root.write(self.hostname_file, "\n".join(lines) + "\n", mode=0o644)

    def apply_hostname_live(self, hostname: str) -> None:
        """Set the running kernel's hostname (only when acting on the live system)."""
        if not self.root.is_live:
            return
        try:  # the system call (what hostname(1) makes), without a process per boot
            import socket

            socket.sethostname(hostname)
            return
        except (OSError, AttributeError, UnicodeError) as e:
            LOG.info("sethostname(%s) failed (%s); trying the hostname command", hostname, e)
        try:
            self.root.run(["hostname", hostname])
        except CommandError as e:
            LOG.warning("could not set the running hostname to %s: %s", hostname, e)

    # ------------------------------------------------------------------ users and groups
    def _db_names(self, inner: str) -> set[str]:
        text = self.root.read_text(inner, default="")
        return {line.split(":", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}

    def user_exists(self, name: str) -> bool:
        return name in self._db_names("/etc/passwd")

    def group_exists(self, name: str) -> bool:
        return name in self._db_names("/etc/group")

    def group_members(self, name: str) -> list[str]:
        for line in self.root.read_text("/etc/group", default="").splitlines():
            fields = line.split(":")
            if fields[0] == name and len(fields) > 3:
                return [m for m in fields[3].split(",") if m]
        return []

    def create_group(self, name: str, system: bool = False) -> None:
        argv = ["groupadd"] + (["--system"] if system else []) + [name]
        self.run(argv, what=f"groupadd {name}")

    def add_to_group(self, user: str, group: str) -> None:
        self.run(["usermod", "-a", "-G", group, user], what=f"adding {user} to {group}")

    def useradd_argv(self, name: str, spec: dict[str, Any]) -> list[str]:
        """The ``useradd`` command line for a normalised user spec (no password in it)."""
        argv = ["useradd"]
        options = (("gecos", "--comment"), ("homedir", "--home-dir"), ("primary_group", "--gid"),
                   ("uid", "--uid"), ("shell", "--shell"), ("expiredate", "--expiredate"),
                   ("inactive", "--inactive"), ("selinux_user", "--selinux-user"))
        for key, flag in options:
            value = spec.get(key)
            if value not in (None, ""):
                argv += [flag, str(value)]
        if spec.get("groups"):
            argv += ["--groups", ",".join(spec["groups"])]
        if spec.get("no_user_group"):
            argv.append("--no-user-group")
        if spec.get("system"):
            argv.append("--system")
        if spec.get("no_log_init"):
            argv.append("--no-log-init")
        argv.append("-M" if spec.get("no_create_home") or spec.get("system") else "-m")
        argv.append(name)
        return argv

    def add_user(self, name: str, spec: dict[str, Any]) -> None:
        self.run(self.useradd_argv(name, spec), what=f"useradd {name}")

    def remove_user(self, name: str) -> None:
        """Remove an account with its home (one a killed ``useradd`` left half made, to be made again)."""
        self.run(["userdel", "--remove", "--force", name], what=f"userdel {name}")

    # ------------------------------------------------------------------ passwords
    def chpasswd(self, pairs: Sequence[tuple[str, str]], hashed: bool) -> None:
        """Set passwords (given on stdin, never on the command line)."""
        if not pairs:
            return
        payload = "".join(f"{user}:{password}\n" for user, password in pairs)
        argv = ["chpasswd"] + (["-e"] if hashed else [])
        try:
            self.root.run(argv, input=payload)
        except CommandError as e:
            users = ", ".join(user for user, _ in pairs)
            # the command's own output never holds the passwords; keep only its last line
            raise DistroError(f"chpasswd for {users} exited {e.returncode}") from None

    def password_locked(self, name: str) -> bool:
        """Is the account's password already locked in /etc/shadow ('!' or '*' in the hash field)?"""
        for line in self.root.read_text("/etc/shadow", default="").splitlines():
            fields = line.split(":")
            if fields[0] == name and len(fields) > 1:
                return fields[1].startswith(("!", "*"))
        return False

    def lock_password(self, name: str) -> None:
        if self.password_locked(name):
            return  # useradd leaves a new account locked: one process less per user at boot
        if self.has_command("passwd") or not self.has_command("usermod"):
            self.run(["passwd", "-l", name], what=f"locking the password of {name}")
        else:
            self.run(["usermod", "--lock", name], what=f"locking the password of {name}")

    def expire_password(self, name: str) -> None:
        self.run(["passwd", "--expire", name], what=f"expiring the password of {name}")

    # ------------------------------------------------------------------ services
    def manage_service(self, action: str, service: str) -> bool:
        """``systemctl <action> <service>`` on the live system; False when not applicable."""
        if not self.root.is_live or not self.root.exists("/run/systemd/system"):
            LOG.info("not %sing %s: not a running systemd system", action, service)
            return False
        verbs = {"reload": "reload-or-restart", "try-reload": "reload-or-try-restart"}
        try:
            self.root.run(["systemctl", verbs.get(action, action), service])
        except CommandError as e:
            LOG.warning("systemctl %s %s failed: %s", action, service, e)
            return False
        return True

    # ------------------------------------------------------------------ time and locale
    def timezone_file(self, tz: str) -> str:
        """The zoneinfo file for ``tz``; DistroError when the name is not a known zone."""
        name = str(tz).strip()
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise DistroError(f"{tz!r} is not a timezone name")
        inner = f"{self.zoneinfo_dir}/{name}"
        if not self.root.isfile(inner):
            raise DistroError(f"unknown timezone {tz!r} (no {inner} in the system)")
        return inner

    def set_timezone(self, tz: str) -> None:
        raise NotImplementedError

    def set_locale(self, locale: str, config_file: str | None = None) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ CA certificates
    def ca_certs_layout(self) -> dict[str, Any]:
        raise NotImplementedError


def get_distro(root: TargetRoot, cfg: dict) -> Distro:
    os_release = read_os_release(root)
    wanted = str((cfg.get("system_info") or {}).get("distro") or "")
    family = _family_for(wanted) or family_of(os_release)
    try:
        cls = distro_class(family)
    except (ImportError, AttributeError):
        cls = type(f"{family.title()}Distro", (Distro,), {"family": str(family)})
    return cls(root, cfg, os_release)
