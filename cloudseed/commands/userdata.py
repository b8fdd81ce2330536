"""``cloudseed userdata show|sign|verify|key``: what a user-data blob becomes; signed user-data.

``show FILE`` prints the merged cloud-config and the scripts, boothooks and part-handlers by the
names they would be stored under (``--json`` for a machine-readable object), then the errors. Exits
1 when there were errors, so it can check user-data before a boot.

``sign FILE --key KEY --instance-id ID`` writes ``FILE.sig``, the signature an image with the key in
``trusted_userdata_keys`` accepts for that instance (``ssh-keygen -Y sign``; serve or seed it beside
the data). ``verify`` checks one as the guest does; ``key --db URL`` prints the metadata registry's
public key (what its servers and ``seed build --db`` sign with).
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "show what user-data (or vendor-data) becomes; sign and verify user-data for an instance"


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="process a user-data blob and print the result",
                          description="Process a user-data blob (FILE, or - for stdin) and print the "
                                      "merged cloud-config, scripts and errors. Nothing is executed.")
    show.add_argument("file", metavar="FILE", help="user-data file, or - for standard input")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.add_argument("--instance-data", metavar="FILE",
                      help="instance-data JSON to render '## template: jinja' parts with")
    show.add_argument("--include-cache", metavar="DIR",
                      help="directory where #include-once content is cached (default: no cache)")
    show.add_argument("--no-includes", action="store_true", help="do not fetch #include URLs")
    show.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                      help="timeout for each #include fetch (default 10)")
    sign = sub.add_parser("sign", help="sign user-data for one instance with your SSH key (FILE.sig)")
    sign.add_argument("file", metavar="FILE", help="the user-data (or vendor-data), exactly as it will be served")
    sign.add_argument("--key", required=True, metavar="KEY",
                      help="SSH private key, or a public key whose private half ssh-agent holds")
    sign.add_argument("--instance-id", required=True, metavar="ID", help="the instance it is for")
    sign.add_argument("--kind", choices=("user-data", "vendor-data", "vendor-data2"), default="user-data")
    sign.add_argument("-o", "--output", metavar="OUT", help="signature file (default FILE.sig; - for stdout)")
    verify = sub.add_parser("verify", help="check a signature as the guest does (exit 0: valid)")
    verify.add_argument("file", metavar="FILE")
    verify.add_argument("--signature", metavar="SIG", help="default FILE.sig")
    verify.add_argument("--instance-id", required=True, metavar="ID")
    verify.add_argument("--kind", choices=("user-data", "vendor-data", "vendor-data2"), default="user-data")
    verify.add_argument("--trusted-key", required=True, action="append", metavar="PUBKEY",
                        help="an OpenSSH public key file (repeatable), as trusted_userdata_keys")
    key = sub.add_parser("key", help="print the metadata registry's user-data signing key (public)")
    key.add_argument("--db", required=True, metavar="URL", help="registry (sqlite path or postgresql URL)")


def run(args: argparse.Namespace) -> int:
    if args.action in ("sign", "verify", "key"):
        return _signatures(args)
    from cloudseed.agent.userdata import process_userdata

    try:
        blob = sys.stdin.buffer.read() if args.file == "-" else _read(args.file)
    except OSError as e:
        print(f"cloudseed userdata: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    instance_data = None
    if args.instance_data:
        try:
            with open(args.instance_data, encoding="utf-8") as f:
                instance_data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"cloudseed userdata: cannot read instance data {args.instance_data}: {e}",
                  file=sys.stderr)
            return 2
        if not isinstance(instance_data, dict):
            print(f"cloudseed userdata: {args.instance_data} is not a JSON object", file=sys.stderr)
            return 2
    result = process_userdata(blob, instance_data=instance_data, include_cache_dir=args.include_cache,
                              fetch_timeout=args.timeout, allow_includes=not args.no_includes)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    else:
        _print_summary(result)
    return 1 if result.errors else 0


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _print_summary(result) -> None:
    import yaml

    out = sys.stdout
    if result.cloud_config is None:
        out.write("# no cloud-config\n")
    else:
        sources = ", ".join(result.cloud_config_sources) or "none usable"
        out.write(f"# cloud-config (merged from: {sources})\n#cloud-config\n")
        out.write(yaml.safe_dump(result.cloud_config, default_flow_style=False, sort_keys=False))
    sections = [("script", result.scripts), ("boothook", result.boothooks)]
    sections += [(f"script {freq}", parts) for freq, parts in result.scripts_per_freq.items()]
    sections += [("part-handler", result.handlers)]
    for what, parts in sections:
        for part in parts:
            out.write(f"\n# {what}: {part.name}\n")
            text = part.text()
            out.write(text if text.endswith("\n") else text + "\n")
    for part in result.unhandled:
        out.write(f"\n# not handled: {part.name} ({part.content_type}, {len(part.content)} bytes)\n")
    if result.errors:
        out.write(f"\n# {len(result.errors)} error(s):\n")
        for error in result.errors:
            out.write(f"#   {error}\n")


def _signatures(args: argparse.Namespace) -> int:
    from cloudseed.core.userdata_signatures import SignatureError, sign_with_ssh_keygen, verify

    try:
        if args.action == "key":
            from cloudseed.provider.registry import RegistryError, open_registry
            from cloudseed.provider.userdata_signing import shared_signer

            try:
                registry = open_registry(args.db, create=False)
            except (RegistryError, OSError) as e:
                print(f"cloudseed userdata key: --db {args.db}: {e}", file=sys.stderr)
                return 2
            try:
                print(shared_signer(registry).public_key)
            finally:
                registry.close()
            return 0
        data = _read(args.file)
        if args.action == "sign":
            signature = sign_with_ssh_keygen(args.key, args.kind, args.instance_id, data)
            out = args.output or args.file + ".sig"
            if out == "-":
                sys.stdout.write(signature)
            else:
                with open(out, "w", encoding="ascii") as handle:
                    handle.write(signature)
                print(f"{out}: {args.kind} signed for instance {args.instance_id}")
            return 0
        keys = [_read(path).decode("utf-8", "replace") for path in args.trusted_key]
        signer = verify(data, _read(args.signature or args.file + ".sig"), args.kind, args.instance_id, keys)
        print(f"good signature by {signer.split()[0]} for instance {args.instance_id}")
        return 0
    except OSError as e:
        print(f"cloudseed userdata {args.action}: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    except (SignatureError, ValueError) as e:
        print(f"cloudseed userdata {args.action}: {e}", file=sys.stderr)
        return 1

