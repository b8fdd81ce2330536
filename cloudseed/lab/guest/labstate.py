"""What the lab asks a finished guest: facts for ``--expect`` checks, the system state for ``--compare``.

Runs inside the guest (lab images only) under the guest's python3, standard library only.
``fact(query)`` answers one question (a file, a user, a group, a service, a package, a mount, the
hostname, a command's result); the lab judges the answers on the host. ``collect(since)`` gathers
what an agent leaves behind, in the same shape whichever agent ran, so that two boots can be
compared: files written since ``since`` (or since the kernel started), users, groups, sudo rules,
authorized keys, hostname and hosts, mounts and fstab, services, packages, network configuration.
"""

from __future__ import annotations

import glob
import grp
import hashlib
import os
import pwd
import re
import socket
import stat
import subprocess
import time

CONTENT_LIMIT = 1 << 20  # file content returned for checks and comparisons up to this size
TEXT_LIMIT = 64 << 10  # state: text content kept for a readable difference up to this size

# what the state's "files" leave out: agents' own records and logs, and what changes at every boot
# whichever agent runs (other categories report the users, groups, sudo, hosts, fstab, network files)
AGENT_OWN = ("/var/lib/cloud", "/var/lib/cloudseed", "/var/log/cloud-init", "/var/log/cloudseed", "/var/tmp/cloud-init",
             "/etc/cloud/cloud.cfg.d/90_dpkg.cfg", "/usr/local/lib/cloudseed-lab/")  # and the lab's own helper
VOLATILE = ("/var/log/", "/var/lib/systemd/", "/tmp/.X11-unix", "/tmp/.ICE-unix", "/tmp/.XIM-unix",
            "/tmp/.font-unix", "/var/lib/dhcp/", "/var/cache/", "/var/lib/apt/lists/",
            "/var/lib/dpkg/", "/var/lib/private/", "/etc/machine-id", "/var/lib/dbus/machine-id",
            "/etc/ld.so.cache", "/var/lib/sudo/", "/var/lib/ucf/", "/etc/resolv.conf", "/etc/.pwd.lock",
            "/var/lib/logrotate/")
COVERED = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/etc/passwd-", "/etc/group-",
           "/etc/shadow-", "/etc/gshadow-", "/etc/subuid", "/etc/subgid", "/etc/subuid-", "/etc/subgid-",
           "/etc/hostname", "/etc/hosts", "/etc/fstab", "/etc/sudoers", "/etc/sudoers.d/")
NETWORK_DIRS = ("/etc/network/interfaces", "/etc/network/interfaces.d", "/etc/netplan", "/etc/systemd/network",
                "/etc/NetworkManager/system-connections", "/etc/sysconfig/network-scripts")
WALKED = ("/etc", "/home", "/root", "/var", "/srv", "/opt", "/usr/local", "/tmp", "/boot")
AGENT_UNITS = re.compile(r"^(cloud-|cloudseed|cloud-init)")
# active or not by when the state is read, whichever agent ran: socket-activated, ends when idle
COMES_AND_GOES = ("systemd-fsckd.service",)


