"""The per-cloud settings of an instance record (``InstanceRecord.clouds``) and their validation.

``clouds`` is ``{"gce": {...}, "digitalocean": {...}, "hetzner": {...}, "oracle": {...}}``; every
key is optional and what is not given is derived from the record's common fields when the
metadata is built (``provider/instance_data/{gce,digitalocean,hetzner,oracle}.py``). Kept in the
record's stored JSON body (``clouds`` in ``sql.py``'s body fields), so no schema migration.
"""

from __future__ import annotations

import re
from typing import Any

from cloudseed.provider.registry.errors import RecordError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,254}$")
MAX_ATTRIBUTE = 256 * 1024  # GCE's limit for one metadata value

# cloud -> key -> description ("attributes" kinds are {string: string})
FIELDS: dict[str, dict[str, str]] = {
    "gce": {
        "project_id": "project/project-id (default: the record's project_id, else 'cloudseed-project')",
        "numeric_project_id": "project/numeric-project-id (digits; default derived from the project id)",
        "numeric_id": "instance/id (digits; default derived from the instance id)",
        "machine_type": "instance/machine-type's last part (default: the record's instance_type)",
        "attributes": "instance/attributes: {key: value} (user-data, ssh-keys, startup-script, "
                      "enable-oslogin, block-project-ssh-keys...); record keys and user-data are added "
                      "unless given here",
        "project_attributes": "project/attributes: {key: value} (ssh-keys, enable-oslogin...)",
        "tags": "instance/tags: network tags",
        "service_accounts": "instance/service-accounts: [{email, scopes}], the first is 'default' (default: the "
                            "project's NUMBER-compute@developer.gserviceaccount.com, scope cloud-platform; [] none)",
        "licenses": "license ids (digits) in identity tokens asked with format=full&licenses=TRUE",
    },
    "digitalocean": {
        "droplet_id": "droplet_id (digits; default derived from the instance id)",
        "region": "region (default: the availability zone)",
        "floating_ip": "floating_ip.ipv4.ip_address",
        "anchor_ipv4": "{ip_address, netmask, gateway}: the public interface's anchor address",
        "gateway": "the public IPv4 gateway (default: the first address of its subnet)",
        "nameservers": "dns.nameservers (default 67.207.67.2, 67.207.67.3)",
        "features": "features: {name: bool}",
        "tags": "tags (default: the record's tag keys)",
    },
    "hetzner": {
        "numeric_id": "instance-id (digits; default derived from the instance id)",
        "region": "region (default: the availability zone minus its last '-part')",
        "private_networks": "[{ip, alias_ips, interface_num, mac_address, network_id, network_name, "
                            "network, subnet, gateway}] (default derived from the private addresses)",
    },
    "scaleway": {
        "server_id": "id (default: a UUID derived from the instance id)",
        "commercial_type": "commercial_type (default: the record's instance_type)",
        "organization": "organization and project (default: the record's project_id)",
        "server_tags": "tags: a list of strings; AUTHORIZED_KEY=<key, spaces as _> tags add SSH keys",
    },
    "akamai": {
        "numeric_id": "the Linode id (digits; default derived from the instance id; the guest's DMI serial)",
        "label": "label (default: the hostname)",
        "region": "region (default: the availability zone)",
        "type": "type (default: the record's instance_type)",
        "host_uuid": "host_uuid (default derived from the instance id)",
        "tags": "tags (default: the record's tag keys)",
    },
    "cloudcix": {
        "gateway": "the default route of the first NIC (default: the first address of its subnet)",
        "nameservers": "nameservers (default: the gateway)",
        "search": "DNS search domains",
    },
    "cloudstack": {
        "service_offering": "meta-data/service-offering (default: the record's instance_type)",
        "vm_id": "meta-data/vm-id (default: the instance id)",
    },
    "exoscale": {
        "service_offering": "meta-data/service-offering (default: the record's instance_type)",
        "vm_id": "meta-data/vm-id (default: the instance id)",
    },
    "aliyun": {
        "region_id": "meta-data/region-id (default: the availability zone minus its last '-x')",
        "image_id": "meta-data/image-id (default: the record's ami_id)",
        "vpc_id": "meta-data/vpc-id (default derived from the project id)",
        "owner_account_id": "meta-data/owner-account-id (default derived from the project id)",
    },
    "azure": {
        "subscription_id": "compute.subscriptionId (default: a UUID derived from the project id)",
        "resource_group": "compute.resourceGroupName (default: the project id)",
        "location": "compute.location (default: the availability zone)",
        "zone": "compute.zone (default: none)",
        "vm_size": "compute.vmSize (default: the record's instance_type)",
        "admin_username": "the admin user (ovf-env.xml UserName, osProfile.adminUsername; default azureuser)",
        "admin_password": "ovf-env.xml UserPassword (a name-like string; default: none, password logins off)",
        "os_type": "linux (default) or windows: compute.osType, and ovf-env.xml's provisioning set (windows: "
                   "WindowsProvisioningConfigurationSet, the media's drive tag and CustomData.bin, as "
                   "cloudbase-init reads them)",
        "system_identity": "false: no system-assigned managed identity (default true: the VM has one)",
        "user_identities": "user-assigned managed identities: [{name, client_id, object_id, resource_id}] (ids "
                           "default derived from the name)",
    },
    "vultr": {
        "instance_id": "instance-v2-id and instanceid (default: the record's instance id)",
        "region": "region.regioncode (default: the availability zone's first '-part', upper case)",
        "country_code": "region.countrycode (cloud-init 22.4 then uses it, lower case, as the region)",
        "private_mtu": "mtu of the private (VPC) interfaces (number; default 1450)",
        "startup_script": "startup-script (text; default empty)",
    },
    "upcloud": {
        "instance_id": "instance_id (default: the record's instance id; the guest's DMI system UUID)",
        "region": "region (default: the availability zone)",
        "nameservers": "network.dns (default 94.237.127.9, 94.237.40.9)",
    },
    "nwcs": {
        "nameservers": "the first NIC's dns_nameservers in the network config (default 9.9.9.9, 149.112.112.112)",
    },
    "maas": {
        "consumer_key": "the OAuth consumer key the guest signs with (MAAS API: required with token_key, "
                        "token_secret)",
        "token_key": "the OAuth token key",
        "token_secret": "the OAuth token secret",
        "consumer_secret": "the OAuth consumer secret (default empty, as MAAS's)",
    },
    "oracle": {
        "region": "region (default: the availability zone minus its last '-part')",
        "canonical_region": "canonicalRegionName (default: the region's identifier in the table of OCI regions)",
        "region_key": "regionInfo.regionKey (default: the table's three-letter key of the region)",
        "compartment_id": "compartmentId (default derived from the project id)",
        "shape": "shape (default: the record's instance_type)",
        "subnet_cidrs": "{network: CIDR} for vnics' subnetCidrBlock (default: the address prefix)",
        "virtual_router_ips": "{network: IP} for vnics' virtualRouterIp (default: first address of the subnet)",
        "bare_metal": "true: vnics carry nicIndex, as on bare metal shapes (default false: a VM)",
        "tenancy_id": "the tenancy OCID in the instance principal certificate (default derived from the project id)",
    },
}


