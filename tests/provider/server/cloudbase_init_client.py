"""Run one of cloudbase-init's metadata services (its own code, unchanged) and print what it read as JSON.

Run with the Python of a venv that has the ``cloudbase-init`` package, inside the guest network
namespace of ``cloud_reference.CloudNamespaces``: ``python cloudbase_init_client.py SERVICE [MEDIA_DIR]``;
``CBI_CONF`` (JSON ``{"group.option": value}``) holds what an operator sets in cloudbase-init.conf.

cloudbase-init is written for Windows. What is replaced here, and only this, is OS-level:

- ``cloudbaseinit.utils.windows.x509`` (imported by the Azure service at module import time; it
  loads ``ctypes.windll`` for the Windows CryptoAPI certificate store) is a stub module; it is
  used only by ``get_server_certs``, which is not called.
- Azure: ``AzureService._get_wire_server_endpoint_address`` (DHCP option 245 through
  ``WindowsUtils.get_mac_address_by_local_ip``; on Linux it retries for 150 s and gives up) raises
  at once, so the service takes its own fallback, 168.63.129.16; and the service's ``_osutils``
  lists ``MEDIA_DIR`` as the one logical drive (``WindowsUtils.get_logical_drives``: drive letters).

Everything that reads metadata (URLs, headers, parsing, the wire server's XML protocol) is
cloudbase-init's own.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import types


def _text(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    return value


def _try(function, *args):
    try:
        return {"value": _text(function(*args))}
    except Exception as e:  # what the service raised, reported to the test
        return {"error": f"{type(e).__name__}: {e}"}


def main() -> int:
    service_name = sys.argv[1]
    media = sys.argv[2] if len(sys.argv) > 2 else None
    sys.modules["cloudbaseinit.utils.windows.x509"] = types.ModuleType("cloudbaseinit.utils.windows.x509")
    from cloudbaseinit import conf as cloudbaseinit_conf

    conf = cloudbaseinit_conf.CONF
    conf([], project="cloudbase-init")
    conf.set_override("retry_count", 2)
    conf.set_override("retry_count_interval", 0)
    # the operator's settings (cloudbase-init.conf), e.g. {"maas.metadata_base_url": "http://..."}
    for key, setting in json.loads(os.environ.get("CBI_CONF") or "{}").items():
        group, _, name = key.rpartition(".")
        conf.set_override(name, setting, group or None)
    out: dict = {}
    if service_name == "ec2":
        from cloudbaseinit.metadata.services.ec2service import EC2Service as Service
    elif service_name == "gce":
        from cloudbaseinit.metadata.services.gceservice import GCEService as Service
    elif service_name == "oracle":
        from cloudbaseinit.metadata.services.oraclecloudservice import OracleCloudService as Service
    elif service_name == "openstack":
        from cloudbaseinit.metadata.services.httpservice import HttpService as Service
    elif service_name == "cloudstack":
        from cloudbaseinit.metadata.services.cloudstack import CloudStack as Service
    elif service_name == "maas":
        from cloudbaseinit.metadata.services.maasservice import MaaSHttpService as Service
    elif service_name == "azure":
        from cloudbaseinit.metadata.services import azureservice

        def no_dhcp_option(self):
            raise RuntimeError("DHCP option 245 needs the Windows osutils")

        azureservice.AzureService._get_wire_server_endpoint_address = no_dhcp_option
        Service = azureservice.AzureService
    else:
        raise SystemExit(f"unknown service {service_name}")
    service = Service()
    if service_name == "azure":
        service._osutils = types.SimpleNamespace(get_logical_drives=lambda: [media] if media else [])
    out["loaded"] = bool(service.load())
    out["instance_id"] = _try(service.get_instance_id)
    out["host_name"] = _try(service.get_host_name)
    out["user_data"] = _try(service.get_user_data)
    out["public_keys"] = _try(service.get_public_keys)
    if service_name == "openstack":
        out["admin_password"] = _try(service.get_admin_password)
        details = service.get_network_details_v2()
        out["network"] = {"links": [{"name": link.name, "mac": link.mac_address} for link in details.links],
                          "networks": [{"link": n.link, "address": n.address_cidr} for n in details.networks],
                          "dns": [s.addresses for s in details.services]} if details else None
    if service_name == "cloudstack":  # the password server: the password, then "saved_password"
        out["admin_password"] = _try(service.get_admin_password)
        out["admin_password_again"] = _try(service.get_admin_password)
    if service_name == "azure":
        out["base_url"] = service._base_url
        out["admin_username"] = _try(service.get_admin_username)
        out["admin_password"] = _try(service.get_admin_password)
        out["started"] = _try(service.provisioning_started)
        out["completed"] = _try(service.provisioning_completed)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