def _run(argv: list[str], timeout: float = 120) -> tuple[int, str]:
    """(exit code, output); 127 with no output when it could not run or did not end in time."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return 127, ""
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def _name(lookup, ident: int) -> str:
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def _read(path: str, limit: int = CONTENT_LIMIT) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def file_fact(path: str, content: bool = True) -> dict:
    try:
        info = os.lstat(path)
    except OSError:
        return {"exists": False}
    kind = ("link" if stat.S_ISLNK(info.st_mode) else "directory" if stat.S_ISDIR(info.st_mode)
            else "file" if stat.S_ISREG(info.st_mode) else "other")
    out = {"exists": True, "kind": kind, "mode": f"{stat.S_IMODE(info.st_mode):04o}", "size": info.st_size,
           "owner": _name(pwd.getpwuid, info.st_uid), "group": _name(grp.getgrgid, info.st_gid)}
    if kind == "link":
        out["target"] = os.readlink(path)
    elif kind == "file" and content:
        out["content"] = _read(path)
    return out


def _shadow() -> dict[str, str]:
    entries = {}
    for line in (_read("/etc/shadow") or "").splitlines():
        fields = line.split(":")
        if len(fields) > 1:
            entries[fields[0]] = fields[1]
    return entries


def _password_state(hashed: str | None) -> str:
    if hashed is None:
        return "no shadow entry"
    if hashed == "":
        return "empty"
    return "locked" if hashed.startswith(("!", "*")) else "set"


def _sudoers_lines() -> list[tuple[str, str]]:
    """(file, line) of every rule line in sudoers and its drop-ins (comments and defaults aside)."""
    files = ["/etc/sudoers", *sorted(glob.glob("/etc/sudoers.d/*"))]
    lines = []
    for path in files:
        for line in (_read(path) or "").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "Defaults", "@include", "Cmnd_Alias", "User_Alias",
                                             "Host_Alias", "Runas_Alias")):
                lines.append((path, " ".join(line.split())))
    return lines


def _authorized_keys(home: str) -> list[str]:
    keys = []
    for line in (_read(os.path.join(home, ".ssh/authorized_keys")) or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(line)
    return keys


def user_fact(name: str, sudoers: list[tuple[str, str]] | None = None) -> dict:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return {"exists": False}
    groups = sorted({g.gr_name for g in grp.getgrall() if name in g.gr_mem} |
                    {_name(grp.getgrgid, entry.pw_gid)})
    sudoers = _sudoers_lines() if sudoers is None else sudoers
    own = [f"%{g}" for g in groups] + [name]
    rules = [line for _, line in sudoers if line.split()[0] in own]
    return {"exists": True, "uid": entry.pw_uid, "gid": entry.pw_gid,
            "primary_group": _name(grp.getgrgid, entry.pw_gid), "gecos": entry.pw_gecos, "home": entry.pw_dir,
            "shell": entry.pw_shell, "groups": groups,
            "password": _password_state(_shadow().get(name)), "sudo": rules,
            "authorized_keys": _authorized_keys(entry.pw_dir)}


def group_fact(name: str) -> dict:
    try:
        entry = grp.getgrnam(name)
    except KeyError:
        return {"exists": False}
    primary = [u.pw_name for u in pwd.getpwall() if u.pw_gid == entry.gr_gid]
    return {"exists": True, "gid": entry.gr_gid, "members": sorted(set(entry.gr_mem) | set(primary))}


def service_fact(name: str) -> dict:
    unit = name if "." in name else f"{name}.service"
    _, out = _run(["systemctl", "show", "-p", "UnitFileState", "-p", "ActiveState", "-p", "LoadState", unit])
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    enabled = props.get("UnitFileState") or ("not-found" if props.get("LoadState") == "not-found" else "unknown")
    return {"unit": unit, "enabled": enabled, "active": props.get("ActiveState") or "unknown"}


def _dpkg_status() -> dict[str, tuple[str, str]]:
    """Package name -> (status, version), read from dpkg's database (no process started)."""
    packages: dict[str, tuple[str, str]] = {}
    for stanza in (_read("/var/lib/dpkg/status", 64 << 20) or "").split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            packages[fields["Package"]] = (fields.get("Status", ""), fields.get("Version", ""))
    return packages


def package_fact(name: str, dpkg: dict | None = None) -> dict:
    dpkg = _dpkg_status() if dpkg is None else dpkg
    if dpkg:
        status, version = dpkg.get(name, ("", ""))
        return {"installed": True, "version": version} if status.endswith(" installed") else {"installed": False}
    code, out = _run(["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", name])
    return {"installed": True, "version": out.strip()} if code == 0 else {"installed": False}


