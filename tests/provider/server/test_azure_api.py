"""Azure's IMDS (``/metadata/instance``, ``/metadata/attested/document``) and wire server (``/machine``)
over real HTTP from ``cloudseed serve``, SQLite and PostgreSQL; Debian's cloud-init 22.4 reading IMDS.

The header rules as Azure enforces them (``Metadata: true`` and ``api-version``, else 400), the
document and its sub-paths, ``format=text``, the attested document (a PKCS#7 verified with the
registry's published certificate), the goal state and health reports (recorded, shown by
``cloudseed instances show``), and isolation by source address for both.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from tests.provider.server.cloud_reference import CloudNamespaces
from tests.provider.server.server_support import ROOT, new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
MD = {"Metadata": "true"}
WIRE = {"x-ms-version": "2012-11-30", "x-ms-agent-name": "test"}
V = "api-version=2021-08-01"
VM_ID = "0e6a1a4c-5a3f-4c1e-9f0e-2b7c9d8e1f01"


def register(server, instance_id=VM_ID, **extra):
    address = new_address()
    public = "20." + address.split(".", 1)[1]
    fields = {"instance_id": instance_id, "hostname": "az-vm", "availability_zone": "westeurope",
              "addresses": [{"address": address, "network": "default", "mac": "00:0d:3a:04:75:98", "prefix": 24},
                            {"address": public, "network": "default", "public": True}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "instance_type": "Standard_B1s",
              "tags": {"env": "test"},
              "clouds": {"azure": {"resource_group": "my-rg", "admin_username": "azadmin"}}}
    fields.update(extra)
    server.add(**fields)
    return address


def public_of(address: str) -> str:
    return "20." + address.split(".", 1)[1]


def test_header_and_version_rules(server):
    address = register(server, instance_id="11111111-2222-4333-8444-555555555555")
    missing = server.get(f"/metadata/instance?{V}", address)
    assert missing.status == 400 and "metadata header" in missing.json()["error"]
    assert server.get(f"/metadata/instance?{V}", address, headers={"Metadata": "false"}).status == 400
    assert server.get("/metadata/instance", address, headers=MD).status == 400
    assert server.get("/metadata/instance?api-version=1999-01-01", address, headers=MD).status == 400
    forwarded = server.get(f"/metadata/instance?{V}", address, headers={**MD, "X-Forwarded-For": "10.0.0.1"})
    assert forwarded.status == 400
    assert server.get(f"/metadata/instance?{V}", address, headers=MD).status == 200
    # the rule holds once the answer is cached too
    assert server.get(f"/metadata/instance?{V}", address).status == 400
    assert server.get("/metadata/versions", address, headers=MD).json()["apiVersions"][-1] >= "2021-08-01"


def test_document_paths_and_text(server):
    address = register(server)
    whole = server.get(f"/metadata/instance?{V}", address, headers=MD).json()
    compute, nic = whole["compute"], whole["network"]["interface"][0]
    assert compute["vmId"] == VM_ID and compute["name"] == "az-vm" and compute["location"] == "westeurope"
    assert compute["vmSize"] == "Standard_B1s" and compute["resourceGroupName"] == "my-rg"
    assert compute["osProfile"] == {"adminUsername": "azadmin", "computerName": "az-vm",
                                    "disablePasswordAuthentication": "true"}
    assert compute["publicKeys"] == [{"keyData": KEY, "path": "/home/azadmin/.ssh/authorized_keys"}]
    assert compute["tagsList"] == [{"name": "env", "value": "test"}] and compute["tags"] == "env:test"
    assert base64.b64decode(compute["userData"]).decode() == USER_DATA
    assert compute["resourceId"].endswith("/resourceGroups/my-rg/providers/Microsoft.Compute/virtualMachines/az-vm")
    assert nic["macAddress"] == "000D3A047598"
    assert nic["ipv4"]["ipAddress"] == [{"privateIpAddress": address, "publicIpAddress": public_of(address)}]
    assert nic["ipv4"]["subnet"] == [{"address": address.rsplit(".", 1)[0] + ".0", "prefix": "24"}]
    assert server.get(f"/metadata/instance/compute?{V}", address, headers=MD).json() == compute
    assert server.get(f"/metadata/instance/network?{V}", address, headers=MD).json() == whole["network"]
    assert server.get(f"/metadata/instance/compute/vmId?{V}&format=text", address, headers=MD).text == VM_ID
    assert server.get(f"/metadata/instance/network/interface/0/macAddress?{V}&format=text", address,
                      headers=MD).text == "000D3A047598"
    assert server.get(f"/metadata/instance/compute/nothing?{V}", address, headers=MD).status == 404
    assert server.get(f"/metadata/instance?{V}&format=xml", address, headers=MD).status == 400


def test_list_indexes_that_are_not_indexes_are_404_not_500(server):
    address = register(server, instance_id="33333333-2222-4333-8444-555555555556")
    path = "/metadata/instance/network/interface/{}/macAddress?" + V + "&format=text"
    assert server.get(path.format(0), address, headers=MD).text == "000D3A047598"
    # str.isdigit() is true for a superscript two and an Arabic-Indic three, int() refuses them;
    # an index of thousands of digits made int() raise too (the 500s this test was written for)
    for index in ("%C2%B2", "%D9%A3", "9" * 5000, "1"):
        reply = server.get(path.format(index), address, headers=MD)
        assert reply.status == 404, (index[:12], reply.status)


def test_attested_document_verifies_with_the_published_certificate(server, tmp_path):
    address = register(server, instance_id="22222222-2222-4333-8444-555555555555")
    reply = server.get(f"/metadata/attested/document?{V}&nonce=abc123", address, headers=MD)
    assert reply.status == 200, reply.text
    body = reply.json()
    assert body["encoding"] == "pkcs7"
    cert = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db_url,
                           "identity-certificate", "--azure"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert cert.returncode == 0, cert.stderr
    (tmp_path / "cert.pem").write_text(cert.stdout)
    bare = server.get(f"/metadata/attested/document?{V}", address, headers=MD).json()
    for name, signature in (("nonce", body["signature"]), ("bare", bare["signature"])):
        (tmp_path / name).write_bytes(base64.b64decode(signature))
        for tool in ("smime", "cms"):  # the verifiers Azure's documentation and clients use
            verified = subprocess.run(["openssl", tool, "-verify", "-in", str(tmp_path / name), "-inform", "DER",
                                       "-certfile", str(tmp_path / "cert.pem"), "-noverify"], capture_output=True,
                                      timeout=30)
            assert verified.returncode == 0, verified.stderr
    attested = json.loads(verified.stdout)  # the document without a nonce
    assert attested["vmId"] == "22222222-2222-4333-8444-555555555555" and attested["subscriptionId"]
    # no nonce: the time of the document, as Azure's IMDS puts it (YYYYMMDD-HHMMSS, UTC)
    created = attested["timeStamp"]["createdOn"]  # MM/DD/YY HH:MM:SS -0000
    assert attested["nonce"] == f"20{created[6:8]}{created[:2]}{created[3:5]}-{created[9:17].replace(':', '')}"
    verified = subprocess.run(["openssl", "smime", "-verify", "-in", str(tmp_path / "nonce"), "-inform", "DER",
                               "-certfile", str(tmp_path / "cert.pem"), "-noverify"], capture_output=True, timeout=30)
    assert json.loads(verified.stdout)["nonce"] == "abc123"
    for bad in ("../x", "x" * 33, "%D9%A3"):
        assert server.get(f"/metadata/attested/document?{V}&nonce={bad}", address, headers=MD).status == 400


def health(container: str, instance: str, state: str = "Ready") -> str:
    return (f'<?xml version="1.0" encoding="utf-8"?><Health><GoalStateIncarnation>1</GoalStateIncarnation>'
            f"<Container><ContainerId>{container}</ContainerId><RoleInstanceList><Role>"
            f"<InstanceId>{instance}</InstanceId><Health><State>{state}</State></Health>"
            "</Role></RoleInstanceList></Container></Health>")


def goal(server, address):
    import xml.etree.ElementTree as ET

    reply = server.get("/machine/?comp=goalstate", address, headers=WIRE)
    assert reply.status == 200, reply.text
    root = ET.fromstring(reply.body)
    return (root.findtext("Incarnation"), root.findtext("Container/ContainerId"),
            root.findtext("Container/RoleInstanceList/RoleInstance/InstanceId"))


def show(server, instance_id):
    out = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db_url, "show", instance_id],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_wire_server_goal_state_and_health_report(server):
    iid = "33333333-2222-4333-8444-555555555555"
    address = register(server, instance_id=iid)
    assert server.get("/machine/?comp=goalstate", address).status == 400  # no x-ms-version
    incarnation, container, instance = goal(server, address)
    assert incarnation == "1" and instance == f"{iid}.az-vm" and container
    assert "azure_health" not in show(server, iid)
    post = {**WIRE, "Content-Type": "text/xml; charset=utf-8"}
    dtd = '<!DOCTYPE x [<!ENTITY a "b">]>' + health(container, instance)
    assert server.get("/machine?comp=health", address, method="POST", headers=post, body=dtd).status == 400
    assert server.get("/machine?comp=health", address, method="POST", headers=post,
                      body="x" * 70000).status in (400, 413)  # the HTTP layer's body limit may answer first
    assert server.get("/machine?comp=health", address, method="POST", headers=post,
                      body=health(container, "other.vm")).status == 403
    ok = server.get("/machine?comp=health", address, method="POST", headers=post, body=health(container, instance))
    assert ok.status == 200, ok.text
    shown = show(server, iid)["azure_health"]
    assert shown["state"] == "Ready" and shown["instance"] == instance and shown["incarnation"] == "1"


def test_isolation_by_source_address(server):
    owner_id, stranger_id = "44444444-2222-4333-8444-555555555555", "55555555-2222-4333-8444-555555555555"
    owner = register(server, instance_id=owner_id, user_data="owner-secret")
    stranger = register(server, instance_id=stranger_id, hostname="stranger", ssh_keys=[], user_data=None)
    unknown = new_address()
    mine = server.get(f"/metadata/instance?{V}", stranger, headers=MD)
    assert owner_id not in mine.text and KEY not in mine.text and mine.json()["compute"]["vmId"] == stranger_id
    assert server.get(f"/metadata/instance?{V}", unknown, headers=MD).status == 404
    assert server.get("/machine/?comp=goalstate", unknown, headers=WIRE).status == 404
    _, owner_container, owner_instance = goal(server, owner)
    _, stranger_container, _ = goal(server, stranger)
    assert owner_container != stranger_container
    # the stranger cannot report the owner ready, nor can an unknown address
    post = {**WIRE, "Content-Type": "text/xml; charset=utf-8"}
    body = health(owner_container, owner_instance)
    assert server.get("/machine?comp=health", stranger, method="POST", headers=post, body=body).status == 403
    assert server.get("/machine?comp=health", unknown, method="POST", headers=post, body=body).status == 404
    assert "azure_health" not in show(server, owner_id)


@pytest.fixture(scope="module")
def namespaces(db_url, tmp_path_factory):
    ns = CloudNamespaces(db_url, str(tmp_path_factory.mktemp("azure-ns")))
    yield ns
    ns.close()


REFERENCE = """
import json, sys
from cloudinit.sources import DataSourceAzure as A
md = A._get_metadata_from_imds(retries=2, exc_cb=None, md_type=A.MetadataType.ALL, api_version=A.IMDS_VER_WANT)
A.device_driver = lambda name: None
net = A.generate_network_config_from_instance_network_metadata(md["network"])
print(json.dumps({"md": md, "net": net}))
"""


def test_cloud_init_22_4_reads_imds(namespaces, tmp_path):
    import importlib

    azure_ds = importlib.import_module("cloudseed.agent.datasources.azure")
    namespaces.server.add(instance_id="66666666-2222-4333-8444-555555555555", hostname="ref-vm",
                          addresses=[{"address": namespaces.guest_ip, "network": "default", "mac": namespaces.mac,
                                      "prefix": 24}],
                          ssh_keys=[{"name": "alice", "data": KEY}], user_data=USER_DATA,
                          clouds={"azure": {"location": "northeurope"}})
    out = namespaces.reference_in(REFERENCE, str(tmp_path))
    compute = out["md"]["compute"]
    assert compute["vmId"] == "66666666-2222-4333-8444-555555555555" and compute["location"] == "northeurope"
    assert [k["keyData"] for k in compute["publicKeys"]] == [KEY]
    assert compute["osProfile"]["adminUsername"] == "azureuser"
    assert out["net"]["ethernets"]["eth0"]["match"] == {"macaddress": namespaces.mac}
    assert out["net"] == azure_ds.network_config(out["md"]["network"])


def test_os_type_windows_and_its_validation(server):
    """``clouds.azure.os_type``: windows is IMDS osType Windows (the media then carries the Windows
    provisioning set: tests/provider/server/test_cloudbase_init_clients.py); other values are refused."""
    reply = server.admin("POST", "/v1/instances", {"instance_id": "bad-os", "addresses": [new_address()],
                                                   "clouds": {"azure": {"os_type": "solaris"}}})
    assert reply.status == 400 and reply.json()["field"] == "clouds.azure.os_type"
    address = register(server, instance_id="77777777-2222-4333-8444-555555555555",
                       clouds={"azure": {"os_type": "windows"}})
    document = server.get(f"/metadata/instance?{V}", address, headers=MD).json()
    assert document["compute"]["osType"] == "Windows"
    linux = register(server, instance_id="88888888-2222-4333-8444-555555555555")
    assert server.get(f"/metadata/instance?{V}", linux, headers=MD).json()["compute"]["osType"] == "Linux"


def test_managed_identity_token_rules_and_errors(server):
    address = register(server, instance_id="a1a1a1a1-2222-4333-8444-555555555555",
                       clouds={"azure": {"resource_group": "my-rg", "user_identities": [{"name": "a"}, {"name": "b"}]}})
    path = "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://vault.azure.net"
    no_header = server.get(path, address)
    assert no_header.status == 400 and no_header.json() == {"error": "bad_request_102", "error_description":
                                                            "Required metadata header not specified"}
    ok = server.get(path, address, headers=MD)
    assert ok.status == 200, ok.text
    body = ok.json()
    assert body["resource"] == "https://vault.azure.net" and body["token_type"] == "Bearer"
    assert int(body["expires_on"]) - int(body["not_before"]) == 3600 and 0 < int(body["expires_in"]) <= 3600
    assert server.get(path, address, headers=MD).json()["access_token"] == body["access_token"]  # kept
    missing = server.get("/metadata/identity/oauth2/token?api-version=2018-02-01", address, headers=MD)
    assert missing.status == 400 and "'resource' is missing" in missing.json()["error_description"]
    assert server.get("/metadata/identity/oauth2/token?resource=x", address, headers=MD).status == 400
    assert server.get("/metadata/identity/oauth2/token?api-version=2017-04-02&resource=x", address,
                      headers=MD).status == 400
    unknown = server.get(path + "&client_id=00000000-0000-4000-8000-000000000000", address, headers=MD)
    assert unknown.status == 400 and unknown.json()["error_description"] == "Identity not found"
    both = server.get(path + "&client_id=a&object_id=b", address, headers=MD)
    assert both.status == 400
    assert server.get(path, address, method="POST", headers=MD).status == 405
    forwarded = server.get(path, address, headers={**MD, "X-Forwarded-For": "10.1.1.1"})
    assert forwarded.status == 400
    # no system identity and two user-assigned ones: the request must say which
    users = register(server, instance_id="b2b2b2b2-2222-4333-8444-555555555555",
                     clouds={"azure": {"system_identity": False, "user_identities": [{"name": "a"}, {"name": "b"}]}})
    which = server.get(path, users, headers=MD)
    assert which.status == 400 and "Multiple user assigned identities" in which.json()["error_description"]
    assert server.get(path + "&msi_res_id=/subscriptions/x", users, headers=MD).json()["error_description"] == \
        "Identity not found"
    sub = server.get(f"/metadata/instance/compute/subscriptionId?{V}&format=text", users, headers=MD).text
    b = f"/SUBSCRIPTIONS/{sub}/resourceGroups/cloudseed/providers/Microsoft.ManagedIdentity/userAssignedIdentities/b"
    named = server.get(path + "&msi_res_id=" + b, users, headers=MD)  # ARM ids compare without case
    assert named.status == 200 and named.json()["client_id"] != body["client_id"]


def test_load_balancer_document(server):
    address = register(server, instance_id="c3c3c3c3-2222-4333-8444-555555555555")
    reply = server.get("/metadata/loadbalancer?api-version=2020-10-01", address, headers=MD)
    assert reply.status == 200
    assert reply.json() == {"loadbalancer": {"publicIpAddresses": [{"frontendIpAddress": public_of(address),
                                                                    "privateIpAddress": address}],
                                             "inboundRules": [], "outboundRules": []}}
    assert server.get("/metadata/loadbalancer?api-version=2019-06-01", address, headers=MD).status == 400
    assert server.get("/metadata/loadbalancer", address, headers=MD).status == 400


def test_scheduled_events_versions_without_events(server):
    address = register(server, instance_id="d4d4d4d4-2222-4333-8444-555555555555")
    for version in ("2017-11-01", "2019-08-01", "2020-07-01", "2017-03-01"):
        reply = server.get(f"/metadata/scheduledevents?api-version={version}", address, headers=MD)
        assert reply.status == 200 and reply.json() == {"DocumentIncarnation": 0, "Events": []}, version
    assert server.get("/metadata/scheduledevents?api-version=2021-08-01", address, headers=MD).status == 400
    assert server.get("/metadata/scheduledevents?api-version=2020-07-01", address).status == 400  # no header
    unknown = server.get("/metadata/scheduledevents?api-version=2020-07-01", address, method="POST", headers=MD,
                         body=json.dumps({"StartRequests": [{"EventId": "nope"}]}))
    assert unknown.status == 400 and "nope" in unknown.json()["error"]


def test_cli_turns_identities_off_and_adds_user_assigned_ones(tmp_path):
    db = str(tmp_path / "cli.db")

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, *args],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    cli("add", "--id", "e5e5e5e5-2222-4333-8444-555555555555", "--no-azure-system-identity",
        "--azure-user-identity", "web", "--azure-user-identity", "jobs")
    azure = json.loads(cli("show", "e5e5e5e5-2222-4333-8444-555555555555"))["clouds"]["azure"]
    assert azure == {"system_identity": False, "user_identities": [{"name": "web"}, {"name": "jobs"}]}
