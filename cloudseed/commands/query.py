"""``cloudseed query KEY | --all | --list-keys | --format TEMPLATE``: read instance data.

Keys are dotted paths (``v1.instance_id``, ``ds.meta_data.uuid``); the standard keys answer
at the top level too (``instance_id``), and ``-`` and ``_`` are interchangeable. Root reads
the sensitive instance data; other users get the redacted copy. As in cloud-init 24.x, the data
queried also holds ``userdata``, ``vendordata`` and ``combined_cloud_config`` (root only) and
``merged_system_cfg``.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

HELP = "print instance data (a key, all of it, its keys, or a template)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", nargs="?", help="dotted key path, e.g. v1.instance_id")
    parser.add_argument("--all", "-a", action="store_true", help="all instance data")
    parser.add_argument("--list-keys", action="store_true", help="the keys at KEY (or the top level)")
    parser.add_argument("--format", "-f", metavar="TEMPLATE", help="render a template, e.g. '{{ v1.region }}'")
    parser.add_argument("--instance-data", metavar="FILE", help="read this file instead of /run/cloudseed")
    parser.add_argument("--user-data", "-u", metavar="FILE",
                        help="the user-data shown as 'userdata' (default: this instance's)")
    parser.add_argument("--vendor-data", "-v", metavar="FILE",
                        help="the vendor-data shown as 'vendordata' (default: this instance's)")


class KeyNotFound(Exception):
    pass


def lookup(data: Any, path: str) -> Any:
    node = data
    for part in [p for p in path.split(".") if p]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise KeyNotFound(path)
        for candidate in (part, part.replace("-", "_"), part.replace("_", "-")):
            if candidate in node:
                node = node[candidate]
                break
        else:
            raise KeyNotFound(path)
    return node


def render(template: str, data: dict) -> str:
    if "{%" in template:
        import jinja2

        return jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template).render(**data)

    def replace(match: re.Match) -> str:
        try:
            return _text(lookup(data, match.group(1)))
        except KeyNotFound:
            return "CI_MISSING_JINJA_VAR/" + match.group(1)

    return re.sub(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}", replace, template)


def _text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=1, sort_keys=True)
    return "" if value is None else str(value)


REDACTED = "<redacted for non-root user>"
_MAX_SHOWN = 64 * 1024 * 1024


def as_queried(data: dict, root_dir: str, user_data: str | None = None, vendor_data: str | None = None) -> dict:
    """Instance data as cloud-init 24.x+'s ``query`` shows it: every ``v1`` key also at the top level
    as written (``instance-id`` and ``instance_id``), ``merged_system_cfg`` (24.x's name for
    ``merged_cfg``), and this instance's ``userdata``, ``vendordata`` and ``combined_cloud_config``
    (root only: others get a note naming the file)."""
    import os

    from cloudseed.agent.state import Paths
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(root_dir)
    paths = Paths(root)
    out = dict(data)
    for key, value in (data.get("v1") or {}).items():
        out.setdefault(key, value)
    if "merged_cfg" in data:
        out.setdefault("merged_system_cfg", data["merged_cfg"])
    files = {"userdata": user_data or f"{paths.instance_link}/user-data.txt",
             "vendordata": vendor_data or f"{paths.instance_link}/vendor-data.txt",
             "combined_cloud_config": paths.combined_config_file}
    for key, inner in files.items():
        given = inner in (user_data, vendor_data)
        if os.geteuid() != 0:
            out[key] = f"{REDACTED} file:{inner}"
            continue
        try:
            if given:
                with open(inner, "rb") as f:
                    raw = f.read(_MAX_SHOWN)
            else:
                raw = root.read_bytes(inner)
        except OSError:
            out[key] = None
            continue
        if key == "combined_cloud_config":
            try:
                out[key] = json.loads(raw)
            except ValueError:
                out[key] = None
            continue
        if raw[:2] == b"\x1f\x8b":   # gzipped user-data, shown decompressed (to a bound)
            import zlib

            try:
                raw = zlib.decompressobj(wbits=31).decompress(raw, _MAX_SHOWN)
            except zlib.error:
                pass
        out[key] = raw.decode("utf-8", "replace")
    return out


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.state import Paths
    from cloudseed.agent.state import instance_data_json as instance_data
    from cloudseed.core.root import TargetRoot

    if args.instance_data:
        try:
            with open(args.instance_data) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"cloudseed query: cannot read {args.instance_data}: {e}")
            return 1
    else:
        data = instance_data.load(Paths(TargetRoot(args.root)))
    if data is None:
        print("cloudseed query: no instance data yet (has the agent run this boot?)")
        return 1
    data = as_queried(data, args.root, args.user_data, args.vendor_data)
    if not (args.key or args.all or args.list_keys or args.format):
        print("cloudseed query: give a KEY, --all, --list-keys or --format")
        return 2
    if args.format:
        print(render(args.format, data))
        return 0
    try:
        value = lookup(data, args.key) if args.key else data
    except KeyNotFound:
        print(f"cloudseed query: no key {args.key!r} in instance data")
        return 1
    if args.list_keys:
        if not isinstance(value, dict):
            print(f"cloudseed query: {args.key!r} is not a mapping")
            return 1
        print("\n".join(sorted(value)))
        return 0
    print(_text(value))
    return 0
