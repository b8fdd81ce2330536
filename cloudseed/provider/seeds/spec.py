"""What a seed is made from: one instance's identity, keys and data, whatever its source.

An ``InstanceSpec`` is filled either from files named on the command line or from a record of
the metadata server's registry; the seed layouts in ``content`` only read the spec.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from cloudseed.provider.seeds.errors import SeedError


@dataclass
class SshKey:
    name: str
    type: str
    data: str


@dataclass
class InstanceSpec:
    instance_id: str
    hostname: Optional[str] = None
    name: Optional[str] = None
    availability_zone: Optional[str] = None
    project_id: Optional[str] = None
    launch_index: int = 0
    instance_type: Optional[str] = None
    ami_id: Optional[str] = None
    local_ipv4: Optional[str] = None
    ssh_keys: list[SshKey] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # OpenStack "meta" (user key/values)
    extra_meta_data: dict[str, Any] = field(default_factory=dict)  # from --meta-data FILE
    user_data: Optional[bytes] = None
    vendor_data: Any = None  # JSON-able value, or bytes given verbatim
    vendor_data2: Any = None
    network_config: Optional[dict[str, Any]] = None  # v1/v2 YAML or network_data.json
    network_config_raw: Optional[bytes] = None  # the file as given (NoCloud writes it verbatim)


def read_bytes(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise SeedError(f"{what} {path}: cannot read: {error.strerror or error}")


def load_mapping(path: str, what: str) -> dict[str, Any]:
    """A YAML or JSON file that must hold a mapping; errors name the file and line."""
    raw = read_bytes(path, what)
    try:
        data = yaml.safe_load(raw.decode("utf-8")) if raw.strip() else {}
    except UnicodeDecodeError as error:
        raise SeedError(f"{what} {path}: not UTF-8 text ({error.reason} at byte {error.start})")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SeedError(f"{what} {path}{where}: invalid YAML/JSON: {problem}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SeedError(f"{what} {path}: must be a mapping of keys to values, got {type(data).__name__}")
    return data


def load_vendor_data(path: str) -> Any:
    """Vendor data from a file: a JSON document is kept as data, anything else as text."""
    raw = read_bytes(path, "vendor data")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return raw


def parse_ssh_key(line: str, name: str, where: str) -> SshKey:
    parts = line.strip().split()
    if len(parts) < 2 or not (parts[0].startswith(("ssh-", "ecdsa-", "sk-"))):
        raise SeedError(f"{where}: not an OpenSSH public key line: {line.strip()[:40]!r}")
    return SshKey(name=name, type=parts[0].split("-", 1)[1] if parts[0].startswith("ssh-") else parts[0],
                  data=line.strip())


def spec_from_files(instance_id: str, hostname: str | None = None, meta_data: str | None = None,
                    user_data: str | None = None, vendor_data: str | None = None,
                    network_config: str | None = None, ssh_keys: list[str] | None = None) -> InstanceSpec:
    """An InstanceSpec from command-line values and files."""
    if not instance_id or not instance_id.strip():
        raise SeedError("--instance-id: must not be empty")
    spec = InstanceSpec(instance_id=instance_id, hostname=hostname, name=hostname)
    if meta_data:
        spec.extra_meta_data = load_mapping(meta_data, "meta data")
    if user_data:
        spec.user_data = read_bytes(user_data, "user data")
    if vendor_data:
        spec.vendor_data = load_vendor_data(vendor_data)
    if network_config:
        spec.network_config_raw = read_bytes(network_config, "network config")
        spec.network_config = load_mapping(network_config, "network config")
    for path in ssh_keys or []:
        text = read_bytes(path, "ssh key").decode("utf-8", "replace")
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        if not lines:
            raise SeedError(f"ssh key {path}: no public key in the file")
        for number, line in enumerate(lines):
            key_name = os.path.basename(path).rsplit(".", 1)[0] + (f"-{number}" if number else "")
            spec.ssh_keys.append(parse_ssh_key(line, key_name, path))
    return spec


def spec_from_registry(url: str, instance_id: str) -> InstanceSpec:
    """An InstanceSpec from the metadata server's registry (``cloudseed serve --db URL``)."""
    try:
        from cloudseed.provider.registry import open_registry
    except ImportError as error:
        raise SeedError(f"--db: the instance registry is not available in this build ({error})")
    registry = open_registry(url)
    try:
        record = registry.get(instance_id)
    finally:
        close = getattr(registry, "close", None)
        if close:
            close()
    if record is None:
        raise SeedError(f"--instance {instance_id}: no such instance in the registry {url}")
    addresses = list(getattr(record, "addresses", None) or [])
    spec = InstanceSpec(
        instance_id=record.instance_id,
        hostname=getattr(record, "hostname", None),
        name=getattr(record, "name", None) or getattr(record, "hostname", None),
        availability_zone=getattr(record, "availability_zone", None),
        project_id=getattr(record, "project_id", None),
        launch_index=int(getattr(record, "launch_index", 0) or 0),
        instance_type=getattr(record, "instance_type", None),
        ami_id=getattr(record, "ami_id", None),
        local_ipv4=addresses[0].get("address") if addresses and isinstance(addresses[0], dict) else None,
        meta=dict(getattr(record, "meta", None) or {}),
        user_data=getattr(record, "user_data", None),
        vendor_data=getattr(record, "vendor_data", None),
        vendor_data2=getattr(record, "vendor_data2", None),
        network_config=getattr(record, "network_data", None),
    )
    for number, key in enumerate(getattr(record, "ssh_keys", None) or []):
        spec.ssh_keys.append(SshKey(name=key.get("name") or f"key-{number}", type=key.get("type", "ssh"),
                                    data=key["data"]))
    return spec
