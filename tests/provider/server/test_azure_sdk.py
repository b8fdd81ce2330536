"""azure-identity, unmodified, against ``cloudseed serve`` as Azure's IMDS, in network namespaces.

The guest namespace reaches 169.254.169.254 (``CloudNamespaces``), as on an Azure VM; the SDK
runs with its defaults: ``ManagedIdentityCredential`` (system-assigned, and user-assigned by
client id, object id and resource id) and ``DefaultAzureCredential``, which probes IMDS first.
The tokens are checked here with PyJWT against the JWK Set the admin listener publishes.
Azure's error answers come back through the SDK as the errors it raises for them.
"""

from __future__ import annotations

import json

import pytest

from tests.provider.server.cloud_reference import CloudNamespaces, verified_claims

pytestmark = [pytest.mark.root]

SCOPE = "https://management.azure.com/.default"
RESOURCE = "https://management.azure.com"
VM_ID = "7d3c1f52-0e0f-4a38-9a36-0c8f6c0a1b01"
OWN_CLIENT = "5e2b6f0a-3c0d-4e8f-9a1b-2c3d4e5f6a7b"


@pytest.fixture(scope="module")
def azure(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("azure-sdk") / "server.db"),
                            str(tmp_path_factory.mktemp("azure-sdk-server")), config={"rate_limit": 0})
    yield cloud
    cloud.close()


def register(cloud, **azure_settings) -> None:
    cloud.server.admin("DELETE", f"/v1/instances/{VM_ID}")
    cloud.server.add(instance_id=VM_ID, hostname="sdk-vm", availability_zone="westeurope", project_id="sdk-rg",
                     addresses=[{"address": cloud.guest_ip, "network": "default", "prefix": 24}], macs=[cloud.mac],
                     clouds={"azure": {"subscription_id": "0b1f6471-1bf0-4dda-aec3-111122223333", **azure_settings}})


GUEST = """
import json, sys
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential, CredentialUnavailableError
from azure.core.exceptions import ClientAuthenticationError
out = {}
def token(name, make):
    try:
        got = make().get_token(sys.argv[1])
        out[name] = {"token": got.token, "expires_on": got.expires_on}
    except (CredentialUnavailableError, ClientAuthenticationError) as error:
        out[name] = {"error": type(error).__name__ + ": " + str(error)[:300]}
for name, config in json.loads(sys.argv[2]).items():
    token(name, lambda: ManagedIdentityCredential(**config))
token("default_chain", lambda: DefaultAzureCredential(exclude_cli_credential=True, exclude_powershell_credential=True,
                                                      exclude_developer_cli_credential=True))
print(json.dumps(out))
"""


def decode(cloud, token: str) -> dict:
    return verified_claims(cloud.server, token, RESOURCE)


def test_system_and_user_assigned_identities(azure):
    register(azure, user_identities=[{"name": "app-identity", "client_id": OWN_CLIENT}, {"name": "other"}])
    group = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourcegroups/sdk-rg"
    other_resource = f"{group}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/other"
    configs = {"system": {}, "by_client_id": {"client_id": OWN_CLIENT},
               "by_resource_id": {"identity_config": {"resource_id": other_resource}},
               "unknown": {"client_id": "00000000-0000-4000-8000-000000000000"}}
    out = azure.python_in(azure.gst, GUEST, SCOPE, json.dumps(configs))
    system, own, other = (decode(azure, out[k]["token"]) for k in ("system", "by_client_id", "by_resource_id"))
    assert system["aud"] == RESOURCE and system["xms_mirid"].endswith("/providers/Microsoft.Compute/virtualMachines/"
                                                                      "sdk-vm")
    assert own["appid"] == OWN_CLIENT and own["xms_mirid"].endswith("/userAssignedIdentities/app-identity")
    assert other["xms_mirid"] == other_resource and other["oid"] not in (own["oid"], system["oid"])
    assert system["iss"] == f"https://sts.windows.net/{system['tid']}/" and system["exp"] > system["iat"]
    assert abs(out["system"]["expires_on"] - system["exp"]) <= 1
    # the chain probes IMDS and gets the system-assigned identity's token
    assert decode(azure, out["default_chain"]["token"])["oid"] == system["oid"]
    # an identity the VM does not have: IMDS's 400 "Identity not found", which the SDK reports
    assert "Identity not found" in out["unknown"]["error"]
    # by object id, as the SDK sends it
    config = {"o": {"identity_config": {"object_id": own["oid"]}}}
    by_object = azure.python_in(azure.gst, GUEST, SCOPE, json.dumps(config))
    assert decode(azure, by_object["o"]["token"])["appid"] == OWN_CLIENT


def test_without_a_system_identity(azure):
    register(azure, system_identity=False)
    out = azure.python_in(azure.gst, GUEST, SCOPE, json.dumps({"system": {}}))
    assert "CredentialUnavailableError" in out["system"]["error"] and "Identity not found" in out["system"]["error"]
