"""An instance as Azure describes it: the IMDS document, the provisioning ``ovf-env.xml``, the goal state.

Settings come from ``record.clouds["azure"]`` when the registry knows that cloud (subscription_id,
resource_group, location, vm_size, admin_username, zone); what is not given is derived from
the common fields: the location is the availability zone, the VM size the instance type, the
resource group the project id, the subscription a UUID derived from the project, the ``vmId``
the instance id when it is a UUID, else a UUID derived from it. The admin user is
``azureuser`` unless set. SSH keys are the record's; custom data is the user-data.
"""

from __future__ import annotations

import base64
import ipaddress
import uuid
from typing import Any
from xml.sax.saxutils import escape

from cloudseed.clouds.azure import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

NAMESPACE = uuid.UUID("5b0c2f0e-8d4c-4c8e-9a55-3a4e0e2f7a11")  # cloudseed's, for derived UUIDs
DEFAULT_ADMIN = "azureuser"


def settings(record: InstanceRecord) -> dict:
    clouds = getattr(record, "clouds", None) or {}
    found = clouds.get("azure") if isinstance(clouds, dict) else None
    return found if isinstance(found, dict) else {}


def vm_id(record: InstanceRecord) -> str:
    try:
        return str(uuid.UUID(record.instance_id))
    except ValueError:
        return str(uuid.uuid5(NAMESPACE, "vm/" + record.instance_id))


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(vm_id(record))


def admin_username(record: InstanceRecord) -> str:
    return str(settings(record).get("admin_username") or DEFAULT_ADMIN)


def is_windows(record: InstanceRecord) -> bool:
    """``clouds.azure.os_type`` windows: the Windows provisioning set, as cloudbase-init reads it."""
    return str(settings(record).get("os_type") or "linux").lower() == "windows"


def container_id(record: InstanceRecord) -> str:
    return str(uuid.uuid5(NAMESPACE, "container/" + record.instance_id))


def role_instance_id(record: InstanceRecord) -> str:
    return f"{vm_id(record)}.{record.name}"


def compute(record: InstanceRecord) -> dict[str, Any]:
    az = settings(record)
    project = record.project_id or "cloudseed"
    subscription = str(az.get("subscription_id") or uuid.uuid5(NAMESPACE, "subscription/" + project))
    group = str(az.get("resource_group") or project)
    keys = [{F["key_data"]: k["data"], F["key_path"]: f"/home/{admin_username(record)}/.ssh/authorized_keys"}
            for k in record.ssh_keys]
    tags = record.tags if isinstance(record.tags, dict) else {}
    return {
        "azEnvironment": "AzurePublicCloud", "isHostCompatibilityLayerVm": "false",
        F["location"]: str(az.get("location") or record.availability_zone), F["name"]: record.name,
        "offer": "", "osType": "Windows" if is_windows(record) else "Linux",
        F["os_profile"]: {F["admin_username"]: admin_username(record),
                          F["computer_name"]: record.hostname.split(".")[0], "disablePasswordAuthentication": "true"},
        "placementGroupId": "", F["fault_domain"]: "0", "platformUpdateDomain": "0", "priority": "",
        "provider": "Microsoft.Compute", F["public_keys"]: keys, "publisher": "", "resourceGroupName": group,
        "resourceId": f"/subscriptions/{subscription}/resourceGroups/{group}/providers/"
                      f"Microsoft.Compute/virtualMachines/{record.name}",
        "sku": "", "subscriptionId": subscription,
        "tags": ";".join(f"{k}:{v}" for k, v in tags.items()),
        F["tags_list"]: [{F["tag_name"]: k, "value": str(v)} for k, v in tags.items()],
        F["user_data"]: base64.b64encode(record.user_data).decode("ascii") if record.user_data else "",
        "version": "", F["vm_id"]: vm_id(record), "vmScaleSetName": "",
        "vmSize": str(az.get("vm_size") or record.instance_type), F["zone"]: str(az.get("zone") or ""),
    }


def network(record: InstanceRecord) -> dict[str, Any]:
    result = []
    for mac, addresses in interfaces(record):
        nic: dict[str, Any] = {F["mac"]: mac.replace(":", "").upper()}
        for kind, v6 in ((F["ipv4"], False), (F["ipv6"], True)):
            private = [a for a in addresses if not a.get("public") and (":" in a["address"]) == v6]
            public = [a["address"] for a in addresses if a.get("public") and (":" in a["address"]) == v6]
            entries = [{F["private_ip"]: a["address"], F["public_ip"]: public[i] if i < len(public) else ""}
                       for i, a in enumerate(private)]
            subnets = []
            if private:
                prefix = private[0].get("prefix") or (64 if v6 else 24)
                net = ipaddress.ip_interface(f"{private[0]['address']}/{prefix}")
                subnets = [{F["subnet_address"]: str(net.network.network_address),
                            F["prefix"]: str(net.network.prefixlen)}]
            nic[kind] = {F["ip_address"]: entries, F["subnet"]: subnets}
        result.append(nic)
    return {F["interface"]: result}


def document(record: InstanceRecord) -> dict[str, Any]:
    """The IMDS ``/metadata/instance`` document (api-version 2021-08-01's shape)."""
    return {F["compute"]: compute(record), F["network"]: network(record)}


