"""``cloudseed seed build``: write a NoCloud seed or an OpenStack config drive image.

From files (``--instance-id ID [--hostname] [--meta-data] [--user-data] [--vendor-data]
[--network-config] [--ssh-key]``) or from an instance in the metadata server's registry
(``--db URL --instance ID``), as ISO 9660 (Joliet + Rock Ridge) or VFAT. Same input, same bytes.
Signed user-data: a seed from the registry is signed with the registry's key (``--no-sign``: not),
any seed with ``--sign-key KEY`` (``ssh-keygen -Y sign``); the signatures go beside the data.
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "build seed images: NoCloud (cidata) or OpenStack config drive (config-2), ISO 9660 or VFAT"


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="seed_action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="write a seed image", description=HELP)
    build.add_argument("--kind", choices=("nocloud", "configdrive", "azure"), default="nocloud",
                       help="seed layout (default nocloud; azure: the provisioning ISO with ovf-env.xml)")
    build.add_argument("--fs", choices=("iso9660", "vfat", "udf"), default="iso9660",
                       help="filesystem of the image (default iso9660; udf: --kind azure only, UDF with an "
                       "ISO 9660 bridge, as Azure attaches it)")
    build.add_argument("-o", "--output", required=True, metavar="OUT", help="image file to write")
    build.add_argument("--instance-id", metavar="ID", help="instance id (from files mode)")
    build.add_argument("--hostname", metavar="NAME", help="host name of the instance")
    build.add_argument("--meta-data", metavar="FILE", help="extra meta-data (YAML or JSON mapping)")
    build.add_argument("--user-data", metavar="FILE", help="user-data, written as given")
    build.add_argument("--vendor-data", metavar="FILE", help="vendor-data (JSON or text)")
    build.add_argument("--network-config", metavar="FILE",
                       help="network config v1/v2 YAML (or network_data.json for a config drive)")
    build.add_argument("--ssh-key", metavar="FILE", action="append", default=[],
                       help="an OpenSSH public key file (repeatable)")
    build.add_argument("--db", metavar="URL", help="metadata server registry (sqlite path or postgresql URL)")
    build.add_argument("--instance", metavar="ID", help="instance to take from --db")
    build.add_argument("--sign-key", metavar="KEY",
                       help="sign the user-data with this SSH key (ssh-keygen -Y sign: a private key, or a "
                       "public key whose private half ssh-agent holds); with --db the registry's key signs "
                       "unless this is given")
    build.add_argument("--no-sign", action="store_true", help="with --db: an unsigned seed")
    build.add_argument("--epoch", type=int, metavar="SECONDS",
                       help="timestamp stored in the image (default SOURCE_DATE_EPOCH or 2000-01-01)")
    build.add_argument("--json", action="store_true", help="print a JSON summary")


def run(args: argparse.Namespace) -> int:
    from cloudseed.provider.seeds.build import build_seed
    from cloudseed.provider.seeds.errors import SeedError
    from cloudseed.provider.seeds.spec import spec_from_files, spec_from_registry

    try:
        if args.db or args.instance:
            if not (args.db and args.instance):
                raise SeedError("--db and --instance go together")
            if args.instance_id or args.user_data or args.meta_data:
                raise SeedError("--db/--instance take the instance from the registry; "
                                "do not combine with --instance-id/--user-data/--meta-data")
            spec = spec_from_registry(args.db, args.instance)
        elif args.instance_id:
            spec = spec_from_files(args.instance_id, args.hostname, args.meta_data, args.user_data,
                                   args.vendor_data, args.network_config, args.ssh_key)
        else:
            raise SeedError("give --instance-id ID (and files), or --db URL --instance ID")
        spec.signer = _signer(args, spec.instance_id)
        summary = build_seed(args.kind, args.fs, spec, args.output, args.epoch)
    except SeedError as error:
        print(f"cloudseed seed: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['path']}: {summary['kind']} seed, {summary['fs']}, label {summary['label']}, "
              f"{len(summary['files'])} files, {summary['size']} bytes")
    return 0


def _signer(args: argparse.Namespace, instance_id: str):
    """(kind, data) -> signature for the seed: the user's key (ssh-keygen), the registry's, or None."""
    from cloudseed.core.userdata_signatures import SignatureError, sign_with_ssh_keygen
    from cloudseed.provider.seeds.errors import SeedError

    if args.sign_key:
        def sign(kind: str, data: bytes) -> str:
            try:
                return sign_with_ssh_keygen(args.sign_key, kind, instance_id, data)
            except SignatureError as e:
                raise SeedError(f"--sign-key: {e}") from None

        return sign
    if not args.db or args.no_sign:
        return None
    from cloudseed.provider.registry import RegistryError, open_registry
    from cloudseed.provider.userdata_signing import shared_signer

    try:
        registry = open_registry(args.db, create=False)
    except (RegistryError, OSError) as error:
        raise SeedError(f"--db {args.db}: {error}") from None
    try:
        signer = shared_signer(registry)
    finally:
        registry.close()
    return lambda kind, data: signer.sign(kind, instance_id, data)
