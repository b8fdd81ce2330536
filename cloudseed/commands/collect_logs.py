"""``cloudseed collect-logs [--tarfile F] [--include-userdata] [--redact-sensitive]``: one tarball for support.

cloud-init's ``collect-logs``: a ``.tar.gz`` with one directory ``cloud-init-logs-DATE/`` holding
what cloud-init 24.3+ collects, by its rules, at cloudseed's paths: the agent's logs, every file at
the top of the run directory (``/run/cloudseed``: status, result, instance data...), the
configuration (``/etc/cloud``, ``/etc/cloudseed``, without ``keys/`` and ``templates/``), the files
at the top of ``data/``, ``handlers/`` and ``seed/`` of cloud-init's and cloudseed's data
directories and of the current instance's directory, the installer's logs (subiquity, curtin), the
journal of this boot and the previous one, the kernel's messages (only with ``--include-userdata``,
as 24.3+ collects them only when it collects sensitive files) and the versions.
``tests/compat/test_collect_logs_reference.py`` compares the listing with cloud-init 26.2's.

One deliberate difference from 24.3+ (CVE-2023-1786): cloud-init now collects everything by default
and warns, with ``--redact-sensitive`` to leave out what is not world-readable. cloudseed keeps
secrets out by default: a file that is not world-readable (the sensitive instance data, the merged
config, the raw user-data, the seeds, configuration files only root reads) is only collected with
``--include-userdata`` (root only), and every secret value the sensitive instance data names
(passwords, keys, tokens, credentials) is replaced wherever it appears in a collected file unless
``--include-userdata`` is given without ``--redact-sensitive`` (``--redact``, 22.4's spelling).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time

HELP = "collect logs, status and instance data into a tarball for support (cloud-init collect-logs)"

CONFIG_DIRS = ("/etc/cloud", "/etc/cloudseed")
DATA_DIRS = ("/var/lib/cloud", "/var/lib/cloudseed")
# the installer's files cloud-init collects (Ubuntu's subiquity and curtin), the second list only
# with the sensitive ones
INSTALLER_FILES = (
    "/var/log/installer/ubuntu_desktop_installer.log", "/var/log/installer/subiquity-server-debug.log",
    "/var/log/installer/subiquity-client-debug.log", "/var/log/installer/curtin-install.log",
    "/var/log/installer/subiquity-curtin-install.conf",
    "/var/log/installer/curtin-install/subiquity-initial.conf",
    "/var/log/installer/curtin-install/subiquity-curthooks.conf",
    "/var/log/installer/curtin-install/subiquity-extract.conf",
    "/var/log/installer/curtin-install/subiquity-partitioning.conf",
    "/var/log/installer/curtin-error-logs.tar", "/var/log/installer/curtin-errors.tar",
    "/var/log/installer/block/probe-data.json",
)
INSTALLER_SENSITIVE_FILES = ("/var/log/installer/autoinstall-user-data", "/autoinstall.yaml",
                             "/etc/cloud/cloud.cfg.d/99-installer.cfg")
REPLACEMENT = "REDACTED"
_SECRET_WORDS = ("pass", "secret", "token", "credential", "private", "key", "hash", "password")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tarfile", "-t", default="cloud-init.tar.gz", help="the tarball to write")
    parser.add_argument("--include-userdata", "-u", action="store_true",
                        help="also the user-data, merged config and sensitive instance data (root only)")
    parser.add_argument("--redact-sensitive", "-r", "--redact", dest="redact", action="store_true",
                        help="replace secret values even in what --include-userdata adds")
    parser.add_argument("--verbose", "-v", action="count", default=0, help="say what is collected")


def secret_values(sensitive: object) -> set[str]:
    """The secret strings in the sensitive instance data: what its ``sensitive_keys`` name, and
    every string under a key that sounds like a secret (password, key, token...), 6 characters or more."""
    found: set[str] = set()
    if not isinstance(sensitive, dict):
        return found

    def walk(node: object, secret: bool) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, secret or any(word in str(key).lower() for word in _SECRET_WORDS))
        elif isinstance(node, list):
            for value in node:
                walk(value, secret)
        elif isinstance(node, str) and secret and len(node) >= 6:
            found.add(node)
            found.update(line for line in node.splitlines() if len(line) >= 6)

    walk(sensitive, False)
    for key_path in sensitive.get("sensitive_keys", []):
        node: object = sensitive
        for part in key_path.split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        if key_path not in ("merged_cfg", "ds/user_data", "ds/vendor_data"):  # blobs: their secrets by key
            walk(node, True)
    return found


def _redact(data: bytes, secrets: set[str]) -> bytes:
    for secret in sorted(secrets, key=len, reverse=True):
        data = data.replace(secret.encode("utf-8", "surrogateescape"), REPLACEMENT.encode())
    return data


def _command(root, argv: list[str]) -> bytes | None:
    if not root.is_live or not root.which(argv[0]):
        return None
    try:
        result = root.run(argv, check=False, timeout=30)
    except Exception as e:  # a tool that fails is noted in the tarball, not a failure of the collection
        return f"{' '.join(argv)}: {e}\n".encode()
    return (result.stdout + result.stderr).encode("utf-8", "replace")


def _config_files(root, top: str) -> list[str]:
    """Every file under ``top`` but its ``keys/`` and ``templates/`` (as cloud-init 24.x collects /etc/cloud)."""
    found: list[str] = []
    for name in root.listdir(top):
        inner = f"{top}/{name}"
        if root.isdir(inner) and not root.islink(inner):
            if name not in ("keys", "templates"):
                found += _config_files(root, inner)
        elif inner not in INSTALLER_SENSITIVE_FILES:
            found.append(inner)
    return found


def _top_files(root, top: str) -> list[str]:
    """The entries at the top of ``top`` (the files among them are collected; directories are not, nor
    links: at cloud-init's paths they are the agent's links to its own files, collected where they are)."""
    return [f"{top}/{name}" for name in root.listdir(top) if not root.islink(f"{top}/{name}")]


def _world_readable(root, inner: str) -> bool:
    """A file others may read anyway; anything else is sensitive (cloud-init 24.3's rule too)."""
    import stat

    return bool(root.stat(inner).st_mode & stat.S_IROTH)


def collect(root, include_userdata: bool) -> dict[str, bytes]:
    """Name in the tarball -> content, before redaction."""
    from cloudseed import __version__
    from cloudseed.agent.scripts import OUTPUT_LOG
    from cloudseed.agent.state import LOG_FILE, Paths

    paths = Paths(root)
    files: dict[str, bytes] = {"version": f"cloudseed {__version__}\n".encode()}
    logs = [LOG_FILE, OUTPUT_LOG] + [legacy for legacy in ("/var/log/cloud-init.log", "/var/log/cloud-init-output.log")
                                     if not root.islink(legacy)]  # a real log an earlier cloud-init left
    wanted = list(INSTALLER_FILES) + (list(INSTALLER_SENSITIVE_FILES) if include_userdata else [])
    wanted += [path for top in CONFIG_DIRS for path in _config_files(root, top)]
    wanted += [path for top in DATA_DIRS for sub in ("data", "handlers", "seed")
               for path in _top_files(root, f"{top}/{sub}")]
    wanted += _top_files(root, paths.instance_link) + _top_files(root, paths.run_dir)
    for inner in logs + wanted:
        try:
            if not root.isfile(inner) or (inner not in logs and not include_userdata
                                          and not _world_readable(root, inner)):
                continue
            files[inner.lstrip("/")] = root.read_bytes(inner)
        except OSError:
            continue
    commands = [("journal.txt", ["journalctl", "--boot=0", "-o", "short-precise"]),
                ("journal-previous.txt", ["journalctl", "--boot=-1", "-o", "short-precise"]),
                ("dpkg-version", ["dpkg-query", "--show", "cloudseed"])]
    if include_userdata:
        commands.append(("dmesg.txt", ["dmesg"]))
    for name, argv in commands:
        out = _command(root, argv)
        if out is not None:
            files[name] = out
    return files


def run(args: argparse.Namespace) -> int:
    import tarfile

    from cloudseed.agent.state import Paths, read_json
    from cloudseed.core.root import TargetRoot

    if args.include_userdata and os.geteuid() != 0:
        print("collect-logs: --include-userdata needs root", file=sys.stderr)
        return 1
    root = TargetRoot(args.root)
    files = collect(root, args.include_userdata)
    redact = args.redact or not args.include_userdata
    if redact:
        secrets = secret_values(read_json(root, Paths(root).instance_data_sensitive_file))
        files = {name: _redact(data, secrets) for name, data in files.items()}
    top = "cloud-init-logs-" + time.strftime("%Y-%m-%d", time.gmtime())
    tarball = os.path.abspath(args.tarfile)
    # may hold user-data: private, and a new file (an existing tarball's mode is not kept), whole or nothing
    try:
        fd, partial = tempfile.mkstemp(prefix=".collect-logs-", dir=os.path.dirname(tarball))
    except OSError as e:
        print(f"collect-logs: cannot write {tarball}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w:gz") as tar:
            for name, data in sorted(files.items()):
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size = len(data)
                info.mtime = int(time.time())
                info.mode = 0o600 if name.startswith(("run/", "var/lib/")) or args.include_userdata else 0o644
                tar.addfile(info, io.BytesIO(data))
                if args.verbose:
                    print(f"collect-logs: {name} ({len(data)} bytes)", file=sys.stderr)
        os.replace(partial, tarball)
    except OSError as e:
        os.unlink(partial)
        print(f"collect-logs: cannot write {tarball}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"Wrote {tarball}")
    return 0
