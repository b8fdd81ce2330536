"""Instance data: what the agent knows about this instance, for ``query``, templates and scripts.

Built once per stage and written as two files: ``instance-data-sensitive.json`` (0600, everything) and
``instance-data.json`` (world-readable, sensitive keys replaced by a marker). The standard keys
live under ``v1`` (``instance_id``, ``local_hostname``, ``cloud_name``, ``region``...) with
cloud-init's hyphenated aliases, and are mirrored at the top level for templates and ``query``.
"""

from __future__ import annotations

import copy
import os

from cloudseed.agent.state import Paths, write_json
from cloudseed.core.root import TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

REDACTED = "redacted for non-root user"
# Always sensitive, whatever the datasource: the merged config (passwords, keys) and credentials.
SENSITIVE_KEYS = ("merged_cfg", "security-credentials", "ds/extra", "ds/meta_data/admin_pass",
                  "ds/meta_data/password", "ds/user_data", "ds/vendor_data")



def canonical_cloud_id(cloud_name: str | None, region: str | None, platform: str | None) -> str:
    """cloud-init's canonical cloud id (``v1.cloud_id``, ``cloud-id``): the cloud name, with AWS's China
    and GovCloud partitions and Azure China told apart by region; the platform when the cloud is unknown."""
    cloud_name = cloud_name or "unknown"
    region = region or "unknown"
    if cloud_name == "aws" and region.startswith("cn-"):
        return "aws-china"
    if cloud_name == "aws" and region.startswith("us-gov-"):
        return "aws-gov"
    if cloud_name == "azure" and region.startswith("china"):
        return "azure-china"
    return (platform or "unknown") if cloud_name == "unknown" else cloud_name

def _distro_facts(root: TargetRoot) -> tuple[str, str, str]:
    from cloudseed.agent.distros import read_os_release

    info = read_os_release(root)
    return info.get("ID", ""), info.get("VERSION_ID", ""), info.get("VERSION_CODENAME", "")


def system_platform(uname: os.uname_result) -> str:
    """What ``platform.platform()`` says on Linux (``Linux-6.1.0-13-amd64-x86_64-with-glibc2.36``).

    Built here because the platform module runs ``uname -p`` in a subprocess for the processor
    field, a process start per stage at boot; the processor is left blank, as Debian's uname has it.
    """
    try:
        libc = (os.confstr("CS_GNU_LIBC_VERSION") or "").replace(" ", "")
    except (ValueError, OSError):
        libc = ""
    text = "-".join(part.strip() for part in (uname.sysname, uname.release, uname.machine, "with" if libc else "",
                                               libc) if part)
    for obstacle in "/\\:;\"()":
        text = text.replace(obstacle, "-")
    text = text.replace(" ", "_").replace("unknown", "")
    while "--" in text:
        text = text.replace("--", "-")
    return text.rstrip("-")


