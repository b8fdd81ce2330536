"""IBM Cloud's (classic infrastructure, SoftLayer) config disk as its guest reads it, on Xen: a
filesystem labelled ``config-2`` with the UUID ``9796-932E`` (an image provisioned from the OS
code) or labelled ``METADATA`` (from a template), holding OpenStack's config-drive files under
``openstack/latest/``. The provisioning boot (``/root/provisioningConfiguration.cfg`` without a
newer ``/root/swinstall.log``) is not the instance's. No seed builder of ours writes it yet.

Read by ``agent/datasources/ibmcloud.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

OS_CODE_LABEL, TEMPLATE_LABEL = "config-2", "METADATA"

# meta_data.json's fields the guest reads, by role
FIELDS = {"instance_id": "uuid", "hostname": "hostname", "public_keys": "public_keys", "random_seed": "random_seed"}

CLOUD = Cloud(
    "ibmcloud", datasource="IBMCloud", served=False,
    addresses=(OS_CODE_LABEL, TEMPLATE_LABEL),  # filesystem labels
    names={"config_uuid": "9796-932E", "os_code": "OS-Code/Live", "template": "Template/Live/Metadata",
           "provisioning_cfg": "/root/provisioningConfiguration.cfg", "provisioning_log": "/root/swinstall.log"},
    fields=FIELDS,
    requests={
        "meta_data": Request("openstack/latest/meta_data.json", form="json", fields=(FIELDS["instance_id"],)),
        "user_data": Request("openstack/latest/user_data"),
        "vendor_data": Request("openstack/latest/vendor_data.json", form="json"),
        "network_data": Request("openstack/latest/network_data.json", form="json"),
    },
)
