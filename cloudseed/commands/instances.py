"""``cloudseed instances``: add, list, show, update and remove instances in the registry; print the
certificate of the EC2 instance identity signatures, Azure's attested documents or the OCI
federation endpoint's CA (``identity-certificate [--azure|--oci-auth]``); schedule events on an
instance's timeline (``events``, in ``_instance_events.py``); read what instances' agents reported
about their boots (``provisioning``, in ``_instance_provisioning.py``); print the signature of an
instance's user-data as the server serves it, or the registry's key (``signature``, in
``_instance_signature.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

HELP = "manage the metadata server's instance registry (add, list, show, update, rm)"


def _record_flags(parser: argparse.ArgumentParser, adding: bool) -> None:
    if adding:
        parser.add_argument("--id", required=True, dest="instance_id", help="instance id (uuid or i-...)")
    parser.add_argument("--hostname", help="host name")
    parser.add_argument("--name", help="display name (default: the host name)")
    parser.add_argument("--address", action="append", metavar="IP[/PREFIX][@NETWORK]",
                        help="address of the instance on a network (repeatable; replaces all on update)")
    parser.add_argument("--mac", action="append", metavar="MAC",
                        help="NIC MAC address (repeatable; replaces all on update)")
    parser.add_argument("--gateway", action="append", metavar="IP",
                        help="default gateway of the derived network documents, one per family (repeatable; "
                             "'none': no default route, 'auto': the subnet's first address, the default)")
    parser.add_argument("--nameserver", action="append", metavar="IP",
                        help="DNS server of the derived network documents (repeatable; 'none': none, "
                             "'auto': the gateway, the default)")
    parser.add_argument("--ssh-key", action="append", metavar="FILE",
                        help="OpenSSH public key file (repeatable; replaces all on update)")
    parser.add_argument("--user-data", metavar="FILE", help="user-data file ('-' for stdin)")
    parser.add_argument("--vendor-data", metavar="FILE", help="vendor-data: JSON file, or any text file")
    parser.add_argument("--network-data", metavar="FILE", help="OpenStack network_data.json file")
    parser.add_argument("--availability-zone", help="availability zone")
    parser.add_argument("--project-id", help="project (tenant) id")
    parser.add_argument("--tag", action="append", metavar="KEY[=VALUE]",
                        help="EC2 instance tag, KEY=VALUE or KEY (empty value); repeatable (update: added to the "
                             "instance's tags)")
    parser.add_argument("--meta", action="append", metavar="KEY=VALUE",
                        help="OpenStack meta item (repeatable; update: added to the instance's)")
    parser.add_argument("--imds-tokens", choices=("required", "optional"), help="IMDSv2 tokens for this instance")
    parser.add_argument("--instance-type", help="EC2 instance type")
    parser.add_argument("--ami-id", help="EC2 image id")
    ec2 = parser.add_argument_group("EC2 settings (update: merged into the instance's)")
    ec2.add_argument("--iam-role", help="IAM role: iam/info and rotating iam/security-credentials/ROLE")
    ec2.add_argument("--instance-metadata-tags", choices=("enabled", "disabled"),
                     help="serve tags/instance (default enabled)")
    ec2.add_argument("--hop-limit", type=int, metavar="N", help="IMDSv2 token reply IP TTL for this instance (1-64)")
    ec2.add_argument("--life-cycle", choices=("on-demand", "spot", "scheduled"), help="instance-life-cycle")
    ec2.add_argument("--spot-action", metavar="ACTION@TIME",
                     help="spot interruption, e.g. terminate@2026-11-24T21:00:00Z ('none' removes it)")
    ec2.add_argument("--security-group", action="append", metavar="NAME", help="security group name (repeatable)")
    ec2.add_argument("--rebalance-notice", metavar="TIME",
                     help="events/recommendations/rebalance noticeTime, e.g. 2026-11-24T20:58:00Z ('none' removes it)")
    ec2.add_argument("--target-lifecycle-state", metavar="STATE",
                     help="autoscaling/target-lifecycle-state: InService, Terminated, Detached, Standby, "
                          "Warmed:... ('none' removes it)")
    clouds = parser.add_argument_group("other clouds' settings (update: each cloud named replaces that cloud's, "
                                       "attributes are added)")
    clouds.add_argument("--clouds-json", metavar="FILE",
                        help="JSON object {gce: {...}, digitalocean: {...}, hetzner: {...}, oracle: {...}} "
                             "(keys in cloudseed/provider/registry/cloud_fields.py; update: a cloud set to null "
                             "is removed, clouds not named are kept)")
    clouds.add_argument("--gce-attribute", action="append", metavar="KEY=VALUE",
                        help="GCE instance attribute (repeatable; e.g. enable-oslogin=FALSE)")
    clouds.add_argument("--gce-project-attribute", action="append", metavar="KEY=VALUE",
                        help="GCE project attribute (repeatable; e.g. ssh-keys=USER:KEY)")
    clouds.add_argument("--gce-service-account", action="append", metavar="EMAIL[=SCOPE,...]",
                        help="GCE service account (repeatable; the first is 'default'; default: the project's "
                             "compute account, scope cloud-platform)")
    clouds.add_argument("--no-gce-service-account", action="store_true", default=None,
                        help="no GCE service account (google-auth then finds no credentials)")
    clouds.add_argument("--no-azure-system-identity", action="store_true", default=None,
                        help="no Azure system-assigned managed identity (a VM has one by default)")
    clouds.add_argument("--azure-user-identity", action="append", metavar="NAME",
                        help="Azure user-assigned managed identity (repeatable; ids derived from the name)")
    ec2.add_argument("--ec2-json", metavar="FILE",
                     help="EC2 settings as a JSON object (keys: see docs/metadata-server.md, EC2 section)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="SQLite file (default /var/lib/cloudseed/server.db) "
                                                   "or postgresql:// URL")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _record_flags(sub.add_parser("add", help="register an instance"), adding=True)
    lister = sub.add_parser("list", help="list instances")
    for name in ("name", "hostname", "project_id", "availability_zone", "network", "address", "tag"):
        lister.add_argument(f"--{name.replace('_', '-')}", dest=f"filter_{name}",
                            help="only this tag key, or KEY=VALUE" if name == "tag" else f"only this {name}")
    lister.add_argument("--json", action="store_true", help="print JSON records")
    show = sub.add_parser("show", help="print one instance as JSON")
    show.add_argument("instance_id")
    update = sub.add_parser("update", help="change fields of an instance")
    update.add_argument("instance_id")
    _record_flags(update, adding=False)
    update.add_argument("--no-user-data", action="store_true", help="remove the user-data")
    update.add_argument("--remove-tag", action="append", metavar="KEY", help="remove an EC2 tag (repeatable)")
    update.add_argument("--remove-meta", action="append", metavar="KEY", help="remove an OpenStack meta item "
                                                                              "(repeatable)")
    certificate = sub.add_parser("identity-certificate",
                                 help="print the certificate that verifies EC2 instance identity signatures (pkcs7, "
                                      "rsa2048, signature); made with the key on first use")
    which = certificate.add_mutually_exclusive_group()
    which.add_argument("--azure", action="store_true",
                       help="the certificate of Azure's attested documents instead (azure_attested_key: ecdsa, the "
                            "default; with 'rsa' the server signs them with the EC2 key)")
    which.add_argument("--oci-auth", action="store_true",
                       help="the CA of the OCI federation endpoint's TLS certificate instead (--oci-auth-tls-listen; "
                            "the instances' CA bundle needs it)")
    password = sub.add_parser("password", help="decrypt the admin password the instance posted, as nova "
                                               "get-password does (admin_password: {post_to_metadata: true})")
    password.add_argument("instance_id")
    password.add_argument("--key", required=True, metavar="PRIVATE_KEY",
                          help="private key of the instance's first ssh-rsa key (PEM or OpenSSH format)")
    remove = sub.add_parser("rm", help="remove instances")
    remove.add_argument("instance_ids", nargs="+", metavar="ID")
    from cloudseed.commands import _instance_events, _instance_provisioning, _instance_signature

    _instance_events.configure(sub)
    _instance_provisioning.configure(sub)
    _instance_signature.configure(sub)


def run(args: argparse.Namespace) -> int:
    from cloudseed.provider.registry import DEFAULT_DB, RecordError, RegistryError, open_registry

    try:
        registry = open_registry(args.db or DEFAULT_DB)
    except (RegistryError, OSError) as error:
        print(f"cloudseed instances: {error}", file=sys.stderr)
        return 1
    try:
        return _ACTIONS[args.action](registry, args)
    except RecordError as error:
        print(f"cloudseed instances {args.action}: invalid {error.field}: {error.message}", file=sys.stderr)
        return 2
    except (RegistryError, InputError) as error:
        print(f"cloudseed instances {args.action}: {error}", file=sys.stderr)
        return 1
    finally:
        registry.close()


class InputError(Exception):
    """An unreadable or malformed input file given on the command line."""


def _read(path: str, flag: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise InputError(f"{flag} {path}: {error.strerror}")


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    from cloudseed.provider.registry import parse_address_spec

    fields: dict[str, Any] = {}
    for name in ("hostname", "name", "availability_zone", "project_id", "imds_tokens", "instance_type", "ami_id"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    if args.address:
        fields["addresses"] = [parse_address_spec(a, f"--address {a}") for a in args.address]
    if args.mac:
        fields["macs"] = args.mac
    for flag, key in (("gateway", "gateway"), ("nameserver", "nameservers")):
        given = getattr(args, flag)
        if given:
            fields[key] = None if given == ["auto"] else [] if given == ["none"] else given
    if args.ssh_key:
        keys = []
        for path in args.ssh_key:
            for line in _read(path, "--ssh-key").decode("utf-8", "replace").splitlines():
                if line.strip() and not line.startswith("#"):
                    keys.append({"data": line.strip()})
        fields["ssh_keys"] = keys
    if args.user_data:
        fields["user_data_b64"] = __import__("base64").b64encode(_read(args.user_data, "--user-data")).decode()
    if getattr(args, "no_user_data", False):
        fields["user_data"] = None
    if args.vendor_data:
        text = _read(args.vendor_data, "--vendor-data").decode("utf-8", "replace")
        try:
            fields["vendor_data"] = json.loads(text)
        except ValueError:
            fields["vendor_data"] = text  # cloud-config or a script: OpenStack allows a string
    if args.network_data:
        try:
            fields["network_data"] = json.loads(_read(args.network_data, "--network-data"))
        except ValueError as error:
            raise InputError(f"--network-data {args.network_data}: not JSON: {error}")
    if args.tag:
        tags: dict[str, str] = {}
        for item in args.tag:
            key, _, value = item.partition("=")
            tags[key] = value
        fields["tags"] = tags
    clouds = _cloud_fields(args)
    if clouds:
        fields["clouds"] = clouds
    ec2 = _ec2_fields(args)
    if ec2:
        fields["ec2"] = ec2
    if args.meta:
        meta = {}
        for item in args.meta:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise InputError(f"--meta {item!r}: expected KEY=VALUE")
            meta[key] = value
        fields["meta"] = meta
    return fields


def _cloud_fields(args: argparse.Namespace) -> dict[str, Any]:
    clouds: dict[str, Any] = {}
    if getattr(args, "clouds_json", None):
        try:
            clouds = json.loads(_read(args.clouds_json, "--clouds-json"))
        except ValueError as error:
            raise InputError(f"--clouds-json {args.clouds_json}: not JSON: {error}")
        if not isinstance(clouds, dict):
            raise InputError(f"--clouds-json {args.clouds_json}: must be a JSON object")
    for flag, key in (("gce_attribute", "attributes"), ("gce_project_attribute", "project_attributes")):
        for item in getattr(args, flag, None) or []:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise InputError(f"--{flag.replace('_', '-')} {item!r}: expected KEY=VALUE")
            gce = clouds.setdefault("gce", {})
            gce.setdefault(key, {})[name] = value
    accounts = []
    for item in getattr(args, "gce_service_account", None) or []:
        email, _, scopes = item.partition("=")
        accounts.append({"email": email, **({"scopes": scopes.split(",")} if scopes else {})})
    if getattr(args, "no_gce_service_account", None) and accounts:
        raise InputError("--no-gce-service-account and --gce-service-account: give one of them")
    if accounts or getattr(args, "no_gce_service_account", None):
        clouds.setdefault("gce", {})["service_accounts"] = accounts
    if getattr(args, "no_azure_system_identity", None):
        clouds.setdefault("azure", {})["system_identity"] = False
    if getattr(args, "azure_user_identity", None):
        clouds.setdefault("azure", {})["user_identities"] = [{"name": n} for n in args.azure_user_identity]
    return clouds


def _ec2_fields(args: argparse.Namespace) -> dict[str, Any]:
    ec2: dict[str, Any] = {}
    if args.ec2_json:
        try:
            ec2 = json.loads(_read(args.ec2_json, "--ec2-json"))
        except ValueError as error:
            raise InputError(f"--ec2-json {args.ec2_json}: not JSON: {error}")
        if not isinstance(ec2, dict):
            raise InputError(f"--ec2-json {args.ec2_json}: must be a JSON object")
    for flag, key in (("iam_role", "iam_role"), ("instance_metadata_tags", "instance_metadata_tags"),
                      ("hop_limit", "hop_limit"), ("life_cycle", "life_cycle"), ("security_group", "security_groups")):
        if getattr(args, flag, None) is not None:
            ec2[key] = getattr(args, flag)
    if args.rebalance_notice:
        ec2["rebalance"] = None if args.rebalance_notice == "none" else {"notice_time": args.rebalance_notice}
    if args.target_lifecycle_state:
        ec2["target_lifecycle_state"] = None if args.target_lifecycle_state == "none" else args.target_lifecycle_state
    if args.spot_action:
        if args.spot_action == "none":
            ec2["spot"] = None
        else:
            action, sep, when = args.spot_action.partition("@")
            if not sep:
                raise InputError(f"--spot-action {args.spot_action!r}: expected ACTION@TIME or none")
            ec2["spot"] = {"action": action, "time": when}
    return ec2


def _identity_certificate(registry: Any, args: argparse.Namespace) -> int:
    from cloudseed.provider.server.credentials import azure_attested, oci_auth_tls
    from cloudseed.provider.server.credentials.ec2_identity import IdentityError, certificate, shared_pem

    try:
        if args.oci_auth:
            pem = oci_auth_tls.shared_ca(registry)
        else:
            pem = azure_attested.shared_pem(registry) if args.azure else shared_pem(registry)
        print(certificate(pem), end="")
    except IdentityError as error:
        print(f"cloudseed instances identity-certificate: {error}", file=sys.stderr)
        return 1
    return 0


def _password(registry: Any, args: argparse.Namespace) -> int:
    from cloudseed.provider.password_decrypt import DecryptError, decrypt

    record = registry.get(args.instance_id)
    if record is None:
        raise InputError(f"no instance {args.instance_id!r}")
    if not record.password:
        raise InputError(f"instance {args.instance_id} has not posted a password (yet)")
    try:
        print(decrypt(record.password, args.key))
    except DecryptError as error:
        raise InputError(str(error)) from None
    return 0


def _add(registry: Any, args: argparse.Namespace) -> int:
    from cloudseed.provider.registry import InstanceRecord

    fields = _fields(args)
    fields["instance_id"] = args.instance_id
    record = InstanceRecord.from_dict(fields)
    registry.add(record)
    print(record.instance_id)
    return 0


def _list(registry: Any, args: argparse.Namespace) -> int:
    filters = {k[len("filter_"):]: v for k, v in vars(args).items() if k.startswith("filter_") and v is not None}
    records = registry.list(**filters)
    if args.json:
        print(json.dumps([r.to_dict() for r in records], indent=1))
        return 0
    print(f"{'INSTANCE':<38} {'HOSTNAME':<24} {'ADDRESSES':<40} IMDS")
    for r in records:
        addresses = ",".join(f"{a['address']}@{a['network']}" for a in r.addresses)
        print(f"{r.instance_id:<38} {r.hostname:<24} {addresses:<40} {r.imds_tokens}")
    return 0


def _show(registry: Any, args: argparse.Namespace) -> int:
    record = registry.get(args.instance_id)
    if record is None:
        print(f"cloudseed instances show: no instance {args.instance_id}", file=sys.stderr)
        return 1
    shown = record.to_dict()
    health = [p for p in registry.phone_home(record.instance_id) if "azure_health" in p["fields"]]
    if health:  # the last health report the Azure wire server accepted
        shown["azure_health"] = {**health[-1]["fields"]["azure_health"], "received_at": health[-1]["received_at"]}
    print(json.dumps(shown, indent=1))
    return 0


def _update(registry: Any, args: argparse.Namespace) -> int:
    """A patch: each flag changes what it names and nothing else. Scalars and lists (addresses,
    MACs, keys, security groups) are replaced; tags, meta items, EC2 settings and GCE attributes
    are merged key by key; ``--clouds-json`` replaces the clouds it names only."""
    fields = _fields(args)
    removals = [(key, name) for key, names in (("tags", args.remove_tag), ("meta", args.remove_meta))
                for name in names or []]
    if not fields and not removals:
        raise InputError("nothing to change: give at least one field flag")
    current = registry.get(args.instance_id)
    if current is None:
        raise InputError(f"no instance {args.instance_id!r}")
    for key in ("tags", "meta"):
        if key in fields or any(k == key for k, _ in removals):
            merged = {**getattr(current, key), **fields.get(key, {})}
            for _, name in (r for r in removals if r[0] == key):
                if name not in merged:
                    raise InputError(f"--remove-{key.rstrip('s')} {name!r}: the instance has no such {key[:-1]}")
                del merged[name]
            fields[key] = merged
    if "ec2" in fields:
        merged = {**current.ec2, **fields["ec2"]}
        fields["ec2"] = {k: v for k, v in merged.items() if v is not None}
    if "clouds" in fields:
        fields["clouds"] = _merged_clouds(current.clouds, args)
    registry.update(args.instance_id, **fields)
    return 0


def _merged_clouds(current: dict, args: argparse.Namespace) -> dict:
    import copy

    clouds = copy.deepcopy(current)
    if args.clouds_json:
        for cloud, settings in json.loads(_read(args.clouds_json, "--clouds-json")).items():
            if settings is None:
                clouds.pop(cloud, None)
            else:
                clouds[cloud] = settings
    # what the other flags name: one setting each (service accounts, identities), or one
    # attribute each (GCE attributes are merged into the instance's)
    from_flags = _cloud_fields(argparse.Namespace(**{**vars(args), "clouds_json": None}))
    for cloud, settings in from_flags.items():
        mine = clouds.setdefault(cloud, {})
        for key, value in settings.items():
            if key in ("attributes", "project_attributes"):
                mine[key] = {**mine.get(key, {}), **value}
            else:
                mine[key] = value
    return clouds


def _events(registry: Any, args: argparse.Namespace) -> int:
    from cloudseed.commands import _instance_events

    return _instance_events.run(registry, args, InputError)


def _provisioning(registry: Any, args: argparse.Namespace) -> int:
    from cloudseed.commands import _instance_provisioning

    return _instance_provisioning.run(registry, args)


def _signature(registry: Any, args: argparse.Namespace) -> int:
    from cloudseed.commands import _instance_signature

    return _instance_signature.run(registry, args, InputError)


def _remove(registry: Any, args: argparse.Namespace) -> int:
    missing = [i for i in args.instance_ids if not registry.delete(i)]
    for instance_id in missing:
        print(f"cloudseed instances rm: no instance {instance_id}", file=sys.stderr)
    return 1 if missing else 0


_ACTIONS = {"add": _add, "list": _list, "show": _show, "update": _update, "rm": _remove,
            "identity-certificate": _identity_certificate, "password": _password, "events": _events,
            "provisioning": _provisioning, "signature": _signature}