def ovf_env(record: InstanceRecord) -> str:
    """The provisioning ``ovf-env.xml``: admin user, keys (with their values), host name, custom data."""
    user = admin_username(record)
    keys = "".join(
        "<wa:PublicKey><wa:Fingerprint></wa:Fingerprint>"
        f"<wa:Path>/home/{escape(user)}/.ssh/authorized_keys</wa:Path><wa:Value>{escape(k['data'])}</wa:Value>"
        "</wa:PublicKey>" for k in record.ssh_keys)
    custom = (f"<wa:CustomData>{base64.b64encode(record.user_data).decode('ascii')}</wa:CustomData>"
              if record.user_data else "")
    password = settings(record).get("admin_password")
    if is_windows(record):
        return _windows_ovf_env(record, user, password, custom)
    credentials = (f"<wa:UserPassword>{escape(str(password))}</wa:UserPassword>"
                   "<wa:DisableSshPasswordAuthentication>false</wa:DisableSshPasswordAuthentication>"
                   if password else "<wa:DisableSshPasswordAuthentication>true</wa:DisableSshPasswordAuthentication>")
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            '<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" '
            'xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" '
            'xmlns:wa="http://schemas.microsoft.com/windowsazure" '
            'xmlns:i="http://www.w3.org/2001/XMLSchema-instance">\n'
            '<wa:ProvisioningSection><wa:Version>1.0</wa:Version>'
            '<wa:LinuxProvisioningConfigurationSet>'
            '<wa:ConfigurationSetType>LinuxProvisioningConfiguration</wa:ConfigurationSetType>'
            f'<wa:UserName>{escape(user)}</wa:UserName>{credentials}'
            f'<wa:SSH><wa:PublicKeys>{keys}</wa:PublicKeys><wa:KeyPairs></wa:KeyPairs></wa:SSH>'
            f'<wa:HostName>{escape(record.hostname.split(".")[0])}</wa:HostName>{custom}'
            '</wa:LinuxProvisioningConfigurationSet></wa:ProvisioningSection>\n'
            '<wa:PlatformSettingsSection><wa:Version>1.0</wa:Version><wa:PlatformSettings>'
            '<wa:KmsServerHostname>kms.core.windows.net</wa:KmsServerHostname>'
            '<wa:ProvisionGuestAgent>false</wa:ProvisionGuestAgent>'
            '<wa:GuestAgentPackageName i:nil="true" />'
            '<wa:PreprovisionedVm>false</wa:PreprovisionedVm>'
            '</wa:PlatformSettings></wa:PlatformSettingsSection>\n'
            '</Environment>\n')


_OVF_HEAD = ('<?xml version="1.0" encoding="utf-8"?>\n'
             '<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" '
             'xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" '
             'xmlns:wa="http://schemas.microsoft.com/windowsazure" '
             'xmlns:i="http://www.w3.org/2001/XMLSchema-instance">\n')


def _windows_ovf_env(record: InstanceRecord, user: str, password: object, custom: str) -> str:
    """The Windows provisioning set (``os_type`` windows): computer name, admin user and password,
    custom data; keys are not part of it (Windows takes WinRM/RDP, not SSH keys, from here)."""
    # as Azure writes it: the set redeclares Azure's namespace as the default one, its children unprefixed
    secret = f"<AdminPassword>{escape(str(password))}</AdminPassword>" if password else ""
    custom = custom.replace("wa:CustomData", "CustomData")
    return (_OVF_HEAD + '<wa:ProvisioningSection><wa:Version>1.0</wa:Version>'
            '<WindowsProvisioningConfigurationSet xmlns="http://schemas.microsoft.com/windowsazure" '
            'xmlns:i="http://www.w3.org/2001/XMLSchema-instance">'
            '<ConfigurationSetType>WindowsProvisioningConfiguration</ConfigurationSetType>'
            f'<ComputerName>{escape(record.hostname.split(".")[0])}</ComputerName>{secret}'
            '<EnableAutomaticUpdates>false</EnableAutomaticUpdates>'
            f'<AdminUsername>{escape(user)}</AdminUsername>{custom}'
            '</WindowsProvisioningConfigurationSet></wa:ProvisioningSection>\n'
            '<wa:PlatformSettingsSection><wa:Version>1.0</wa:Version><wa:PlatformSettings>'
            '<wa:KmsServerHostname>kms.core.windows.net</wa:KmsServerHostname>'
            '<wa:ProvisionGuestAgent>false</wa:ProvisionGuestAgent>'
            '<wa:GuestAgentPackageName i:nil="true" />'
            '<wa:PreprovisionedVm>false</wa:PreprovisionedVm>'
            '</wa:PlatformSettings></wa:PlatformSettingsSection>\n'
            '</Environment>\n')


def goal_state(record: InstanceRecord, incarnation: int = 1) -> str:
    """The wire server's goal state for the instance (``/machine/?comp=goalstate``)."""
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            '<GoalState xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:noNamespaceSchemaLocation="goalstate10.xsd">\n'
            '  <Version>2012-11-30</Version>\n'
            f'  <Incarnation>{incarnation}</Incarnation>\n'
            '  <Machine><ExpectedState>Started</ExpectedState>'
            '<StopRolesDeadlineHint>300000</StopRolesDeadlineHint>'
            '<LBProbePorts><Port>16001</Port></LBProbePorts><ExpectHealthReport>FALSE</ExpectHealthReport></Machine>\n'
            f'  <Container>\n    <ContainerId>{container_id(record)}</ContainerId>\n'
            '    <RoleInstanceList>\n      <RoleInstance>\n'
            f'        <InstanceId>{escape(role_instance_id(record))}</InstanceId>\n'
            '        <State>Started</State>\n'
            '        <Configuration><HostingEnvironmentConfig></HostingEnvironmentConfig>'
            '<SharedConfig></SharedConfig><ExtensionsConfig></ExtensionsConfig>'
            '<FullConfig></FullConfig><Certificates></Certificates>'
            '<ConfigName>cloudseed</ConfigName></Configuration>\n'
            '      </RoleInstance>\n    </RoleInstanceList>\n  </Container>\n'
            '</GoalState>\n')