def _mounts() -> list[dict]:
    out = []
    for line in (_read("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) >= 6 and len(extra) >= 2:
            out.append({"target": fields[4].replace("\\040", " "), "options": fields[5].split(","),
                        "fstype": extra[0], "source": extra[1],
                        "super_options": extra[2].split(",") if len(extra) > 2 else []})
    return out


def _fstab() -> list[list[str]]:
    return [line.split() for line in (_read("/etc/fstab") or "").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def mount_fact(path: str) -> dict:
    found = [m for m in _mounts() if m["target"] == path.rstrip("/") or (path == "/" and m["target"] == "/")]
    fstab = [entry for entry in _fstab() if len(entry) > 1 and entry[1] == path]
    if not found:
        return {"mounted": False, "fstab": fstab[-1] if fstab else None}
    return {"mounted": True, **found[-1], "fstab": fstab[-1] if fstab else None}


def hostname_fact() -> dict:
    name = socket.gethostname()
    # `hostname -f` asks the resolver (a DNS server may be out of reach in the lab): bounded
    code, fqdn = _run(["hostname", "-f"], timeout=30)
    return {"hostname": name, "fqdn": fqdn.strip() if code == 0 else "(not resolved)",
            "etc_hostname": (_read("/etc/hostname") or "").strip()}


def command_fact(shell: str, timeout: float) -> dict:
    started = time.monotonic()
    try:
        proc = subprocess.run(["/bin/sh", "-c", shell], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"exit": None, "error": f"timed out after {timeout:.0f}s"}
    return {"exit": proc.returncode, "stdout": proc.stdout.decode("utf-8", "replace")[:CONTENT_LIMIT],
            "stderr": proc.stderr.decode("utf-8", "replace")[:CONTENT_LIMIT],
            "seconds": round(time.monotonic() - started, 3)}


def fact(query: dict) -> dict:
    kind, name = query.get("kind"), query.get("name") or ""
    if kind == "file":
        return file_fact(name, bool(query.get("content", True)))
    if kind == "user":
        return user_fact(name)
    if kind == "group":
        return group_fact(name)
    if kind == "service":
        return service_fact(name)
    if kind == "package":
        return package_fact(name)
    if kind == "mount":
        return mount_fact(name)
    if kind == "hostname":
        return hostname_fact()
    if kind == "command":
        return command_fact(name, float(query.get("timeout") or 60))
    return {"error": f"unknown fact {kind!r}"}


# -- the whole state, for --compare ------------------------------------------------------------

def _boot_time() -> float:
    for line in (_read("/proc/stat") or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def _skipped(path: str) -> bool:
    return path.startswith(AGENT_OWN) or path.startswith(VOLATILE) or path.startswith(COVERED) or \
        path.startswith("/etc/ssh/ssh_host_") or path.startswith(NETWORK_DIRS) or "/.ssh/" in path or \
        path.startswith(("/var/tmp/systemd-private", "/tmp/systemd-private"))


def _made_during_boot(directory: str, since: float) -> bool:
    """Nothing in it is older than ``since`` (what the state leaves out aside), and it holds something
    or is itself that new: a directory the boot made, not one that merely changed."""
    try:
        with os.scandir(directory) as entries:
            kept = [e for e in entries if not _skipped(e.path) and not _skipped(e.path + "/")]
            return all(e.stat(follow_symlinks=False).st_ctime >= since for e in kept) and \
                (bool(kept) or os.path.getctime(directory) >= since and not os.listdir(directory))
    except OSError:
        return False


def _changed_files(since: float) -> dict[str, dict]:
    files: dict[str, dict] = {}
    for top in WALKED:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not _skipped(os.path.join(dirpath, d) + "/")]
            for name in [*filenames, *dirnames]:
                path = os.path.join(dirpath, name)
                if _skipped(path):
                    continue
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if max(info.st_mtime, info.st_ctime) < since:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    # a directory made during the boot (nothing in it older): its mode and owner count
                    if min(info.st_ctime, info.st_mtime) >= since and _made_during_boot(path, since):
                        files[path + "/"] = file_fact(path, content=False)
                    continue
                record = file_fact(path, content=False)
                if record.get("kind") == "file":
                    data = None
                    try:
                        with open(path, "rb") as handle:
                            data = handle.read(CONTENT_LIMIT + 1)
                    except OSError:
                        pass
                    if data is not None:
                        record["sha256"] = hashlib.sha256(data).hexdigest()
                        if len(data) <= TEXT_LIMIT and b"\0" not in data:
                            record["text"] = data.decode("utf-8", "replace")
                files[path] = record
    return files


def _network_files() -> dict[str, str]:
    out = {}
    for top in NETWORK_DIRS:
        paths = [top] if os.path.isfile(top) else sorted(glob.glob(os.path.join(top, "*")))
        for path in paths:
            if os.path.isfile(path):
                out[path] = _read(path, TEXT_LIMIT) or ""
    return out


def _units(argv: list[str]) -> list[str] | None:
    """The first column of systemctl's listing (None when systemctl did not answer)."""
    code, out = _run(argv)
    units = sorted(line.split()[0] for line in out.splitlines() if line.strip())
    return units if units or code == 0 else None


def _enabled_units() -> list[str]:
    """Units enabled in /etc (the links ``systemctl enable`` makes), read without asking systemd,
    which can be slow to list unit files on a busy machine."""
    found = set()
    for link in glob.glob("/etc/systemd/system/*.wants/*") + glob.glob("/etc/systemd/system/*.requires/*"):
        found.add(os.path.basename(link))
    return sorted(found)


def _not_agents(units: list[str] | None) -> list[str] | None:
    if units is None:
        return None
    return [u for u in units if not AGENT_UNITS.match(u) and "lab" not in u and u not in COMES_AND_GOES]


def _packages_since(since: float) -> dict[str, str]:
    installed, dpkg = {}, _dpkg_status()
    for path in glob.glob("/var/lib/dpkg/info/*.list"):
        try:
            if os.stat(path).st_mtime < since:
                continue
        except OSError:
            continue
        name = os.path.basename(path)[:-5].split(":")[0]
        installed[name] = package_fact(name, dpkg).get("version", "?")
    return installed


def _addresses() -> list[str]:
    _, out = _run(["ip", "-o", "addr", "show"])
    return sorted(" ".join(line.split()[1:4]) for line in out.splitlines() if " lo " not in f" {line.split()[1]} ")


# cloudseed finishes a slow SSH host key (RSA) in the background after its stages (agent/hostkeys.py);
# the directory goes when the last one is installed
BACKGROUND_KEYS = "/run/cloudseed/hostkeys"


def _alive(pid_file: str) -> bool:
    try:
        with open(pid_file) as handle:
            pid = int(handle.read().strip())
        with open(f"/proc/{pid}/stat") as handle:
            return not handle.read().split(") ", 1)[-1].startswith("Z")
    except (OSError, ValueError):
        return False


def _wait_for_background_keys(limit: float = 600.0, stalled: float = 15.0) -> list[str]:
    """The state is what the agent leaves: wait (bounded: cloudseed's own helper gives up after 600 s)
    for host keys it is still making. Returns the types not in place when the wait ends: still being
    made at the limit, or made and not installed ``stalled`` seconds after their ssh-keygen ended
    (the helper that installs them is gone)."""
    deadline, since = time.monotonic() + limit, None
    while True:
        pid_files = glob.glob(os.path.join(BACKGROUND_KEYS, "*.pid"))
        pending = sorted(os.path.basename(p)[:-4] for p in pid_files)
        if not pending or time.monotonic() >= deadline:
            return pending
        if any(_alive(p) for p in pid_files):
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= stalled:
            return pending
        time.sleep(0.5)


def collect(since: float | None = None) -> dict:
    """The system state an agent leaves; ``since``: files changed after this (default: boot)."""
    since = since or _boot_time()
    pending = _wait_for_background_keys()
    sudoers = _sudoers_lines()
    users = {}
    for entry in pwd.getpwall():
        if entry.pw_uid >= 1000 and entry.pw_name != "nobody" or entry.pw_name == "root":
            users[entry.pw_name] = user_fact(entry.pw_name, sudoers)
    groups = {g.gr_name: {"gid": g.gr_gid, "members": sorted(g.gr_mem)} for g in grp.getgrall()}
    _, routes = _run(["ip", "route", "show"])
    return {
        "since": since,
        "files": _changed_files(since),
        "users": users,
        "groups": groups,
        "sudoers": sorted({line for _, line in sudoers}),
        "hostname": hostname_fact(),
        "hosts": _read("/etc/hosts") or "",
        "mounts": sorted(f"{m['source']} {m['target']} {m['fstype']}" for m in _mounts()
                         if m["fstype"] not in ("proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "cgroup2",
                                                "securityfs", "pstore", "bpf", "debugfs", "tracefs", "mqueue",
                                                "hugetlbfs", "configfs", "fusectl", "autofs", "binfmt_misc",
                                                "efivarfs", "ramfs", "rpc_pipefs")),
        "fstab": [" ".join(entry) for entry in _fstab()],
        "services_enabled": _not_agents(_enabled_units()),
        "services_active": _not_agents(_units(["systemctl", "list-units", "--type=service", "--state=active",
                                               "--no-legend", "--no-pager", "--plain"])),
        "packages_installed": _packages_since(since),
        "network_files": _network_files(),
        "addresses": _addresses(),
        "routes": sorted(line.strip() for line in routes.splitlines() if line.strip()),
        "ssh_host_keys": sorted(os.path.basename(p) for p in glob.glob("/etc/ssh/ssh_host_*_key.pub")),
        # for the reader, not compared: keys made early and not needed (ssh_keys given) stay there too
        "ssh_host_keys_left_staged": pending,
        "timezone": os.path.realpath("/etc/localtime"),
    }