def validate_clouds(value: Any) -> dict:
    """``value`` checked and normalised; raises ``RecordError`` (``clouds.CLOUD.KEY``) for the first bad key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError("clouds", "must be an object of per-cloud settings (gce, digitalocean, hetzner, oracle)")
    clean: dict[str, Any] = {}
    for cloud, settings in value.items():
        known = FIELDS.get(cloud)
        if known is None:
            raise RecordError(f"clouds.{cloud}", f"unknown cloud (known: {', '.join(sorted(FIELDS))})")
        if settings is None:
            continue
        if not isinstance(settings, dict):
            raise RecordError(f"clouds.{cloud}", "must be an object")
        out: dict[str, Any] = {}
        for key, item in settings.items():
            where = f"clouds.{cloud}.{key}"
            if key not in known:
                raise RecordError(where, f"unknown field (known: {', '.join(sorted(known))})")
            if item is None:
                continue
            if key in ("attributes", "project_attributes"):
                _attributes(where, item)
            elif key == "private_mtu":
                if isinstance(item, bool) or not isinstance(item, int) or not 576 <= item <= 9216:
                    raise RecordError(where, "must be a number from 576 to 9216")
            elif key == "startup_script":
                if not isinstance(item, str) or len(item.encode("utf-8")) > MAX_ATTRIBUTE:
                    raise RecordError(where, f"must be a string of at most {MAX_ATTRIBUTE} bytes")
            elif key in ("numeric_id", "numeric_project_id", "droplet_id"):
                if isinstance(item, bool) or not (isinstance(item, int) and item >= 0
                                                  or isinstance(item, str) and item.isascii() and item.isdigit()
                                                  and len(item) <= 20):
                    raise RecordError(where, "must be a number (digits)")
                item = int(item)
            elif key in ("service_accounts", "user_identities"):
                item = _account_list(where, key, item)
            elif key == "licenses":
                if not isinstance(item, list) or not all(isinstance(t, str) and t.isascii() and t.isdigit()
                                                         and len(t) <= 20 for t in item):
                    raise RecordError(where, "must be a list of license ids (digits)")
            elif key == "system_identity":
                if not isinstance(item, bool):
                    raise RecordError(where, "must be true or false")
            elif key == "server_tags":
                if not isinstance(item, list) or not all(isinstance(t, str) and 0 < len(t) <= 8192
                                                         and t.isprintable() for t in item):
                    raise RecordError(where, "must be a list of printable strings")
            elif key in ("tags", "nameservers", "search"):
                if not isinstance(item, list) or not all(isinstance(t, str) and _NAME_RE.match(t) for t in item):
                    raise RecordError(where, "must be a list of names")
            elif key in ("features", "anchor_ipv4", "subnet_cidrs", "virtual_router_ips"):
                if not isinstance(item, dict) or not all(isinstance(k, str) for k in item):
                    raise RecordError(where, "must be an object")
            elif key == "os_type":
                if item not in ("linux", "windows"):
                    raise RecordError(where, "must be linux or windows")
            elif key == "bare_metal":
                if not isinstance(item, bool):
                    raise RecordError(where, "must be true or false")
            elif key == "private_networks":
                if not isinstance(item, list) or not all(isinstance(n, dict) for n in item):
                    raise RecordError(where, "must be a list of objects")
            elif not isinstance(item, str) or not _NAME_RE.match(item):
                raise RecordError(where, "must be a name: letters, digits, '.', '_', ':', '@', '/' or '-'")
            out[key] = item
        clean[cloud] = out
    return clean


def _attributes(where: str, item: Any) -> None:
    if not isinstance(item, dict):
        raise RecordError(where, "must be an object of attribute names to string values")
    for key, text in item.items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z0-9_-]{1,128}$", key):
            raise RecordError(f"{where}.{key}", "an attribute name is 1-128 letters, digits, '_' or '-'")
        if not isinstance(text, str) or len(text.encode("utf-8")) > MAX_ATTRIBUTE:
            raise RecordError(f"{where}.{key}", f"must be a string of at most {MAX_ATTRIBUTE} bytes")


_EMAIL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}@[A-Za-z0-9][A-Za-z0-9.-]{0,253}$")
_SCOPE_RE = re.compile(r"^[\x21-\x7e]{1,512}$")
_ACCOUNT_KEYS = {"service_accounts": ("email", "scopes"),
                 "user_identities": ("name", "client_id", "object_id", "resource_id")}


def _account_list(where: str, key: str, item: Any) -> list:
    """GCE service accounts ``[{email, scopes}]`` or Azure user-assigned identities ``[{name, client_id,
    object_id, resource_id}]``, checked entry by entry."""
    if not isinstance(item, list) or len(item) > 32:
        raise RecordError(where, "must be a list of at most 32 objects")
    known = _ACCOUNT_KEYS[key]
    seen = set()
    for index, entry in enumerate(item):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise RecordError(at, "must be an object")
        for name in entry:
            if name not in known:
                raise RecordError(f"{at}.{name}", f"unknown field (known: {', '.join(known)})")
        if key == "service_accounts":
            email = entry.get("email")
            if not isinstance(email, str) or not _EMAIL_RE.match(email):
                raise RecordError(f"{at}.email", "must be an e-mail address (NAME@PROJECT.iam.gserviceaccount.com)")
            scopes = entry.get("scopes", [])
            if not isinstance(scopes, list) or not all(isinstance(x, str) and _SCOPE_RE.match(x) for x in scopes):
                raise RecordError(f"{at}.scopes", "must be a list of scope URLs")
            ident = email
        else:
            name = entry.get("name")
            if not isinstance(name, str) or not _NAME_RE.match(name) or "/" in name:
                raise RecordError(f"{at}.name", "must be a name: letters, digits, '.', '_' or '-'")
            for field in ("client_id", "object_id"):
                if field in entry and not _is_uuid(entry[field]):
                    raise RecordError(f"{at}.{field}", "must be a UUID")
            if "resource_id" in entry and not (isinstance(entry["resource_id"], str)
                                               and entry["resource_id"].startswith("/subscriptions/")
                                               and _NAME_RE.match(entry["resource_id"][1:])):
                raise RecordError(f"{at}.resource_id", "must be an ARM id (/subscriptions/...)")
            ident = name
        if ident in seen:
            raise RecordError(at, f"{ident} is listed twice")
        seen.add(ident)
    return item


def _is_uuid(value: Any) -> bool:
    import uuid

    try:
        return isinstance(value, str) and str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False
