"""What the config drive and the OpenStack metadata service share: versions, files, field mapping.

Both serve the same ``openstack/<version>/`` tree (``meta_data.json``, ``user_data``,
``vendor_data.json``, ``vendor_data2.json``, ``network_data.json``); only the reading differs
(a mounted filesystem or HTTP), so readers are passed in as ``read(relative_path) -> bytes | None``
(None: the file is absent; ``MetadataError``: it is there but unusable).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

from cloudseed.clouds.openstack import CLOUD

LOG = logging.getLogger("cloudseed.datasources.openstack")

# Nova's metadata versions, oldest first; "latest" is used when none of these is offered (the wire
# contract, clouds/openstack.py, which a config drive's files follow too)
OS_VERSIONS = tuple(reversed(CLOUD.versions))
F = CLOUD.fields  # the documents' field names (clouds/openstack.py)
# DMI facts by which an OpenStack (Nova) guest recognises its cloud
NOVA_PRODUCTS = ("OpenStack Nova", "OpenStack Compute")
OPENSTACK_ASSET_TAGS = NOVA_PRODUCTS + ("OpenTelekomCloud", "SAP CCloud VM", "HUAWEICLOUD")

Reader = Callable[[str], "bytes | None"]


class MetadataError(Exception):
    """Metadata was found but cannot be used; the message names the file or URL."""


def choose_version(available: list[str]) -> str:
    """The newest version we understand among ``available``, else ``latest``."""
    for version in CLOUD.versions:
        if version in available:
            return version
    return CLOUD.names["latest"]


def load_json(data: bytes, where: str, types: tuple[type, ...] = (dict,)) -> Any:
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise MetadataError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise MetadataError(f"{where}: invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise MetadataError(f"{where}: expected a JSON {names}, got {type(value).__name__}")
    return value


def vendordata_bytes(value: Any, where: str) -> bytes | None:
    """vendor_data*.json as raw vendor-data: a string, a list of parts, or ``{"cloud-init": ...}``."""
    if isinstance(value, dict):
        value = value.get(F["vendor_cloud_init"])
        if isinstance(value, dict):
            LOG.warning("%s: the 'cloud-init' entry is a mapping, which is not vendor-data; ignored", where)
            return None
    if not value:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):  # parts, as in #cloud-config-archive
        return b"#cloud-config-archive\n" + json.dumps(value).encode("utf-8")
    LOG.warning("%s: vendor-data of type %s ignored", where, type(value).__name__)
    return None


def public_keys(meta: dict) -> list[str]:
    """SSH keys from ``public_keys`` ({name: key}) and ``keys`` ([{type: ssh, data: key}])."""
    found: list[str] = []
    pk = meta.get(F["public_keys"])
    if isinstance(pk, dict):
        found.extend(str(v).strip() for v in pk.values() if v)
    elif isinstance(pk, list):
        found.extend(str(v).strip() for v in pk if v)
    elif isinstance(pk, str):
        found.extend(line.strip() for line in pk.splitlines() if line.strip())
    for item in meta.get(F["keys"]) or []:
        if isinstance(item, dict) and item.get(F["key_type"], "ssh") == "ssh" and item.get(F["key_data"]):
            found.append(str(item[F["key_data"]]).strip())
    return list(dict.fromkeys(k for k in found if k))


# the vendor data documents whose signature (``NAME.sig``) covers the JSON as served: the kind it is made as
SIGNED_JSON = {"vendor_data.json": "vendor-data", "vendor_data2.json": "vendor-data2"}


def read_tree(read: Reader, versions: list[str], where: str, signatures: bool = False) -> dict[str, Any]:
    """Read one ``openstack/<version>/`` tree; MetadataError when meta_data.json is unusable.
    ``signatures``: also ``user_data.sig`` beside ``user_data`` and ``vendor_data.json.sig``,
    ``vendor_data2.json.sig`` beside the vendor data documents (signed user-data), in ``signed``:
    ``{kind: (signature, the document it covers or None for the data itself)}``."""
    version = choose_version(versions)
    paths = {role: CLOUD.tail(role, version) for role in CLOUD.requests if role != "versions"}
    tree: dict[str, Any] = {"version": version}
    meta_raw = read(paths["meta_data"])
    if meta_raw is None:
        raise MetadataError(f"{where}/{paths['meta_data']} is missing")
    tree["meta_data"] = load_json(meta_raw, f"{where}/{paths['meta_data']}")
    tree["user_data"] = read(paths["user_data"])
    signed: dict[str, tuple[bytes | None, bytes | None]] = {}
    tree["signed"] = signed
    if signatures and tree["user_data"]:
        signed["user-data"] = (read(f"{paths['user_data']}.sig"), None)
    for key in ("vendor_data", "vendor_data2", "network_data"):
        name = paths[key].rpartition("/")[2]
        raw = read(paths[key])
        if raw is None:
            continue
        if signatures and name in SIGNED_JSON:
            signed[SIGNED_JSON[name]] = (read(f"{paths[key]}.sig"), raw)
        try:
            types: tuple[type, ...] = (dict,) if key == "network_data" else (dict, list, str)
            tree[key] = load_json(raw, f"{where}/{paths[key]}", types)
        except MetadataError as e:  # optional files: report and carry on
            LOG.error("%s; ignored", e)
            tree.setdefault("errors", []).append(str(e))
    return tree


def fill_datasource(ds: Any, tree: dict[str, Any], where: str) -> None:
    """Set a Datasource's fields from a tree read by ``read_tree``."""
    meta = dict(tree["meta_data"])
    uuid = meta.get(F["instance_id"])
    if not uuid:
        raise MetadataError(f"{where}: meta_data.json has no 'uuid' (the instance id)")
    admin_pass = meta.pop(F["admin_pass"], None)
    if admin_pass:
        ds.extra["admin_pass"] = admin_pass
    meta["instance-id"] = str(uuid)
    if meta.get(F["hostname"]):
        meta["local-hostname"] = meta[F["hostname"]]
    if meta.get(F["zone"]):
        meta["availability-zone"] = meta[F["zone"]]
        ds.availability_zone = str(meta[F["zone"]])
    ds.metadata = meta
    ds.public_keys = public_keys(meta)
    ds.userdata_raw = tree.get("user_data")
    ds.vendordata_raw = vendordata_bytes(tree.get("vendor_data"), f"{where}/vendor_data.json")
    ds.vendordata2_raw = vendordata_bytes(tree.get("vendor_data2"), f"{where}/vendor_data2.json")
    if any(signature for signature, _ in (tree.get("signed") or {}).values()):
        from cloudseed.agent.userdata_trust import keep_signature

        for kind, (signature, document) in tree["signed"].items():
            keep_signature(ds, kind, signature, document)
    network = tree.get("network_data")
    if isinstance(network, dict) and network and ds.ctx.ds_cfg(ds.name).get("apply_network_config", True) \
            is not False:
        ds.network_config = network
    ds.raw = {"meta_data": meta, "version": tree["version"]}
    for key in ("vendor_data", "vendor_data2", "network_data", "ec2_metadata"):
        if tree.get(key) is not None:
            ds.raw[key] = tree[key]
    if tree.get("errors"):
        getattr(ds, "warnings", []).extend(tree["errors"])
