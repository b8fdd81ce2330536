"""The files of a seed, as a mapping of path to bytes, for each seed kind.

NoCloud (``cidata``): ``meta-data``, ``user-data``, optional ``vendor-data`` and ``network-config``.
OpenStack config drive (``config-2``): ``openstack/<version>/`` with ``meta_data.json``,
``user_data``, ``vendor_data.json``, ``vendor_data2.json``, ``network_data.json`` for each
metadata version that has them, and ``ec2/<version>/meta-data.json`` and ``user-data``.
JSON is written with sorted keys so the same instance always gives the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from cloudseed.provider.seeds.errors import SeedError
from cloudseed.provider.seeds.spec import InstanceSpec

NOCLOUD_LABEL = "cidata"
CONFIGDRIVE_LABEL = "config-2"

# OpenStack metadata versions and the first version that carries each file (Nova's layout).
OPENSTACK_VERSIONS = ("2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30",
                      "2016-10-06", "2017-02-22", "2018-08-27")
_FIRST_VERSION = {"vendor_data.json": "2013-04-04", "network_data.json": "2015-10-15",
                  "vendor_data2.json": "2016-10-06"}
EC2_VERSIONS = ("2009-04-04",)


def _json(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def nocloud_files(spec: InstanceSpec) -> dict[str, bytes]:
    """The files of a NoCloud seed for ``spec``."""
    meta: dict[str, Any] = dict(spec.extra_meta_data)
    meta["instance-id"] = spec.instance_id
    if spec.hostname:
        meta["local-hostname"] = spec.hostname
    if spec.ssh_keys:
        meta["public-keys"] = [key.data for key in spec.ssh_keys]
    files = {
        "meta-data": yaml.safe_dump(meta, default_flow_style=False, sort_keys=True).encode("utf-8"),
        "user-data": spec.user_data or b"",
    }
    vendor = _vendor_bytes(spec.vendor_data)
    if vendor is not None:
        files["vendor-data"] = vendor
    if spec.network_config_raw is not None:
        _check_network_config(spec.network_config or {})
        files["network-config"] = spec.network_config_raw
    elif spec.network_config is not None:
        files["network-config"] = yaml.safe_dump(spec.network_config, sort_keys=True).encode("utf-8")
    return files


def _vendor_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and isinstance(value.get("cloud-init"), str):
        return value["cloud-init"].encode("utf-8")
    return _json(value)


def _vendor_json(value: Any) -> Any:
    """vendor_data.json holds JSON: text vendor data goes under the "cloud-init" key."""
    if value is None:
        return {}
    if isinstance(value, bytes):
        try:
            return {"cloud-init": value.decode("utf-8")}
        except UnicodeDecodeError:
            raise SeedError("vendor data: a config drive carries vendor data as JSON text; "
                            "this vendor data is binary (not UTF-8)")
    if isinstance(value, str):
        return {"cloud-init": value}
    return value


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


def openstack_meta_data(spec: InstanceSpec) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "uuid": spec.instance_id,
        "name": spec.name or spec.hostname or spec.instance_id,
        "hostname": spec.hostname or spec.name or spec.instance_id,
        "launch_index": spec.launch_index,
        "availability_zone": spec.availability_zone or "nova",
        "project_id": spec.project_id or "",
        "meta": dict(spec.meta),
        "devices": [],
    }
    if spec.ssh_keys:
        meta["public_keys"] = {key.name: key.data for key in spec.ssh_keys}
        meta["keys"] = [{"name": key.name, "type": key.type, "data": key.data} for key in spec.ssh_keys]
    meta.update(spec.extra_meta_data)
    meta["uuid"] = spec.instance_id
    return meta


def ec2_meta_data(spec: InstanceSpec) -> dict[str, Any]:
    hostname = spec.hostname or spec.name or spec.instance_id
    meta: dict[str, Any] = {
        "instance-id": spec.instance_id,
        "hostname": hostname,
        "local-hostname": hostname,
        "ami-id": spec.ami_id or "ami-00000001",
        "ami-launch-index": spec.launch_index,
        "instance-type": spec.instance_type or "m1.small",
        "placement": {"availability-zone": spec.availability_zone or "nova"},
        "reservation-id": f"r-{spec.instance_id[:8]}",
        "security-groups": ["default"],
    }
    if spec.local_ipv4:
        meta["local-ipv4"] = spec.local_ipv4
    if spec.ssh_keys:
        meta["public-keys"] = {str(n): {"openssh-key": key.data} for n, key in enumerate(spec.ssh_keys)}
    return meta


def configdrive_files(spec: InstanceSpec) -> dict[str, bytes]:
    """The files of an OpenStack config drive for ``spec``."""
    per_file = {
        "meta_data.json": _json(openstack_meta_data(spec)),
        "vendor_data.json": _json(_vendor_json(spec.vendor_data)),
        "vendor_data2.json": _json(_vendor_json(spec.vendor_data2)),
        "network_data.json": _json(network_data_json(spec.network_config)),
    }
    files: dict[str, bytes] = {}
    for version in (*OPENSTACK_VERSIONS, "latest"):
        for name, data in per_file.items():
            first = _FIRST_VERSION.get(name)
            if version == "latest" or first is None or version >= first:
                files[f"openstack/{version}/{name}"] = data
        if spec.user_data is not None:
            files[f"openstack/{version}/user_data"] = spec.user_data
    ec2 = _json(ec2_meta_data(spec))
    for version in (*EC2_VERSIONS, "latest"):
        files[f"ec2/{version}/meta-data.json"] = ec2
        if spec.user_data is not None:
            files[f"ec2/{version}/user-data"] = spec.user_data
    return files
