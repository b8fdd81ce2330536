"""What a cloud-config would change on an image, read without changing it (``cloudseed plan``).

``plan(root, cfg)`` looks at the merged config (the image's own, then the user-data's) and at the
image, and lists the changes the modules would make, by kind: ``files`` (path, what, mode and owner,
created or replaced), ``users`` and ``groups`` (created, or changed when they exist), ``packages``
(to install, already installed, upgrade), ``services`` (enabled, restarted), ``mounts`` (fstab
lines added or replaced, swap) and ``commands`` (bootcmd, runcmd and user scripts: counted, never
run, so never predicted beyond that). Keys the schema does not know, or that cloudseed does not do
here, are listed as ``problems``. Nothing is written, nothing is run: every fact comes from files
under the root (``/etc/passwd``, ``/etc/group``, dpkg's status, ``/etc/fstab``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.core.root import TargetRoot

KINDS = ("files", "users", "groups", "packages", "services", "mounts", "commands", "problems")


def _names(root: TargetRoot, inner: str) -> set[str]:
    text = root.read_text(inner, default="")
    return {line.split(":", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def _installed(root: TargetRoot) -> set[str] | None:
    """Package names dpkg records as installed (None: not a dpkg system)."""
    if not root.exists("/var/lib/dpkg/status"):
        return None
    found, name = set(), ""
    for line in root.read_text("/var/lib/dpkg/status", default="").splitlines():
        if line.startswith("Package: "):
            name = line[9:].strip()
        elif line.startswith("Status: ") and line.endswith(" installed") and "not-installed" not in line:
            found.add(name)
    return found


def _file(root: TargetRoot, path: str, what: str, mode: str = "", owner: str = "") -> dict[str, Any]:
    entry = {"path": path, "action": "replace" if root.exists(path) else "create", "what": what}
    if mode:
        entry["mode"] = mode
    if owner:
        entry["owner"] = owner
    return entry


def plan(root: TargetRoot, cfg: dict) -> dict[str, list]:
    out: dict[str, list] = {kind: [] for kind in KINDS}
    _files(root, cfg, out)
    _users(root, cfg, out)
    _packages(root, cfg, out)
    _services(cfg, out)
    _mounts(root, cfg, out)
    for key in ("bootcmd", "runcmd"):
        if cfg.get(key):
            stage = "every boot, early" if key == "bootcmd" else "once, in the final stage"
            out["commands"].append({"key": key, "count": len(cfg[key]) if isinstance(cfg[key], list) else 1,
                                    "when": stage, "note": "not run by plan"})
    return out


def _files(root: TargetRoot, cfg: dict, out: dict) -> None:
    for i, item in enumerate(cfg.get("write_files") or []):
        if not isinstance(item, dict) or not item.get("path"):
            out["problems"].append(f"write_files[{i}]: no path")
            continue
        verb = "appended to" if item.get("append") else "written"
        when = " (final stage)" if item.get("defer") else ""
        entry = _file(root, str(item["path"]), f"write_files[{i}] {verb}{when}", str(item.get("permissions") or "0644"),
                      str(item.get("owner") or "root:root"))
        if item.get("append") and entry["action"] == "replace":
            entry["action"] = "append"
        out["files"].append(entry)
    name = cfg.get("fqdn") or cfg.get("hostname")
    if name and not cfg.get("preserve_hostname"):
        current = root.read_text("/etc/hostname", default="").strip()
        short = str(name).split(".")[0] if not cfg.get("prefer_fqdn_over_hostname") else str(name)
        if current != short:
            out["files"].append({**_file(root, "/etc/hostname", f"hostname {short} (was {current or 'unset'})"),
                                 "mode": "0644"})
    if cfg.get("manage_etc_hosts") in (True, "template", "localhost"):
        out["files"].append(_file(root, "/etc/hosts", f"manage_etc_hosts: {cfg['manage_etc_hosts']}"))
    if cfg.get("timezone"):
        out["files"].append(_file(root, "/etc/timezone", f"timezone {cfg['timezone']}"))
        out["files"].append(_file(root, "/etc/localtime", f"link to the zone {cfg['timezone']}"))
    if cfg.get("locale"):
        out["files"].append(_file(root, "/etc/default/locale", f"locale {cfg['locale']}"))
    sources = ((cfg.get("apt") or {}).get("sources") or {}) if isinstance(cfg.get("apt"), dict) else {}
    for name_, source in sources.items() if isinstance(sources, dict) else []:
        target = (source or {}).get("filename") if isinstance(source, dict) else None
        target = target or f"{name_}.list"
        out["files"].append(_file(root, f"/etc/apt/sources.list.d/{str(target).rsplit('/', 1)[-1]}",
                                  f"apt source {name_}"))
    if cfg.get("ssh_pwauth") is not None:
        out["files"].append(_file(root, "/etc/ssh/sshd_config", f"PasswordAuthentication per ssh_pwauth: "
                                                                f"{cfg['ssh_pwauth']}"))


def _users(root: TargetRoot, cfg: dict, out: dict) -> None:
    from cloudseed.agent.users import UsersConfigError, normalize_groups, normalize_users

    existing_users, existing_groups = _names(root, "/etc/passwd"), _names(root, "/etc/group")
    from cloudseed.agent.distros import get_distro

    default = get_distro(root, cfg).default_user()  # system_info's, else the distro's own (as the boot)
    try:
        users, notes = normalize_users(cfg, default or None)
        groups = normalize_groups(cfg.get("groups")) if cfg.get("groups") else []
    except UsersConfigError as e:
        out["problems"].append(str(e))
        return
    out["problems"].extend(notes)
    for group in groups:
        action = "add members to" if group.name in existing_groups else "create"
        out["groups"].append({"name": group.name, "action": action, "members": group.members})
    for user in users:
        spec = user.spec
        entry: dict[str, Any] = {"name": user.name, "action": "change" if user.name in existing_users else "create"}
        for key in ("groups", "shell", "sudo", "homedir", "uid", "lock_passwd", "primary_group"):
            if spec.get(key) not in (None, "", []):
                entry[key] = spec[key]
        if any(spec.get(k) for k in ("passwd", "hashed_passwd", "plain_text_passwd")):
            entry["password"] = "set"
        keys = spec.get("ssh_authorized_keys") or []
        if user.is_default:
            keys = list(keys) + list(cfg.get("ssh_authorized_keys") or [])
        if keys:
            entry["ssh_authorized_keys"] = len(keys)
            home = spec.get("homedir") or (f"/home/{user.name}" if user.name != "root" else "/root")
            out["files"].append(_file(root, f"{home}/.ssh/authorized_keys", f"{len(keys)} key(s) for {user.name}",
                                      "0600", user.name))
        for group in spec.get("groups") or []:
            if isinstance(group, str) and group not in existing_groups and \
                    group not in [g["name"] for g in out["groups"]]:
                out["groups"].append({"name": group, "action": "create", "members": [user.name]})
        out["users"].append(entry)


def _packages(root: TargetRoot, cfg: dict, out: dict) -> None:
    installed = _installed(root)
    for item in cfg.get("packages") or []:
        name = item if isinstance(item, str) else (item[0] if isinstance(item, list) and item else None)
        if name is None:
            out["problems"].append(f"packages: cannot read {item!r}")
            continue
        version = item[1] if isinstance(item, list) and len(item) > 1 else None
        state = ("install (not checked: the image has no dpkg database)" if installed is None
                 else "installed already" if name in installed else "install")
        out["packages"].append({"name": str(name), "action": state, **({"version": str(version)} if version else {})})
    for key, what in (("package_update", "update the package index"), ("package_upgrade", "upgrade every package")):
        if cfg.get(key) or (key == "package_update" and (cfg.get("packages") or cfg.get("package_upgrade"))):
            out["packages"].append({"name": "*", "action": what})


def _services(cfg: dict, out: dict) -> None:
    ntp = cfg.get("ntp")
    if isinstance(ntp, dict) and ntp.get("enabled", True) is not False:
        client = ntp.get("ntp_client") or "auto"
        out["services"].append({"name": f"NTP client ({client})", "action": "configure, enable and restart"})
    if cfg.get("ssh_pwauth") is not None or cfg.get("ssh_keys"):
        out["services"].append({"name": "ssh", "action": "restart (configuration or host keys)"})
    if cfg.get("power_state"):
        mode = (cfg["power_state"] or {}).get("mode", "?") if isinstance(cfg["power_state"], dict) else "?"
        out["services"].append({"name": "the machine", "action": f"{mode} after the final stage"})


def _mounts(root: TargetRoot, cfg: dict, out: dict) -> None:
    fstab = root.read_text("/etc/fstab", default="")
    present = {line.split()[1] for line in fstab.splitlines() if len(line.split()) > 1 and not line.startswith("#")}
    for i, entry in enumerate(cfg.get("mounts") or []):
        if not isinstance(entry, list) or len(entry) < 2:
            out["problems"].append(f"mounts[{i}]: expected [device, mount point, ...]")
            continue
        if entry[1] is None:
            out["mounts"].append({"device": str(entry[0]), "action": "remove from fstab"})
            continue
        action = "replace the fstab line" if str(entry[1]) in present else "add an fstab line and mount"
        out["mounts"].append({"device": str(entry[0]), "mount_point": str(entry[1]), "action": action})
    swap = cfg.get("swap")
    if isinstance(swap, dict) and swap.get("size") not in (None, 0, "0"):
        path = str(swap.get("filename") or "/swap.img")
        out["mounts"].append({"device": path, "mount_point": "none", "action": f"create a swap file ({swap['size']})"})
        out["files"].append(_file(root, path, "swap file", "0600"))
