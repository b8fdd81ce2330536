"""``cloudseed collect-logs [--tarfile F] [--include-userdata] [--redact-sensitive]``: one tarball for support.

cloud-init's ``collect-logs``: a ``.tar.gz`` with one directory ``cloud-init-logs-DATE/`` holding
the agent's logs, the boot status and result, the world-readable instance data, this boot's
records under ``run/cloudseed/``, the configuration (``/etc/cloud``, ``/etc/cloudseed``, without
``keys/`` and ``templates/``), the kernel's messages, the journal of this boot and the previous one,
and the versions: the files cloud-init 24.3+ collects, at cloudseed's paths.

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
import time

HELP = "collect logs, status and instance data into a tarball for support (cloud-init collect-logs)"

PLAIN_RUN_FILES = ("status.json", "result.json", "instance-data.json", "boot.json", "enabled", "disabled")
SENSITIVE_RUN_FILES = ("instance-data-sensitive.json", "combined-cloud-config.json", "datasource.json")
USER_DATA_FILES = ("user-data.txt", "vendor-data.txt", "vendor-data2.txt", "user-data.processed.json")
CONFIG_DIRS = ("/etc/cloud", "/etc/cloudseed")
SEED_DIRS = ("/var/lib/cloud/seed", "/var/lib/cloudseed/seed")
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
        else:
            found.append(inner)
    return found


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
    wanted = [LOG_FILE, OUTPUT_LOG]
    for legacy in ("/var/log/cloud-init.log", "/var/log/cloud-init-output.log"):
        if not root.islink(legacy):  # a real log an earlier cloud-init left
            wanted.append(legacy)
    wanted += [paths.run(name) for name in PLAIN_RUN_FILES]
    wanted += [f"{paths.data_dir}/data/{name}" for name in root.listdir(f"{paths.data_dir}/data")]
    wanted += [path for top in CONFIG_DIRS for path in _config_files(root, top)]
    if include_userdata:
        wanted += [paths.run(name) for name in SENSITIVE_RUN_FILES]
        wanted += [f"{paths.instance_link}/{name}" for name in USER_DATA_FILES]
        wanted += [f"{seeds}/{kind}/{name}" for seeds in SEED_DIRS for kind in root.listdir(seeds)
                   for name in root.listdir(f"{seeds}/{kind}")]
    for inner in wanted:
        try:
            if not root.isfile(inner) or (not include_userdata and not _world_readable(root, inner)
                                          and inner not in (LOG_FILE, OUTPUT_LOG)):
                continue
            files[inner.lstrip("/")] = root.read_bytes(inner)
        except OSError:
            continue
    for name, argv in (("dmesg.txt", ["dmesg"]), ("journal.txt", ["journalctl", "--boot=0", "-o", "short-precise"]),
                       ("journal-previous.txt", ["journalctl", "--boot=-1", "-o", "short-precise"]),
                       ("dpkg-version", ["dpkg-query", "--show", "cloudseed"])):
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
    fd = os.open(tarball, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold user-data: private
    with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mtime = int(time.time())
            info.mode = 0o600 if name.startswith(("run/", "var/lib/")) or args.include_userdata else 0o644
            tar.addfile(info, io.BytesIO(data))
            if args.verbose:
                print(f"collect-logs: {name} ({len(data)} bytes)", file=sys.stderr)
    print(f"Wrote {tarball}")
    return 0
