"""``cloudseed clean [--logs] [--seed] [--configs KIND...] [--reboot]``: forget this instance.

The next boot is then a first boot. ``--configs`` (cloud-init 25.2) also removes the configuration
the agent generated, so that an image made from this machine gets it anew: ``network`` (what the
network renderers wrote, cloudseed's and cloud-init's file names), ``ssh_config`` (the sshd
drop-in), ``fstab`` (the lines ``mounts`` added, marked ``comment=cloudconfig``), ``datasource``
(what a datasource left outside the agent's state: Azure's resource-disk line in fstab), ``all``.
"""

from __future__ import annotations

import argparse

HELP = "remove agent state so the next boot runs as a new instance"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logs", "-l", action="store_true", help="also remove the agent's logs")
    parser.add_argument("--seed", "-s", action="store_true", help="also remove the seed directories "
                                                                "(cloudseed's and cloud-init's /var/lib/cloud/seed)")
    parser.add_argument("--configs", "-c", nargs="+", choices=CONFIG_KINDS, metavar="KIND", default=[],
                        help=f"also remove generated configuration: {', '.join(CONFIG_KINDS)}")
    parser.add_argument("--reboot", "-r", action="store_true", help="reboot afterwards")


CONFIG_KINDS = ("all", "ssh_config", "network", "datasource", "fstab")
# generated network configuration: cloudseed's renderers' files, and cloud-init's names for the same
# (an image that ran cloud-init before it ran cloudseed), as cloud-init 25.2's clean removes them
_NETWORK_FILES = (
    "/etc/netplan/50-cloudseed.yaml", "/etc/network/interfaces.d/50-cloudseed",
    "/etc/NetworkManager/system-connections/cloudseed-*.nmconnection", "/etc/systemd/network/10-cloudseed-*",
    "/etc/NetworkManager/conf.d/99-cloudseed.conf", "/etc/udev/rules.d/70-cloudseed-net.rules",
    "/etc/netplan/50-cloud-init.yaml", "/etc/network/interfaces.d/50-cloud-init.cfg",
    "/etc/NetworkManager/conf.d/99-cloud-init.conf", "/etc/NetworkManager/conf.d/30-cloud-init-ip6-addr-gen-mode.conf",
    "/etc/NetworkManager/system-connections/cloud-init-*.nmconnection", "/etc/systemd/network/10-cloud-init-*.network",
)
CLOUD_INIT_SEED_DIR = "/var/lib/cloud/seed"  # cloud-init clean --seed removes it; NoCloud & co. read it
_SSH_FILES = ("/etc/ssh/sshd_config.d/50-cloudseed.conf", "/etc/ssh/sshd_config.d/50-cloud-init.conf")
_FSTAB = "/etc/fstab"
_FSTAB_MARKER = "comment=cloudconfig"
_AZURE_RESOURCE_DISK = "/dev/disk/cloud/azure_resource"


def _matching(root, pattern: str) -> list[str]:
    import fnmatch
    import posixpath

    directory, name = posixpath.split(pattern)
    return [f"{directory}/{n}" for n in sorted(root.listdir(directory)) if fnmatch.fnmatchcase(n, name)]


def _clean_fstab(root, also: str | None) -> list[str]:
    """Remove the fstab lines the agent added (and with ``also``, only those naming it too)."""
    if not root.isfile(_FSTAB):
        return []
    lines = root.read_text(_FSTAB).splitlines(keepends=True)
    kept = [line for line in lines if not (_FSTAB_MARKER in line and (also is None or also in line))]
    if len(kept) == len(lines):
        return []
    root.write(_FSTAB, "".join(kept), keep_mode=True)
    return [f"{_FSTAB} ({len(lines) - len(kept)} line(s))"]


def remove_configs(root, kinds: list[str]) -> list[str]:
    """Remove the generated configuration of ``kinds``; what was removed."""
    wanted = set(CONFIG_KINDS[1:]) if "all" in kinds else set(kinds)
    removed: list[str] = []
    patterns = (_NETWORK_FILES if "network" in wanted else ()) + (_SSH_FILES if "ssh_config" in wanted else ())
    for pattern in patterns:
        for path in _matching(root, pattern):
            if root.remove(path):
                removed.append(path)
    if "fstab" in wanted:
        removed += _clean_fstab(root, None)
    elif "datasource" in wanted:
        removed += _clean_fstab(root, _AZURE_RESOURCE_DISK)
    return removed


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.lock import run_locked
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    return run_locked(root, "clean", lambda: _clean(root, args))


def _clean(root, args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.lock import LOCK_FILE
    from cloudseed.agent.scripts import OUTPUT_LOG
    from cloudseed.agent.state import DATA_DIR, LOG_FILE, RUN_DIR

    removed = []
    for name in root.listdir(DATA_DIR):
        if (name == "seed" and not args.seed) or f"{DATA_DIR}/{name}" == LOCK_FILE:  # the lock held here stays
            continue
        root.remove_tree(f"{DATA_DIR}/{name}")
        removed.append(f"{DATA_DIR}/{name}")
    for name in root.listdir(RUN_DIR):
        if name not in ("enabled", "disabled"):
            root.remove_tree(f"{RUN_DIR}/{name}")
    if args.seed and root.isdir(CLOUD_INIT_SEED_DIR):  # cloud-init's seeds, which the datasources read too
        root.remove_tree(CLOUD_INIT_SEED_DIR)
        removed.append(CLOUD_INIT_SEED_DIR)
    removed += remove_configs(root, args.configs)
    if args.logs:
        for log in (LOG_FILE, OUTPUT_LOG):
            if root.remove(log):
                removed.append(log)
    print(f"cloudseed clean: removed {len(removed)} item(s)")
    if args.reboot:
        if not root.is_live:
            print("cloudseed clean: --reboot ignored for an offline root")
            return 0
        root.run(["shutdown", "-r", "now"], check=False)
    return 0
