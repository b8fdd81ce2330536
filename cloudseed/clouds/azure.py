"""Azure as its guest reads it: IMDS (``/metadata/instance?api-version=...`` with ``Metadata: true``,
the user-data beside it as base64 text) and the wire server (168.63.129.16 unless DHCP names
another): the goal state with the ``x-ms-*`` headers, then a health report posted back.

Read by ``agent/datasources/azure.py`` and ``_azure_wireserver.py``; served by
``provider/server/apis/azure.py`` and ``_azure_wireserver.py``. The OVF environment on the
provisioning disc is not asked over the network, but its names are declared here too (``OVF``):
the guest reads them (``_azure_ovf.py``), the server's seed writes them.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

METADATA = ("Metadata", "true")
WIRE = (("x-ms-agent-name", "cloudseed"), ("x-ms-version", "2012-11-30"))

# the IMDS document's fields the guest reads and the server must write, by role (the ``compute`` and
# ``network`` parts', an OS profile's, a public key's, a NIC's, an address's, a subnet's): the
# datasource reads them, the server's document writes them
FIELDS = {"compute": "compute", "network": "network", "vm_id": "vmId", "name": "name", "location": "location",
          "zone": "zone", "fault_domain": "platformFaultDomain", "os_profile": "osProfile",
          "computer_name": "computerName", "admin_username": "adminUsername", "public_keys": "publicKeys",
          "key_data": "keyData", "key_path": "path", "user_data": "userData", "tags_list": "tagsList",
          "tag_name": "name", "interface": "interface", "mac": "macAddress", "ipv4": "ipv4", "ipv6": "ipv6",
          "ip_address": "ipAddress", "private_ip": "privateIpAddress", "public_ip": "publicIpAddress",
          "subnet": "subnet", "subnet_address": "address", "prefix": "prefix"}

# the wire server's XML documents, by role: the element paths the reading side finds (the guest in
# the goal state the server writes; the server in the health report the guest posts)
GOAL_STATE = {"incarnation": "Incarnation", "container_id": "Container/ContainerId",
              "instance_id": "Container/RoleInstanceList/RoleInstance/InstanceId"}
_ROLE = "Container/RoleInstanceList/Role"
HEALTH_REPORT = {"root": "Health", "incarnation": "GoalStateIncarnation", "container_id": "Container/ContainerId",
                 "instance_id": f"{_ROLE}/InstanceId", "state": f"{_ROLE}/Health/State",
                 "substatus": f"{_ROLE}/Health/Details/SubStatus",
                 "description": f"{_ROLE}/Health/Details/Description"}

# the provisioning disc's ``ovf-env.xml`` (not asked over the network: the server's seed writes it,
# the guest reads it from the disc): its namespaces and the paths the guest finds, by role (a
# public key's under ``public_keys``; the rest under the Linux provisioning set)
OVF_NAMESPACES = {"oe": "http://schemas.dmtf.org/ovf/environment/1", "wa": "http://schemas.microsoft.com/windowsazure"}
OVF = {"root": "Environment", "linux_set": "wa:ProvisioningSection/wa:LinuxProvisioningConfigurationSet",
       "username": "wa:UserName", "password": "wa:UserPassword",
       "disable_password_auth": "wa:DisableSshPasswordAuthentication",
       "public_keys": "wa:SSH/wa:PublicKeys/wa:PublicKey", "key_fingerprint": "wa:Fingerprint",
       "key_path": "wa:Path", "key_value": "wa:Value", "hostname": "wa:HostName", "custom_data": "wa:CustomData",
       "preprovisioned": "wa:PlatformSettingsSection/wa:PlatformSettings/wa:PreprovisionedVm"}

CLOUD = Cloud(
    "azure", datasource="Azure",
    addresses=("http://169.254.169.254",),
    base="/metadata",
    prefixes=("/metadata/", "/machine"),
    versions=("2021-08-01",),
    names={"metadata": METADATA[0], "metadata_value": METADATA[1], "wire_server": "168.63.129.16",
           "wire_version": WIRE[1][0]},
    fields=FIELDS,
    requests={
        "instance": Request("/metadata/instance", query="api-version={version}", sends=(METADATA,), form="json",
                            fields=(*(f"{FIELDS['compute']}.{FIELDS[k]}" for k in ("vm_id", "name", "location",
                                                                                  "public_keys")),
                                    f"{FIELDS['compute']}.{FIELDS['os_profile']}.{FIELDS['computer_name']}",
                                    FIELDS["network"])),
        "user_data": Request("/metadata/instance/compute/userData", query="api-version={version}&format=text",
                             sends=(METADATA,), form="base64"),
        "goal_state": Request("/machine/", query="comp=goalstate", sends=WIRE, form="text"),
        "health": Request("/machine", method="POST", query="comp=health",
                          sends=(*WIRE, ("Content-Type", "text/xml; charset=utf-8"))),
    },
)
