"""``cloudseed net``: network config tools.

``cloudseed net render INPUT --renderer R --root DIR`` parses a v1, v2 or OpenStack
network_data.json config and writes what renderer R would write, under DIR at the system paths.
What the format cannot express is left out and named in a warning (as at boot); ``--strict``
makes any such warning an error and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

HELP = "network config tools (render a v1/v2/network_data.json config with any renderer)"

RENDERERS = ("eni", "netplan", "networkd", "sysconfig", "network-manager")
_MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$")


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="net_command", metavar="ACTION")
    render = sub.add_parser("render", help="render a network config into a directory tree",
                            description="Parse INPUT (network config v1, v2 or OpenStack network_data.json; "
                                        "YAML or JSON; '-' for stdin) and write the files RENDERER would "
                                        "write under DIR, at their system paths.")
    render.add_argument("input", metavar="INPUT", help="network config file, or - for standard input")
    render.add_argument("--renderer", "-r", required=True, choices=RENDERERS, help="output format")
    render.add_argument("--root", dest="render_root", metavar="DIR",
                        help="write under DIR (also accepted as the global --root)")
    render.add_argument("--kind", "-k", default="auto", choices=("auto", "v1", "v2", "openstack"),
                        help="input format (default: detect)")
    render.add_argument("--distro", "-D", default=None,
                        help="distro family for paths and defaults (debian, rhel; default: rhel for "
                             "sysconfig, else debian)")
    render.add_argument("--strict", action="store_true",
                        help="fail (and write nothing) when the renderer must leave anything out")
    render.add_argument("--mac", "-m", action="append", default=[], metavar="MAC=NAME",
                        help="map a MAC address to an interface name (repeatable); without any, NICs "
                             "are looked up in DIR/sys/class/net")


def _err(msg: str) -> int:
    print(f"cloudseed net render: {msg}", file=sys.stderr)
    return 1


def _load(path: str):
    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    from cloudseed.core.yaml_loading import load_yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ValueError(f"not valid YAML or JSON{where}: {getattr(e, 'problem', e)}") from None


def _macs(items: list):
    if not items:
        return None
    out = {}
    for item in items:
        mac, sep, name = item.partition("=")
        if not sep or not _MAC.match(mac.strip()) or not name.strip():
            raise ValueError(f"--mac {item!r}: expected MAC=NAME, e.g. 52:54:00:12:34:56=eth0")
        out[mac.strip().lower().replace("-", ":")] = name.strip()
    return out


def run(args) -> int:
    if getattr(args, "net_command", None) != "render":
        print("usage: cloudseed net render INPUT --renderer R --root DIR (see cloudseed net render --help)",
              file=sys.stderr)
        return 2
    root_dir = args.render_root or (args.root if args.root and args.root != "/" else None)
    if root_dir is None:
        return _err("give --root DIR (use --root / explicitly to write into the running system)")
    label = "<stdin>" if args.input == "-" else args.input
    try:
        data = _load(args.input)
        macs = _macs(args.mac)
    except OSError as e:
        return _err(f"{label}: cannot read: {e.strerror or e}")
    except ValueError as e:
        return _err(f"{label}: {e}")
    from cloudseed.core.root import RootError, TargetRoot
    from cloudseed.network import NetworkConfigError
    from cloudseed.network.output import write_files
    from cloudseed.network.parsers import parse
    from cloudseed.network.renderers import get_renderer

    root = TargetRoot(root_dir)
    distro = args.distro or ("rhel" if args.renderer == "sysconfig" else "debian")
    try:
        model = parse(data, kind=args.kind, macs=macs, root=root)
        renderer = get_renderer(args.renderer)
        files = renderer.render(model, distro=distro)
    except NetworkConfigError as e:
        return _err(f"{label}: {e}")
    for warning in model.warnings:
        print(f"cloudseed net render: {label}: {'error' if args.strict else 'warning'}: {warning}",
              file=sys.stderr)
    if args.strict and model.warnings:
        return 1
    try:
        written = write_files(root, files, getattr(renderer, "OWNED", []))
    except (OSError, RootError) as e:
        return _err(f"cannot write under {root_dir}: {e}")
    for path in written:
        print(path)
    return 0
