"""``cloudseed instances signature``: an instance's user-data signature, as the metadata server serves it.

``signature ID [--kind user-data|vendor-data|vendor-data2] [--api API] [-o FILE]`` prints (or
writes to FILE) the signature ``PATH.sig`` answers on that API for that instance: the same bytes
(Ed25519 signatures are deterministic), by the registry's key, over the data as that API serves it
and the instance-id as its guest reads it (GCE's number, Azure's vmId...). Useful to serve
user-data from elsewhere, or to check what an image will accept. ``signature --public-key``
prints the registry's public key (what ``cloudseed userdata key`` prints), the line images put in
``trusted_userdata_keys``. See docs/security.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DEFAULT_API = "openstack"


def apis() -> list[str]:
    """The metadata APIs a signature can be asked for (``routes``' names)."""
    from cloudseed.provider.server.routes import CLOUD_APIS, EC2, NOCLOUD, OPENSTACK

    return sorted({OPENSTACK, EC2, NOCLOUD, *CLOUD_APIS})


def configure(sub: Any) -> None:
    from cloudseed.core.userdata_signatures import KINDS

    parser = sub.add_parser("signature", help="print the signature of an instance's user-data (or vendor-data) as "
                                              "the metadata server serves it (PATH.sig), or the registry's key",
                            description="The signature the metadata server answers at PATH.sig for this instance "
                                        "(the same bytes). Images trust the key --public-key prints.")
    parser.add_argument("instance_id", nargs="?", help="the instance (not with --public-key)")
    parser.add_argument("--kind", choices=KINDS, default="user-data",
                        help="what is signed (vendor-data2: OpenStack's vendor_data2.json; default user-data)")
    parser.add_argument("--api", choices=apis(), default=DEFAULT_API, metavar="API",
                        help=f"the API it is served on, which decides the instance-id the guest reads and, for "
                             f"vendor data, the form (openstack: the vendor_data.json document, maas: its YAML); "
                             f"default {DEFAULT_API} (its guests read the record's own instance-id, as on ec2, "
                             f"nocloud and seeds). One of: {', '.join(apis())}")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the signature to FILE instead of printing it")
    parser.add_argument("--public-key", action="store_true",
                        help="print the registry's public user-data key instead (as 'cloudseed userdata key')")


def run(registry: Any, args: argparse.Namespace, input_error: type[Exception]) -> int:
    from cloudseed.provider.userdata_signing import guest_instance_id, shared_signer

    if args.public_key:
        if args.instance_id:
            raise input_error("--public-key takes no instance id")
        print(shared_signer(registry).public_key)
        return 0
    if not args.instance_id:
        raise input_error("name an instance (or --public-key for the registry's key)")
    record = registry.get(args.instance_id)
    if record is None:
        raise input_error(f"no instance {args.instance_id!r}")
    data = served_data(record, args.kind, args.api, input_error)
    signature = shared_signer(registry).sign(args.kind, guest_instance_id(args.api, record), data)
    if not args.output:
        sys.stdout.write(signature)
        return 0
    try:
        with open(args.output + ".tmp", "w", encoding="ascii") as handle:
            handle.write(signature)
        os.replace(args.output + ".tmp", args.output)
    except OSError as e:
        raise input_error(f"cannot write {args.output}: {e.strerror or e}") from None
    return 0


def served_data(record: Any, kind: str, api: str, input_error: type[Exception]) -> bytes:
    """What ``api`` serves as ``kind`` for ``record`` (what its signature covers); ``input_error`` when none."""
    from cloudseed.provider.userdata_signing import vendor_data_bytes

    where = f"instance {record.instance_id}"
    if kind == "user-data":
        if not record.user_data:
            raise input_error(f"{where} has no user-data")
        return bytes(record.user_data)
    if api == "openstack":  # the JSON document the API serves (the guest checks it, then unwraps it)
        from cloudseed.provider.server.apis import openstack as openstack_api

        held = record.vendor_data if kind == "vendor-data" else record.vendor_data2
        if held is None:
            raise input_error(f"{where} has no {kind}")
        answer = openstack_api.render(record, "latest", "vendor_data.json" if kind == "vendor-data"
                                      else "vendor_data2.json")
        body = getattr(answer, "body", None)
        if not isinstance(body, bytes):
            raise input_error(f"{where}: the OpenStack API has no {kind} document")
        return body
    if api == "maas" and kind == "vendor-data":  # the YAML document MAAS serves (the guest unwraps it)
        from cloudseed.provider.instance_data import maas

        document = maas.vendor_data(record)
        if document is None:
            raise input_error(f"{where} has no vendor-data")
        return document.encode("utf-8")
    if kind == "vendor-data2":
        raise input_error("vendor-data2 is served (and signed) only by the OpenStack API: --api openstack")
    text = vendor_data_bytes(record.vendor_data)
    if text is None:
        raise input_error(f"{where} has no vendor-data as text, which is what the {api} API signs "
                          f"(structured vendor data is signed on --api openstack, as vendor_data.json)")
    return text
