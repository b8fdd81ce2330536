"""GCE's metadata API (``/computeMetadata/v1``) over real HTTP from ``cloudseed serve``, SQLite and PostgreSQL.

The header rules as GCE enforces them, recursive JSON, ``alt``, ETags and ``wait_for_change``
(bounded, and woken by a registry change), instance and project attributes from the record.
"""

from __future__ import annotations

import concurrent.futures
import time

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import http, new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
PROJECT_KEY = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQProject bob@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
GOOGLE = {"Metadata-Flavor": "Google"}
BASE = "/computeMetadata/v1/"


def register(server, **extra):
    address = new_address()
    instance_id = f"{abs(hash(address)) % 10**12}"
    public = "34." + address.split(".", 1)[1]
    fields = {"instance_id": instance_id, "hostname": "gce-vm", "availability_zone": "europe-west1-b",
              "addresses": [{"address": address, "network": "default", "mac": "42:01:0a:80:00:02", "prefix": 24},
                            {"address": public, "network": "default", "public": True}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "instance_type": "e2-small",
              "clouds": {"gce": {"project_id": "my-project", "numeric_project_id": 123456,
                                 "attributes": {"enable-oslogin": "FALSE", "startup-script": "echo hi"},
                                 "project_attributes": {"ssh-keys": f"cloudinit:{PROJECT_KEY}"}}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address, public


def get(server, path, address, headers=GOOGLE):
    return server.get(path, address, headers=headers)


def test_metadata_flavor_is_required_and_always_answered(server):
    _, address, _ = register(server)
    refused = get(server, BASE + "instance/id", address, headers={})
    assert refused.status == 403 and "Metadata-Flavor" in refused.text
    assert refused.headers["metadata-flavor"] == "Google"
    assert get(server, BASE + "instance/id", address, headers={"Metadata-Flavor": "google"}).status == 403
    forwarded = get(server, BASE + "instance/id", address, headers={**GOOGLE, "X-Forwarded-For": "10.0.0.1"})
    assert forwarded.status == 403
    ok = get(server, BASE + "instance/id", address)
    assert ok.status == 200 and ok.headers["metadata-flavor"] == "Google" and ok.headers["etag"]
    missing = get(server, BASE + "instance/nothing-here", address)
    assert missing.status == 404 and missing.headers["metadata-flavor"] == "Google"
    # the rule holds on every request, also once the answer is cached
    assert get(server, BASE + "instance/id", address, headers={}).status == 403


def test_leaves_listings_and_recursive_json(server):
    instance_id, address, public = register(server)
    assert get(server, BASE + "instance/id", address).text == instance_id
    assert get(server, BASE + "instance/hostname", address).text == "gce-vm.europe-west1-b.c.my-project.internal"
    assert get(server, BASE + "instance/zone", address).text == "projects/123456/zones/europe-west1-b"
    assert get(server, BASE + "instance/machine-type", address).text == "projects/123456/machineTypes/e2-small"
    assert get(server, BASE + "instance/name", address).text == "gce-vm"
    assert get(server, BASE + "project/project-id", address).text == "my-project"
    listing = get(server, BASE + "instance/", address).text.splitlines()
    assert "attributes/" in listing and "network-interfaces/" in listing and "id" in listing
    assert get(server, BASE, address).text.splitlines() == ["instance/", "project/", "universe/"]
    attrs = get(server, BASE + "instance/attributes/?recursive=true", address)
    assert attrs.headers["content-type"] == "application/json"
    assert attrs.json() == {"enable-oslogin": "FALSE", "startup-script": "echo hi", "user-data": USER_DATA,
                            "ssh-keys": f"cloudinit:{KEY}"}
    whole = get(server, BASE + "instance/?recursive=True", address).json()
    assert whole["id"] == int(instance_id) and whole["machineType"].endswith("/e2-small")
    nic = whole["networkInterfaces"][0]
    assert nic["mac"] == "42:01:0a:80:00:02" and nic["ip"] == address and nic["subnetmask"] == "255.255.255.0"
    assert nic["accessConfigs"] == [{"externalIp": public, "type": "ONE_TO_ONE_NAT"}]
    assert get(server, BASE + "instance/network-interfaces/0/ip", address).text == address
    assert get(server, BASE + "instance/network-interfaces/0/access-configs/0/external-ip", address).text == public
    project = get(server, BASE + "project/?recursive=true", address).json()
    assert project == {"attributes": {"ssh-keys": f"cloudinit:{PROJECT_KEY}"}, "numericProjectId": 123456,
                       "projectId": "my-project"}
    assert get(server, BASE + "instance/attributes/user-data", address).text == USER_DATA


def test_list_indexes_that_are_not_indexes_are_404_not_500(server):
    _, address, _ = register(server)
    assert get(server, BASE + "instance/network-interfaces/0/ip", address).text == address
    # a superscript two and an Arabic-Indic three are digits to str.isdigit but not to int();
    # an index of thousands of digits made int() raise (the 500s this test was written for)
    for index in ("%C2%B2", "%D9%A3", "9" * 5000, "1"):
        reply = get(server, BASE + f"instance/network-interfaces/{index}/ip", address)
        assert reply.status == 404, (index[:12], reply.status)


def test_alt_json_and_text(server):
    instance_id, address, public = register(server)
    assert get(server, BASE + "instance/id?alt=json", address).json() == int(instance_id)
    assert get(server, BASE + "instance/name?alt=json", address).json() == "gce-vm"
    text = get(server, BASE + "project/?recursive=true&alt=text", address).text.splitlines()
    assert "/projectId my-project" in text and "/numericProjectId 123456" in text
    assert get(server, BASE + "instance/id?alt=xml", address).status == 400


def test_wait_for_change_is_bounded_and_woken_by_a_change(server):
    instance_id, address, public = register(server)
    first = get(server, BASE + "instance/attributes/?recursive=true", address)
    etag = first.headers["etag"]
    # a different last_etag: the answer at once
    quick = get(server, BASE + "instance/attributes/?recursive=true&wait_for_change=true&last_etag=0000", address)
    assert quick.status == 200 and quick.headers["etag"] == etag
    started = time.monotonic()
    timed_out = get(server, BASE + f"instance/attributes/?recursive=true&wait_for_change=true&last_etag={etag}"
                                   "&timeout_sec=1", address)
    took = time.monotonic() - started
    assert timed_out.status == 200 and timed_out.headers["etag"] == etag and 0.9 < took < 5
    # the server keeps answering others while a client waits; a registry change wakes the waiter
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(http, server.port, BASE + "instance/attributes/enable-oslogin?wait_for_change=true"
                              "&timeout_sec=20", source=address, headers=GOOGLE)
        time.sleep(0.5)
        other_id, other, _ = register(server)
        assert get(server, BASE + "instance/id", other).text == other_id
        reply = server.admin("PATCH", f"/v1/instances/{instance_id}",
                             {"clouds": {"gce": {"attributes": {"enable-oslogin": "TRUE"}}}})
        assert reply.status == 200, reply.text
        changed = waiting.result(timeout=15)
    assert changed.status == 200 and changed.text == "TRUE"
    assert get(server, BASE + "instance/id?wait_for_change=true&timeout_sec=x", address).status == 400


def test_isolation_by_source_address(server):
    one_id, one, _ = register(server)
    two_id, two, _ = register(server, clouds={"gce": {"attributes": {"secret": "two-only"}}})
    assert get(server, BASE + "instance/id", one).text == one_id
    assert get(server, BASE + "instance/id", two).text == two_id
    assert get(server, BASE + "instance/attributes/secret", one).status == 404
    assert get(server, BASE + "instance/attributes/secret", two).text == "two-only"
    assert get(server, BASE + "instance/id", new_address()).status == 404  # nobody there


def test_invalid_cloud_settings_are_refused(server):
    address = new_address()
    reply = server.admin("POST", "/v1/instances", {"instance_id": "bad-gce", "addresses": [address],
                                                   "clouds": {"gce": {"attributes": {"x": 5}}}})
    assert reply.status == 400 and reply.json()["field"] == "clouds.gce.attributes.x"
    reply = server.admin("POST", "/v1/instances", {"instance_id": "bad-gce", "clouds": {"nimbus": {}}})
    assert reply.status == 400 and reply.json()["field"] == "clouds.nimbus"


# -- Debian's cloud-init 22.4 DataSourceGCE as a client, at metadata.google.internal ------------------

@pytest.fixture(scope="module")
def gce_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("gce-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("gce-ref-server")))
    yield cloud
    cloud.close()


REFERENCE = COMMON + """
from cloudinit.sources import DataSourceGCE as ds
ds.platform_reports_gce = lambda: True  # the DMI check: this namespace is no Google machine
cfg = {"datasource_list": ["GCE"], "system_info": {"default_user": {"name": "debian"}}}
src = ds.DataSourceGCE(cfg, distro, paths)
src.default_user = "debian"
report(src, src.get_data(), address=src.metadata_address)
"""


@pytest.mark.root
@pytest.mark.reference
@pytest.mark.parametrize("blocked", [False, True])
def test_reference_gce_datasource_reads_the_emulation(gce_cloud, tmp_path, blocked):
    iid = "4242424242" if not blocked else "4343434343"
    for old in ("4242424242", "4343434343"):
        gce_cloud.server.admin("DELETE", f"/v1/instances/{old}")
    attributes = {"ssh-keys": f"cloudinit:{KEY}\ndebian:{PROJECT_KEY.replace('bob', 'deb')}\nother:ssh-rsa AAAAx o"}
    if blocked:
        attributes["block-project-ssh-keys"] = "true"
    gce_cloud.server.add(instance_id=iid, hostname="ref-gce", availability_zone="us-east1-c",
                         addresses=[{"address": gce_cloud.guest_ip, "network": "default", "prefix": 24}],
                         macs=[gce_cloud.mac], user_data=USER_DATA, imds_tokens="optional",
                         clouds={"gce": {"attributes": attributes,
                                         "project_attributes": {"ssh-keys": f"cloudinit:{PROJECT_KEY}"}}})
    result = gce_cloud.reference_in(REFERENCE, str(tmp_path))
    assert result["ok"] is True
    assert result["address"] == "http://metadata.google.internal/computeMetadata/v1/"  # unchanged default
    assert result["instance_id"] == iid and result["hostname"] == "ref-gce"
    assert result["metadata"]["availability-zone"] == "us-east1-c" and result["region"] == "us-east1"
    assert result["userdata"] == USER_DATA
    expected = [KEY, PROJECT_KEY.replace("bob", "deb")] + ([] if blocked else [PROJECT_KEY])
    assert result["keys"] == expected


def test_cli_sets_gce_attributes(tmp_path):
    """``cloudseed instances add/update`` with --gce-attribute, --gce-project-attribute and --clouds-json."""
    import json
    import subprocess
    import sys

    db = str(tmp_path / "cli.db")
    (tmp_path / "clouds.json").write_text(json.dumps({"gce": {"project_id": "from-json"},
                                                      "hetzner": {"region": "eu-central"}}))

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, *args],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    cli("add", "--id", "77", "--clouds-json", str(tmp_path / "clouds.json"), "--gce-attribute", "enable-oslogin=TRUE",
        "--gce-project-attribute", f"ssh-keys=cloudinit:{KEY}")
    clouds = json.loads(cli("show", "77"))["clouds"]
    assert clouds == {"gce": {"project_id": "from-json", "attributes": {"enable-oslogin": "TRUE"},
                              "project_attributes": {"ssh-keys": f"cloudinit:{KEY}"}},
                      "hetzner": {"region": "eu-central"}}
    bad = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, "add", "--id", "78",
                          "--gce-attribute", "no-equals-sign"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "KEY=VALUE" in bad.stderr


def test_root_answers_gce_to_google_clients_and_ec2_to_others(server):
    """google-auth's ``ping()`` asks ``GET /`` with the header: GCE's root; EC2 clients still get EC2's list."""
    _, address, _ = register(server)
    for _ in range(2):  # also once the first answer could have been remembered
        google = get(server, "/", address)
        assert google.status == 200 and google.headers["metadata-flavor"] == "Google"
        assert google.text == "computeMetadata/\n"
        ec2 = get(server, "/", address, headers={})
        assert ec2.status == 200 and "latest" in ec2.text.splitlines() and "metadata-flavor" not in ec2.headers
    assert get(server, "/computeMetadata/", address).text == "v1/\n"
    assert get(server, BASE + "universe/universe-domain", address).text == "googleapis.com"


def test_service_accounts_tokens_and_identity(server):
    instance_id, address, _ = register(server)
    email = "123456-compute@developer.gserviceaccount.com"
    assert get(server, BASE + "instance/service-accounts/", address).text.splitlines() == ["default/", f"{email}/"]
    assert get(server, BASE + "instance/service-accounts/default/", address).text.splitlines() == [
        "aliases", "email", "identity", "scopes", "token"]
    info = get(server, BASE + "instance/service-accounts/default/?recursive=true", address)
    assert info.headers["content-type"] == "application/json"
    assert info.json() == {"aliases": ["default"], "email": email,
                           "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
    whole = get(server, BASE + "instance/?recursive=true", address).json()
    assert set(whole["serviceAccounts"]) == {"default", email}  # account names kept as written
    token = get(server, BASE + "instance/service-accounts/default/token", address)
    assert token.status == 200 and token.headers["content-type"] == "application/json"
    assert token.headers["metadata-flavor"] == "Google"
    body = token.json()
    assert body["token_type"] == "Bearer" and body["access_token"].startswith("ya29.") and body["expires_in"] > 60
    by_email = get(server, BASE + f"instance/service-accounts/{email}/token", address).json()
    assert by_email["access_token"] == body["access_token"]  # the same account, the same window
    scoped = get(server, BASE + "instance/service-accounts/default/token?scopes=a,b", address).json()
    assert scoped["access_token"] != body["access_token"]
    missing = get(server, BASE + "instance/service-accounts/default/identity", address)
    assert missing.status == 400 and "audience" in missing.text
    assert get(server, BASE + "instance/service-accounts/default/identity?audience=x&format=odd", address).status == 400
    identity = get(server, BASE + "instance/service-accounts/default/identity?audience=https://x&format=full", address)
    assert identity.status == 200 and identity.text.count(".") == 2
    assert get(server, BASE + "instance/service-accounts/nobody@x.iam.gserviceaccount.com/token", address).status == 404


def test_cli_sets_service_accounts_and_turns_them_off(tmp_path):
    import json
    import subprocess
    import sys

    db = str(tmp_path / "cli.db")

    def cli(*args, ok=True):
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, *args],
                              capture_output=True, text=True, timeout=60)
        assert (proc.returncode == 0) == ok, proc.stderr
        return proc.stdout if ok else proc.stderr

    cli("add", "--id", "81", "--gce-service-account", "a@p.iam.gserviceaccount.com=s1,s2",
        "--gce-service-account", "b@p.iam.gserviceaccount.com")
    assert json.loads(cli("show", "81"))["clouds"]["gce"]["service_accounts"] == [
        {"email": "a@p.iam.gserviceaccount.com", "scopes": ["s1", "s2"]}, {"email": "b@p.iam.gserviceaccount.com"}]
    cli("add", "--id", "82", "--no-gce-service-account")
    assert json.loads(cli("show", "82"))["clouds"]["gce"]["service_accounts"] == []
    assert "service_accounts[0].email" in cli("add", "--id", "83", "--gce-service-account", "not-an-email", ok=False)
