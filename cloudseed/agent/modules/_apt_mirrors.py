"""Which archive mirrors, release codename and architecture apt_configure writes sources for.

The ``primary`` / ``security`` lists of ``apt:`` hold one entry per set of architectures
(``arches: [amd64]``, ``[default]`` for the others); an entry names its mirror with ``uri``, or
a list of candidates to ``search`` (the first whose host resolves wins), or ``search_dns``
(``http://<distro>-mirror.<domain>/<distro>`` for the instance's domain, ``localdomain``, then no
domain; ``<distro>-security-mirror`` for security). Without a mirror, ``system_info.package_mirrors``
(``failsafe`` of the entry for the architecture) and then the distro's own archive are used;
security defaults to the primary mirror when only a primary one is configured.
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse

from cloudseed.core.root import CommandError, TargetRoot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

RESOLVE_TIMEOUT = 2.0
DEBIAN_MIRRORS = {"primary": "https://deb.debian.org/debian", "security": "https://deb.debian.org/debian-security"}
UBUNTU_MIRRORS = {"primary": "http://archive.ubuntu.com/ubuntu", "security": "http://security.ubuntu.com/ubuntu"}
UBUNTU_PORTS = {"primary": "http://ports.ubuntu.com/ubuntu-ports", "security": "http://ports.ubuntu.com/ubuntu-ports"}
UBUNTU_MAIN_ARCHES = ("amd64", "i386")
DEBIAN_CODENAMES = {"9": "stretch", "10": "buster", "11": "bullseye", "12": "bookworm", "13": "trixie",
                    "14": "forky"}
_MACHINE_TO_DPKG = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "armhf", "i686": "i386", "i386": "i386",
                    "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}


class MirrorError(Exception):
    """No usable mirror or release could be determined; the message names the key."""


def release_codename(root: TargetRoot, os_release: dict[str, str]) -> str:
    """The release codename (``bookworm``, ``noble``) of the target; '' when it cannot be told."""
    for key in ("VERSION_CODENAME", "UBUNTU_CODENAME"):
        if os_release.get(key):
            return os_release[key]
    if os_release.get("ID", "debian") == "debian":
        major = os_release.get("VERSION_ID", "").split(".")[0]
        if major in DEBIAN_CODENAMES:
            return DEBIAN_CODENAMES[major]
        text = root.read_text("/etc/debian_version", default="").strip()
        if "/" in text:  # testing/unstable: "trixie/sid"
            return text.split("/")[0]
        if text.split(".")[0] in DEBIAN_CODENAMES:
            return DEBIAN_CODENAMES[text.split(".")[0]]
    return ""


def dpkg_architecture(root: TargetRoot) -> str:
    """The target's dpkg architecture (``dpkg --print-architecture``, else from the machine type)."""
    if root.which("dpkg"):
        try:
            arch = root.run(["dpkg", "--print-architecture"], timeout=30).stdout.strip()
            if arch:
                return arch
        except CommandError:
            pass
    machine = os.uname().machine
    return _MACHINE_TO_DPKG.get(machine, machine)


def resolves(url: str, timeout: float = RESOLVE_TIMEOUT) -> bool:
    """True when the host of ``url`` resolves within ``timeout`` seconds."""
    host = urllib.parse.urlsplit(str(url)).hostname
    if not host:
        return False
    answer: list[bool] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, None)
            answer.append(True)
        except (OSError, UnicodeError):
            answer.append(False)

    thread = threading.Thread(target=lookup, daemon=True, name=f"resolve {host}")
    thread.start()
    thread.join(timeout)
    return bool(answer and answer[0])


def first_resolving(candidates: Any, check: Callable[[str], bool] = resolves) -> str | None:
    for candidate in candidates or []:
        if isinstance(candidate, str) and check(candidate):
            return candidate
    return None


def select_entry(entries: Any, arch: Callable[[], str]) -> dict | None:
    """The mirror entry for the target's architecture, else the ``default`` one."""
    if not isinstance(entries, list):
        return None
    dicts = [e for e in entries if isinstance(e, dict)]
    if any(a != "default" for e in dicts for a in (e.get("arches") or [])):
        wanted = arch()
        for entry in dicts:
            if wanted in (entry.get("arches") or []):
                return entry
    for entry in dicts:
        if "default" in (entry.get("arches") or []):
            return entry
    return None


def dns_candidates(kind: str, distro_id: str, fqdn: str) -> list[str]:
    label = "mirror" if kind == "primary" else "security-mirror"
    domains = []
    if "." in fqdn:
        domains.append("." + fqdn.split(".", 1)[1])
    domains += [".localdomain", ""]
    return [f"http://{distro_id}-{label}{domain}/{distro_id}" for domain in domains]


def configured_mirror(entry: dict | None, kind: str, distro_id: str, fqdn: str,
                      check: Callable[[str], bool] = resolves) -> str | None:
    if entry is None:
        return None
    if entry.get("uri"):
        return str(entry["uri"])
    found = first_resolving(entry.get("search"), check)
    if found is None and entry.get("search_dns"):
        found = first_resolving(dns_candidates(kind, distro_id, fqdn), check)
    return found


def default_mirrors(distro_id: str, system_info: dict, arch: Callable[[], str]) -> dict[str, str]:
    """``system_info.package_mirrors`` failsafe for the architecture, else the distro's archive."""
    configured = system_info.get("package_mirrors")
    entry = select_entry(configured, arch) if isinstance(configured, list) else None
    failsafe = entry.get("failsafe") if entry else None
    if isinstance(failsafe, dict) and failsafe.get("primary"):
        return {"primary": str(failsafe["primary"]), "security": str(failsafe.get("security") or failsafe["primary"])}
    if distro_id == "ubuntu":
        return dict(UBUNTU_MIRRORS if arch() in UBUNTU_MAIN_ARCHES else UBUNTU_PORTS)
    return dict(DEBIAN_MIRRORS)


def find_mirrors(apt: dict, distro_id: str, system_info: dict, fqdn: str, arch: Callable[[], str],
                 check: Callable[[str], bool] = resolves) -> tuple[dict[str, str], dict[str, dict | None]]:
    """({"PRIMARY", "SECURITY", "MIRROR"}, the selected primary/security entries)."""
    entries = {kind: select_entry(apt.get(kind), arch) for kind in ("primary", "security")}
    primary = configured_mirror(entries["primary"], "primary", distro_id, fqdn, check)
    security = configured_mirror(entries["security"], "security", distro_id, fqdn, check)
    if primary is None:
        defaults = default_mirrors(distro_id, system_info, arch)
        primary = defaults["primary"]
        security = security or defaults["security"]
    security = security or primary
    return {"PRIMARY": primary, "SECURITY": security, "MIRROR": primary}, entries
