"""The files of a seed, as a mapping of path to bytes, for each seed kind.

NoCloud (``cidata``): ``meta-data``, ``user-data``, optional ``vendor-data`` and ``network-config``.
OpenStack config drive (``config-2``): ``openstack/<version>/`` with ``meta_data.json``,
``user_data``, ``vendor_data.json``, ``vendor_data2.json``, ``network_data.json`` for each
metadata version that has them, and ``ec2/<version>/meta-data.json`` and ``user-data``.
Every document comes from ``provider/instance_data`` (the metadata server's code, with its one
version table) applied to ``spec.to_record()``; files given on the command line add to it.
JSON is written with sorted keys so the same instance always gives the same bytes.
A spec with a ``signer`` gets each signature beside its data: NoCloud ``user-data.sig`` and
``vendor-data.sig``, a config drive's ``user_data.sig``/``user-data.sig`` in every version directory,
and ``vendor_data.json.sig``/``vendor_data2.json.sig`` (the JSON documents as written, which the
guest checks before it unwraps them) when the instance has that vendor data.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from cloudseed.clouds.nocloud import CLOUD as NOCLOUD
from cloudseed.core.userdata_signatures import KINDS
from cloudseed.core.userdata_signatures import SUFFIX as SIGNATURE_SUFFIX
from cloudseed.provider.instance_data import ec2, nocloud, openstack
from cloudseed.provider.instance_data.network import network_data, nocloud_network_config
from cloudseed.provider.instance_data.versions import OPENSTACK_FILES, OPENSTACK_VERSIONS, SERVED_ONLY, has_file
from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.seeds.errors import SeedError
from cloudseed.provider.seeds.spec import InstanceSpec

NOCLOUD_LABEL = "cidata"
CONFIGDRIVE_LABEL = "config-2"
EC2_VERSIONS = ec2.CONFIGDRIVE_EC2_VERSIONS


def _json(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


SEED = {role: NOCLOUD.tail(role) for role in NOCLOUD.requests}  # meta-data, user-data... (clouds/nocloud.py)


def nocloud_files(spec: InstanceSpec) -> dict[str, bytes]:
    """The files of a NoCloud seed for ``spec`` (named as NoCloud's contract names them)."""
    record = spec.to_record()
    meta: dict[str, Any] = dict(spec.extra_meta_data)
    meta.update(nocloud.meta_data(record))
    if spec.record is None and not spec.hostname:
        del meta[NOCLOUD.fields["local_hostname"]]  # none given: the guest keeps its own
    files = {
        SEED["meta_data"]: yaml.safe_dump(meta, default_flow_style=False, sort_keys=True).encode("utf-8"),
        SEED["user_data"]: record.user_data or b"",
    }
    if isinstance(record.vendor_data, bytes):
        files[SEED["vendor_data"]] = record.vendor_data  # binary vendor data, as given
    elif record.vendor_data is not None:
        files[SEED["vendor_data"]] = nocloud.vendor_text(record.vendor_data).encode("utf-8")
    if spec.network_config_raw is not None:
        _check_network_config(spec.network_config or {})
        files[SEED["network_config"]] = spec.network_config_raw
    elif spec.network_config is not None:
        files[SEED["network_config"]] = yaml.safe_dump(spec.network_config, sort_keys=True).encode("utf-8")
    elif spec.record is not None:
        config = nocloud_network_config(record)
        if config is not None:
            files[SEED["network_config"]] = yaml.safe_dump(config, sort_keys=True).encode("utf-8")
    if spec.signer is not None:
        for kind in KINDS:
            if files.get(kind):
                files[kind + SIGNATURE_SUFFIX] = spec.signer(kind, files[kind]).encode("ascii")
    return files


def _check_network_config(config: dict[str, Any]) -> None:
    """Validate a v1/v2 network config with the network model when it is available."""
    try:
        from cloudseed import network
    except ImportError:
        return
    parse = getattr(network, "parse", None)
    if parse is None:
        return
    try:
        parse(config)
    except getattr(network, "NetworkConfigError", ValueError) as error:
        raise SeedError(f"network config: {error}")


def network_data_json(config: dict[str, Any] | None) -> dict[str, Any]:
    """OpenStack network_data.json for a v1/v2 config (or a network_data.json given as is)."""
    if config is None:
        return {"links": [], "networks": [], "services": []}
    if "version" not in config and "network" not in config and ("links" in config or "networks" in config):
        return config
    inner = config.get("network", config) if isinstance(config.get("network"), dict) else config
    try:
        from cloudseed.network import NetworkConfigError, parse, to_network_data
    except ImportError:
        raise SeedError("network config: converting network config v1/v2 to network_data.json needs "
                        "cloudseed.network.parse/to_network_data, which this build does not have yet; "
                        "give a network_data.json instead")
    try:
        return to_network_data(parse(inner))
    except NetworkConfigError as error:
        raise SeedError(f"network config: cannot be expressed as OpenStack network_data.json: {error}")


def _binary_vendor_error(value: Any) -> None:
    if isinstance(value, bytes):
        raise SeedError("vendor data: a config drive carries vendor data as JSON text; "
                        "this vendor data is binary (not UTF-8)")


def configdrive_record(spec: InstanceSpec) -> InstanceRecord:
    """The record a config drive is made from: a network config file becomes its network data."""
    record = spec.to_record()
    for value in (record.vendor_data, record.vendor_data2):
        _binary_vendor_error(value)
    if spec.network_config is not None:
        record.network_data = network_data_json(spec.network_config)
    return record


def configdrive_files(spec: InstanceSpec) -> dict[str, bytes]:
    """The files of an OpenStack config drive for ``spec``: every version in the one version table."""
    record = configdrive_record(spec)
    common = {
        "vendor_data.json": _json(openstack.vendor_data_json(record.vendor_data)),
        "vendor_data2.json": _json(openstack.vendor_data_json(record.vendor_data2)),
        "network_data.json": _json(network_data(record)),
    }
    files: dict[str, bytes] = {}
    for version in (*OPENSTACK_VERSIONS, "latest"):
        resolved = OPENSTACK_VERSIONS[-1] if version == "latest" else version
        for name in OPENSTACK_FILES:
            if name in SERVED_ONLY or not has_file(resolved, name):
                continue
            if name == "meta_data.json":
                meta = openstack.meta_data(record, resolved)
                meta.update(spec.extra_meta_data)
                meta["uuid"] = record.instance_id
                files[f"openstack/{version}/{name}"] = _json(meta)
            elif name == "user_data":
                if record.user_data is not None:
                    files[f"openstack/{version}/{name}"] = record.user_data
            else:
                files[f"openstack/{version}/{name}"] = common[name]
    for version in (*EC2_VERSIONS, "latest"):
        resolved = ec2.EC2_LATEST if version == "latest" else version
        files[f"ec2/{version}/meta-data.json"] = _json(ec2.meta_data_tree(record, resolved))
        if record.user_data is not None:
            files[f"ec2/{version}/user-data"] = record.user_data
    if spec.signer is not None:
        _sign_configdrive(spec.signer, record, files)
    return files


def _sign_configdrive(signer: Any, record: InstanceRecord, files: dict[str, bytes]) -> None:
    """Each signature beside its data: user-data, and the JSON vendor data documents the instance has."""
    from cloudseed.provider.userdata_signing import JSON_VENDOR_DATA

    held = {"vendor-data": record.vendor_data, "vendor-data2": record.vendor_data2}
    signed: dict[tuple[str, bytes], bytes] = {}  # every version directory holds the same documents
    for name in list(files):
        leaf = name.rsplit("/", 1)[-1]
        kind = "user-data" if leaf in ("user_data", "user-data") else JSON_VENDOR_DATA.get(leaf)
        if kind is None or (kind != "user-data" and held[kind] is None):
            continue
        data = files[name]
        if (kind, data) not in signed:
            signed[(kind, data)] = signer(kind, data).encode("ascii")
        files[name + SIGNATURE_SUFFIX] = signed[(kind, data)]