def build(root: TargetRoot, datasource: Any, merged_cfg: dict | None,
          extra: dict | None = None) -> dict[str, Any]:
    """The full instance data (not redacted)."""
    import sys

    distro, version, release = _distro_facts(root)
    uname = os.uname()
    python_version = sys.version.split()[0]
    ds_section: dict[str, Any] = {}
    v1: dict[str, Any] = {
        "cloud_name": "none", "platform": "none", "subplatform": "", "instance_id": None,
        "local_hostname": None, "region": None, "availability_zone": None, "public_ssh_keys": [],
    }
    if datasource is not None:
        ds_section = copy.deepcopy(datasource.raw) if datasource.raw else {"meta_data": datasource.metadata}
        v1.update({
            "cloud_name": datasource.cloud_name,
            "platform": datasource.platform,
            "subplatform": datasource.subplatform,
            "instance_id": datasource.instance_id,
            "local_hostname": datasource.local_hostname,
            "region": datasource.region,
            "availability_zone": datasource.availability_zone,
            "public_ssh_keys": list(datasource.public_keys),
        })
        if datasource.extra:
            ds_section["extra"] = copy.deepcopy(datasource.extra)
    v1.update({
        "cloud_id": canonical_cloud_id(v1["cloud_name"], v1["region"], v1["platform"]),
        "distro": distro, "distro_version": version, "distro_release": release,
        "kernel_release": uname.release, "machine": uname.machine,
        "python_version": python_version, "system_platform": system_platform(uname),
        "variant": distro,
    })
    for key in ("cloud_name", "instance_id", "local_hostname", "availability_zone"):
        v1[key.replace("_", "-")] = v1[key]
    v1["_beta_keys"] = ["subplatform"]   # keys whose meaning may still change, as cloud-init marks them
    data: dict[str, Any] = {
        "v1": v1,
        "ds": ds_section,
        "base64_encoded_keys": [],
        "merged_cfg": copy.deepcopy(merged_cfg or {}),
        "sys_info": {"dist": [distro, version, release], "python": python_version,
                     "uname": [*uname, ""], "variant": distro},  # platform.uname()'s six fields
    }
    for key, value in v1.items():
        data.setdefault(key.replace("-", "_"), value)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    sensitive = list(SENSITIVE_KEYS)
    if datasource is not None:
        sensitive.extend(f"ds/meta_data/{k}" for k in datasource.sensitive_keys)
    data["sensitive_keys"] = sorted(set(sensitive))
    return data


def redact(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with every path in ``sensitive_keys`` replaced by the marker."""
    out = copy.deepcopy(data)
    for key_path in data.get("sensitive_keys", []):
        parts = key_path.split("/")
        node: Any = out
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict) and parts[-1] in node:
            node[parts[-1]] = REDACTED
    return out


def write(paths: Paths, data: dict[str, Any]) -> None:
    write_json(paths.root, paths.instance_data_sensitive_file, data, mode=0o600)
    write_json(paths.root, paths.instance_data_file, redact(data), mode=0o644)


def save(paths: Paths, data: dict[str, Any]) -> None:
    """``write``, with a failure logged rather than raised (the stage goes on)."""
    try:
        write(paths, data)
    except (OSError, TypeError, ValueError) as e:
        import logging

        logging.getLogger("cloudseed.stages").error("cannot write instance data: %s", e)


def with_config(data: dict[str, Any], merged_cfg: dict | None) -> dict[str, Any]:
    """``data`` with the merged config of this boot (known only after user-data was processed)."""
    data["merged_cfg"] = copy.deepcopy(merged_cfg or {})
    return data


def describes(data: Any, datasource: Any) -> bool:
    """Does instance data ``data`` describe ``datasource`` (None: no datasource)?"""
    v1 = data.get("v1") if isinstance(data, dict) else None
    if not isinstance(v1, dict):
        return False
    if datasource is None:
        return v1.get("instance_id") is None
    return v1.get("instance_id") == datasource.instance_id and v1.get("cloud_name") == datasource.cloud_name


def load(paths: Paths, repair: bool = False) -> dict[str, Any] | None:
    """The most complete instance data this user may read (sensitive file when readable).

    ``repair`` (the agent's stages): both files are checked, a damaged one is set aside with a
    warning (``state_files``) and None returned, so the caller writes both anew.
    """
    from cloudseed.agent.state import read_json

    if repair:
        from cloudseed.agent.state.files import load_json

        found = [load_json(paths.root, inner, _record_problem)
                 for inner in (paths.instance_data_sensitive_file, paths.instance_data_file)]
        return found[0] if all(isinstance(data, dict) for data in found) else None
    for inner in (paths.instance_data_sensitive_file, paths.instance_data_file):
        host = paths.root.path(inner)
        if os.path.exists(host) and os.access(host, os.R_OK):
            data = read_json(paths.root, inner)
            if isinstance(data, dict):
                return data
    return None


def _record_problem(data: Any) -> str | None:
    return None if isinstance(data, dict) and isinstance(data.get("v1"), dict) else "no v1 object"
