"""What a seed is made from: one instance's identity, keys and data, whatever its source.

An ``InstanceSpec`` is filled either from files named on the command line or from a record of
the metadata server's registry. The seed layouts in ``content`` derive every document from
``spec.to_record()`` through ``provider/instance_data``, the code the metadata server uses, so a
seed and the server publish the same thing for the same instance; what only files can give
(extra meta-data, a network config file, binary vendor data) is applied on top.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from cloudseed.core.yaml_loading import load_yaml
from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.seeds.errors import SeedError

FIXED_CREATED_AT = "2000-01-01T00:00:00Z"  # a spec from files: the same input gives the same bytes


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
    record: Optional[InstanceRecord] = None  # the registry's record, when the spec comes from one
    # signs what the seed carries: (kind, data) -> armored SSH signature, written beside the data
    # (cloudseed.core.userdata_signatures); None: an unsigned seed
    signer: Optional[Any] = None

    def to_record(self) -> InstanceRecord:
        """The instance as the provider's record (the registry's own record when there is one)."""
        if self.record is not None:
            return self.record
        vendor = [self.vendor_data, self.vendor_data2]
        for i, value in enumerate(vendor):
            if isinstance(value, bytes):
                try:
                    vendor[i] = value.decode("utf-8")
                except UnicodeDecodeError:
                    pass  # binary: a NoCloud seed writes it as given, a config drive refuses it
        name = self.name or self.hostname or self.instance_id
        return InstanceRecord(
            instance_id=self.instance_id, name=name, hostname=self.hostname or name,
            availability_zone=self.availability_zone or "nova", project_id=self.project_id or "",
            addresses=[{"address": self.local_ipv4, "network": "default"}] if self.local_ipv4 else [],
            ssh_keys=[{"name": k.name, "type": k.type, "data": k.data} for k in self.ssh_keys],
            user_data=self.user_data, vendor_data=vendor[0], vendor_data2=vendor[1], meta=dict(self.meta),
            launch_index=self.launch_index, instance_type=self.instance_type or "m1.small",
            ami_id=self.ami_id or "ami-00000000", created_at=FIXED_CREATED_AT)


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
        data = load_yaml(raw.decode("utf-8")) if raw.strip() else {}
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
    """An InstanceSpec from the metadata server's registry (``cloudseed serve --db URL``).

    The registry must exist already (a seed build never creates one)."""
    from cloudseed.provider.registry import RegistryError, open_registry

    try:
        registry = open_registry(url, create=False)
    except (RegistryError, OSError) as error:
        raise SeedError(f"--db {url}: {error}")
    try:
        record = registry.get(instance_id)
    finally:
        registry.close()
    if record is None:
        raise SeedError(f"--instance {instance_id}: no such instance in the registry {url}")
    spec = InstanceSpec(
        instance_id=record.instance_id, hostname=record.hostname, name=record.name,
        availability_zone=record.availability_zone, project_id=record.project_id,
        launch_index=record.launch_index, instance_type=record.instance_type, ami_id=record.ami_id,
        local_ipv4=record.addresses[0]["address"] if record.addresses else None, meta=dict(record.meta),
        user_data=record.user_data, vendor_data=record.vendor_data, vendor_data2=record.vendor_data2,
        record=record,
    )
    spec.ssh_keys = [SshKey(name=key["name"], type=key["type"], data=key["data"]) for key in record.ssh_keys]
    return spec
