"""Making a user on Debian by writing the account files as ``useradd`` would, without running it.

Under emulation each ``useradd`` costs 0.4-0.5 s of a first boot's path to sshd: its dynamic
linking (libsemanage, libselinux, libpcre2, libsepol, libaudit) and six processes it starts to
flush nscd and sss caches the image does not have. For the plainly simple case, this file writes
what Debian bookworm's ``useradd [-c GECOS] [-d HOME] [-s SHELL] [-u UID] [-G GROUPS] -m|-M
[-l] NAME`` writes, byte for byte (``tests/agent/modules/test_account_files.py`` runs both over a
matrix of users in two copies of a real bookworm tree and compares every file):

- under the lock every shadow-utils tool takes first (``/etc/.pwd.lock``, an fcntl write lock, as
  ``lckpwdf`` takes it), re-reading the files once it holds it;
- the UID as ``useradd`` chooses it (``login.defs`` ``UID_MIN``/``UID_MAX``: one more than the
  highest in the range, else the first free one), the user's group (``USERGROUPS_ENAB``) with the
  GID equal to the UID when that GID is free and in ``GID_MIN``..``GID_MAX``, else chosen the same
  way; subordinate IDs in ``/etc/subuid``/``/etc/subgid`` when those files exist and the UID is in
  the range (the first free range of ``SUB_UID_COUNT`` from ``SUB_UID_MIN``; the file written back
  sorted, as ``useradd`` sorts it);
- the shadow entry (``!``, today's day, ``PASS_MIN_DAYS``/``PASS_MAX_DAYS``/``PASS_WARN_AGE``),
  the group and gshadow entries, the user appended to each supplementary group's members (in
  ``/etc/group`` and ``/etc/gshadow``), each changed file's previous content kept as ``FILE-``
  (mode & 0664, owner and times, in whole seconds, of the old file) as shadow-utils keeps it;
- the home made with ``HOME_MODE`` (else ``0777 & ~UMASK``), owned by the user, the files of
  ``/etc/skel`` copied into it with each one's mode and times, owned by the user.

Anything else (another distribution, SELinux, name services other than files/systemd, nscd or
sss present, a system user, a primary group, no user group, expiry dates, a mail spool to make,
a home that exists, a skeleton with directories, links or extended attributes, lastlog/faillog records to
reset, a lock file of a tool at work, any setting of login.defs or /etc/default/useradd not known
here, a line of the files that is not plainly an entry...) returns False having changed nothing,
and the caller runs ``useradd`` as before. The passwd entry is written first, so a boot killed
part-way leaves a user that exists, which ``users_groups`` sees as half made and makes again.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time

from cloudseed.core.root import RootError, TargetRoot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SELINUXFS_ENFORCE = "/sys/fs/selinux/enforce"
LOCK_FILE = "/etc/.pwd.lock"
LOCK_WAIT = 15.0  # lckpwdf's own limit
# the settings of login.defs this path implements, and those that do not concern useradd's result here
_LOGIN_DEFS_USED = {"UID_MIN", "UID_MAX", "GID_MIN", "GID_MAX", "SUB_UID_MIN", "SUB_UID_MAX", "SUB_UID_COUNT",
                    "SUB_GID_MIN", "SUB_GID_MAX", "SUB_GID_COUNT", "USERGROUPS_ENAB", "UMASK", "HOME_MODE",
                    "PASS_MAX_DAYS", "PASS_MIN_DAYS", "PASS_WARN_AGE", "MAIL_DIR"}
_LOGIN_DEFS_OTHER = {"FAILLOG_ENAB", "LOG_UNKFAIL_ENAB", "LOG_OK_LOGINS", "SYSLOG_SU_ENAB", "SYSLOG_SG_ENAB",
                     "FTMP_FILE", "SU_NAME", "HUSHLOGIN_FILE", "ENV_SUPATH", "ENV_PATH", "TTYGROUP", "TTYPERM",
                     "ERASECHAR", "KILLCHAR", "LOGIN_RETRIES", "LOGIN_TIMEOUT", "CHFN_RESTRICT", "DEFAULT_HOME",
                     "ENCRYPT_METHOD", "SHA_CRYPT_MIN_ROUNDS", "SHA_CRYPT_MAX_ROUNDS", "YESCRYPT_COST_FACTOR",
                     "NONEXISTENT", "PREVENT_NO_AUTH", "SYS_UID_MIN", "SYS_UID_MAX", "SYS_GID_MIN", "SYS_GID_MAX",
                     "CREATE_HOME", "USERDEL_CMD", "LASTLOG_UID_MAX", "ENV_TZ", "ENV_HZ", "CHSH_AUTH",
                     "LOGIN_STRING", "MOTD_FILE", "ISSUE_FILE", "MAIL_CHECK_ENAB", "QUOTAS_ENAB", "FAIL_DELAY"}
_DEFAULTS_KNOWN = {"SHELL", "HOME", "SKEL", "GROUP", "INACTIVE", "EXPIRE", "CREATE_MAIL_SPOOL", "LOG_INIT"}
_SPEC_KEYS = {"gecos", "homedir", "shell", "uid", "groups", "no_create_home", "no_log_init", "system",
              "no_user_group", "primary_group", "expiredate", "inactive", "selinux_user"}
_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_TEXT = re.compile(r"[ -9;-~]*")  # printable ASCII without ':'
_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*")
_DB_FILES = ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow")
_SUB_FILES = ("/etc/subuid", "/etc/subgid")
_FIELDS = {"/etc/passwd": 7, "/etc/shadow": 9, "/etc/group": 4, "/etc/gshadow": 4, "/etc/subuid": 3,
           "/etc/subgid": 3}
LASTLOG_RECORD, FAILLOG_RECORD = 292, 32


class NotSimple(Exception):
    """The case is not one this file makes as useradd would (the reason, for the log)."""


def add_user_directly(root: TargetRoot, name: str, spec: dict[str, Any], os_release: dict[str, str],
                      log: Any = None) -> bool:
    """Make ``name`` as ``useradd`` would; False (nothing changed) when the case is not plainly simple.

    OSError or RootError when a write fails part-way (the user may then be half made)."""
    try:
        _check_system(root, name, spec, os_release)
    except NotSimple as e:
        if log is not None:
            log.info("useradd %s: run as a command (%s)", name, e)
        return False
    fd = _lock(root)
    try:
        try:
            plan = _plan(root, name, spec)
        except NotSimple as e:
            if log is not None:
                log.info("useradd %s: run as a command (%s)", name, e)
            return False
        _apply(root, plan)
    finally:
        os.close(fd)  # closing the descriptor drops the fcntl lock
    return True


# ---------------------------------------------------------------------- what may be done here
def _check_system(root: TargetRoot, name: str, spec: dict[str, Any], os_release: dict[str, str]) -> None:
    if os_release.get("ID") != "debian":
        raise NotSimple("not Debian")
    if os.path.exists(SELINUXFS_ENFORCE):
        raise NotSimple("SELinux is enabled")
    unknown = set(k for k, v in spec.items() if v not in (None, "", False, [])) - _SPEC_KEYS
    if unknown:
        raise NotSimple(f"options {sorted(unknown)}")
    for key in ("system", "no_user_group", "primary_group", "expiredate", "inactive", "selinux_user"):
        if spec.get(key):
            raise NotSimple(key)
    if not _NAME.fullmatch(name):
        raise NotSimple("a name outside [a-z_][a-z0-9_-]*")
    for program in ("/usr/sbin/nscd", "/usr/sbin/sss_cache", "/usr/sbin/sssd"):
        if root.exists(program):
            raise NotSimple(f"{program} exists")
    if root.exists("/usr/etc/skel"):
        raise NotSimple("/usr/etc/skel exists")
    sources = {}
    for line in root.read_text("/etc/nsswitch.conf", default="").splitlines():
        database, sep, value = line.split("#", 1)[0].partition(":")
        if sep:
            sources[database.strip()] = value.split()
    for database in ("passwd", "group", "shadow", "gshadow"):
        if not sources.get(database) or not set(sources[database]) <= {"files", "systemd"}:
            raise NotSimple(f"nsswitch {database}: {' '.join(sources.get(database, [])) or 'not set'}")


def _settings(root: TargetRoot) -> tuple[dict[str, str], dict[str, str]]:
    defs: dict[str, str] = {}
    for line in root.read_text("/etc/login.defs", default="").splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] not in _LOGIN_DEFS_USED | _LOGIN_DEFS_OTHER:
            raise NotSimple(f"login.defs {words[0]}")
        defs[words[0]] = words[1].strip('"') if len(words) > 1 else ""
    if not root.isfile("/etc/default/useradd"):
        raise NotSimple("no /etc/default/useradd")
    defaults: dict[str, str] = {}
    for line in root.read_text("/etc/default/useradd").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or key not in _DEFAULTS_KNOWN or '"' in value or "'" in value:
            raise NotSimple(f"/etc/default/useradd: {line}")
        defaults[key] = value
    if defs.get("USERGROUPS_ENAB", "yes").lower() != "yes":
        raise NotSimple("USERGROUPS_ENAB is not yes")
    if defaults.get("INACTIVE", "-1") != "-1" or defaults.get("EXPIRE", ""):
        raise NotSimple("INACTIVE or EXPIRE set in /etc/default/useradd")
    if defaults.get("CREATE_MAIL_SPOOL", "no").lower() != "no":
        raise NotSimple("CREATE_MAIL_SPOOL")
    return defs, defaults


def _number(defs: dict[str, str], key: str, default: int) -> int:
    value = defs.get(key)
    if value is None:
        return default
    try:  # strtol's base 0, as shadow-utils reads numbers: 0x.. hexadecimal, 0.. octal
        digits = value.lstrip("-")
        base = 16 if digits[:2].lower() == "0x" else 8 if digits[:1] == "0" and len(digits) > 1 else 10
        return int(value, base)
    except ValueError:
        raise NotSimple(f"login.defs {key} {value!r}") from None


def _read_db(root: TargetRoot, inner: str) -> tuple[bytes, list[list[str]]]:
    try:
        raw = root.read_bytes(inner)
    except FileNotFoundError:
        raise NotSimple(f"no {inner}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotSimple(f"{inner} is not UTF-8") from None
    if text and not text.endswith("\n"):
        raise NotSimple(f"{inner} does not end with a newline")
    entries = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) != _FIELDS[inner] or not fields[0] or fields[0][0] in "+-#" or line != line.strip():
            raise NotSimple(f"{inner}: a line that is not plainly an entry")
        entries.append(fields)
    return raw, entries


def _free_id(used: set[int], low: int, high: int) -> int:
    """One more than the highest used in [low, high], else the first free one (useradd's choice)."""
    inside = [n for n in used if low <= n <= high]
    if not inside:
        return low
    if max(inside) < high:
        return max(inside) + 1
    for candidate in range(low, high + 1):
        if candidate not in used:
            return candidate
    raise NotSimple(f"no free ID in {low}..{high}")


def _free_range(ranges: list[tuple[int, int]], low: int, high: int, count: int) -> int:
    """The first free range of ``count`` IDs in [low, high] among ``ranges`` (sorted), as useradd finds it."""
    if count <= 0:
        raise NotSimple("no subordinate ID count")
    start = low
    for first, length in ranges:
        if min(first, high + 1) - start >= count:
            return start
        start = max(start, first + length)
        if start > high:
            raise NotSimple("no free subordinate range")
    if high - start + 1 >= count:
        return start
    raise NotSimple("no free subordinate range")


def _sorted_ranges(raw: bytes, entries: list[list[str]]) -> tuple[str, list[tuple[int, int]]]:
    """The file's lines as shadow-utils writes them back (sorted by start, count, owner) and its ranges."""
    if not all(e[1].isdigit() and e[2].isdigit() for e in entries):
        raise NotSimple("a subordinate range that is not two numbers")
    lines = raw.decode().splitlines(True)
    order = sorted(range(len(entries)), key=lambda i: (int(entries[i][1]), int(entries[i][2]), entries[i][0]))
    return "".join(lines[i] for i in order), [(int(entries[i][1]), int(entries[i][2])) for i in order]


def _plan(root: TargetRoot, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Every file's new content and the home to make, from the files as they are under the lock."""
    defs, defaults = _settings(root)
    for inner in (*_DB_FILES, *_SUB_FILES):
        if root.exists(f"{inner}.lock"):
            raise NotSimple(f"{inner}.lock exists")
    dbs = {inner: _read_db(root, inner) for inner in _DB_FILES}
    users = dbs["/etc/passwd"][1]
    groups = dbs["/etc/group"][1]
    if any(e[0] == name for inner in _DB_FILES for e in dbs[inner][1]):
        raise NotSimple(f"{name} is already in the account files")
    uid_min, uid_max = _number(defs, "UID_MIN", 1000), _number(defs, "UID_MAX", 60000)
    gid_min, gid_max = _number(defs, "GID_MIN", 1000), _number(defs, "GID_MAX", 60000)
    used_uids = {int(e[2]) for e in users if e[2].isdigit()}
    used_gids = {int(e[2]) for e in groups if e[2].isdigit()}
    if spec.get("uid") not in (None, ""):
        uid = int(str(spec["uid"]))
        if uid in used_uids or not 0 <= uid < 2**31:
            raise NotSimple("the UID is taken")
    else:
        uid = _free_id(used_uids, uid_min, uid_max)
    gid = uid if gid_min <= uid <= gid_max and uid not in used_gids else _free_id(used_gids, gid_min, gid_max)
    wanted = [str(g) for g in spec.get("groups") or []]
    if len(set(wanted)) != len(wanted):
        raise NotSimple("a supplementary group named twice")
    for group in wanted:
        if not any(e[0] == group for e in groups) or not any(e[0] == group for e in dbs["/etc/gshadow"][1]):
            raise NotSimple(f"group {group} is not in /etc/group and /etc/gshadow")
    gecos = str(spec.get("gecos") or "")
    if not _TEXT.fullmatch(gecos):
        raise NotSimple("the gecos is not plain ASCII")
    home = str(spec.get("homedir") or f"{defaults.get('HOME', '/home').rstrip('/')}/{name}")
    shell = str(spec.get("shell") or defaults.get("SHELL", ""))
    plain = _PATH.fullmatch(home) and not set(home.split("/")[1:]) & {"", ".", ".."}
    if not plain or not _PATH.fullmatch(shell):
        raise NotSimple("a home or shell outside plain absolute paths")
    make_home = not spec.get("no_create_home")
    if make_home and (root.exists(home) or not root.isdir(os.path.dirname(home))):
        raise NotSimple("the home exists or its parent does not")
    if not spec.get("no_log_init"):
        for inner, record in (("/var/log/lastlog", LASTLOG_RECORD), ("/var/log/faillog", FAILLOG_RECORD)):
            if root.exists(inner) and os.path.getsize(root.path(inner)) > uid * record:
                raise NotSimple(f"{inner} has a record to reset")
    skel = defaults.get("SKEL", "/etc/skel")
    tree = _skeleton(root, skel) if make_home and root.isdir(skel) else []

    def line(fields: list[str]) -> str:
        return ":".join(fields) + "\n"

    def with_member(inner: str, member_field: int) -> str:
        out = ""
        for raw_line, fields in zip(dbs[inner][0].decode().splitlines(True), dbs[inner][1]):
            if fields[0] in wanted:
                if line(fields) != raw_line:
                    raise NotSimple(f"{inner}: the line of {fields[0]} is not as shadow-utils writes it")
                members = [m for m in fields[member_field].split(",") if m]
                fields = fields[:member_field] + [",".join(members + [name])]
                raw_line = line(fields)
            out += raw_line
        return out

    days = _today()
    ages = [_number(defs, key, -1) for key in ("PASS_MIN_DAYS", "PASS_MAX_DAYS", "PASS_WARN_AGE")]
    new = {
        "/etc/passwd": dbs["/etc/passwd"][0].decode() + line([name, "x", str(uid), str(gid), gecos, home, shell]),
        "/etc/shadow": dbs["/etc/shadow"][0].decode() + line(
            [name, "!", str(days)] + ["" if a == -1 else str(a) for a in ages]
            + ["", "", ""]),
        "/etc/group": with_member("/etc/group", 3) + line([name, "x", str(gid), ""]),
        "/etc/gshadow": with_member("/etc/gshadow", 3) + line([name, "!", "", ""]),
    }
    if uid_min <= uid <= uid_max:
        for inner, prefix in zip(_SUB_FILES, ("SUB_UID", "SUB_GID")):
            if not root.exists(inner):
                continue
            raw, entries = _read_db(root, inner)
            if any(e[0] == name for e in entries):
                raise NotSimple(f"{name} already has subordinate IDs")
            count = _number(defs, f"{prefix}_COUNT", 65536)
            text, ranges = _sorted_ranges(raw, entries)
            start = _free_range(ranges, _number(defs, f"{prefix}_MIN", 100000),
                                _number(defs, f"{prefix}_MAX", 600100000), count)
            new[inner] = text + f"{name}:{start}:{count}\n"
    umask = _number(defs, "UMASK", 0o22)
    home_mode = _number(defs, "HOME_MODE", 0o777 & ~umask)
    return {"name": name, "uid": uid, "gid": gid, "new": new, "old": {k: v[0] for k, v in dbs.items()},
            "home": home if make_home else None, "home_mode": home_mode, "skel": skel, "tree": tree}


def _today() -> int:
    """Days since the epoch, as shadow-utils counts them (honouring SOURCE_DATE_EPOCH as it does)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    now = int(epoch) if epoch.isdigit() else int(time.time())
    return now // 86400


def _skeleton(root: TargetRoot, skel: str) -> list[tuple[str, os.stat_result]]:
    """The skeleton's files (names, sorted) when it holds only plain files."""
    top = root.path(skel)
    entries: list[tuple[str, os.stat_result]] = []
    inodes: set[tuple[int, int]] = set()
    for entry in sorted(os.listdir(top)):
        host = os.path.join(top, entry)
        info = os.lstat(host)
        # bookworm's useradd copies a subdirectory of the skeleton empty, with the time of the copy
        # (seen in the differential test): not reproduced here, left to useradd
        if not stat.S_ISREG(info.st_mode):
            raise NotSimple(f"{skel} holds something other than plain files")
        if (info.st_dev, info.st_ino) in inodes:
            raise NotSimple(f"{skel} holds hard links to one file")
        inodes.add((info.st_dev, info.st_ino))
        try:
            if os.listxattr(host, follow_symlinks=False):
                raise NotSimple(f"{skel} holds extended attributes")
        except OSError as e:
            if e.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
        entries.append((entry, info))
    return entries


# ---------------------------------------------------------------------- doing it
def _lock(root: TargetRoot) -> int:
    """The shadow-utils lock (``lckpwdf``'s: an fcntl write lock on /etc/.pwd.lock), waited for up to 15 s."""
    fd = os.open(root.path(LOCK_FILE), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN) or time.monotonic() > deadline:
                os.close(fd)
                raise RootError(f"cannot lock {LOCK_FILE}: {e.strerror}") from None
        time.sleep(0.05)


def _apply(root: TargetRoot, plan: dict[str, Any]) -> None:
    # passwd first: from then on the user exists, and a kill leaves it half made (made again next boot)
    for inner in ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", *_SUB_FILES):
        if inner not in plan["new"]:
            continue
        old = os.stat(root.path(inner))
        backup = root.write(inner + "-", root.read_bytes(inner), mode=stat.S_IMODE(old.st_mode) & 0o664,
                            owner=old.st_uid, group=old.st_gid)
        os.utime(backup, (int(old.st_atime), int(old.st_mtime)))  # shadow-utils' utime(): whole seconds
        root.write(inner, plan["new"][inner], keep_mode=True)
    if plan["home"] is None:
        return
    uid, gid, home = plan["uid"], plan["gid"], plan["home"]
    root.makedirs(home, mode=plan["home_mode"], owner=uid, group=gid)
    source = root.path(plan["skel"])
    for entry, info in plan["tree"]:
        with open(os.path.join(source, entry), "rb") as handle:
            written = root.write(f"{home}/{entry}", handle.read(), mode=stat.S_IMODE(info.st_mode),
                                 owner=uid, group=gid)
        os.utime(written, ns=(info.st_atime_ns, info.st_mtime_ns))
