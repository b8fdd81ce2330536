"""Real EC2 clients read ``cloudseed serve`` unchanged: botocore, the ``ec2-metadata`` package,
Debian's cloud-init 22.4 Ec2 datasource.

One server on loopback (SQLite registry) and one instance at 127.0.0.1, the address the clients
connect from; the clients are pointed at the server the way each documents it: botocore by
``AWS_EC2_METADATA_SERVICE_ENDPOINT``, ``ec2-metadata`` by its ``service_url`` attributes,
cloud-init by ``datasource: Ec2: metadata_urls``.
"""

from __future__ import annotations

import base64
import calendar
import json
import os
import subprocess
import sys
import time

import pytest

from tests.provider.server.server_support import ROOT, ServerProcess, http

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEc2Clients clients@example"
MAC0, MAC1 = "0a:00:00:00:10:01", "0a:00:00:00:10:02"
USER_DATA = "#cloud-config\nruncmd: [echo ec2]\n"
INSTANCE = "i-0ec2c11e4700000001"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ec2-clients")
    db = str(tmp / "server.db")
    proc = ServerProcess(db, str(tmp / "server"), ["127.0.0.1:0"], config={"rate_limit": 0})
    proc.add(instance_id=INSTANCE, hostname="ip-10-20-0-5.ec2.internal", availability_zone="eu-west-3b",
             project_id="210987654321", instance_type="t3.micro", ami_id="ami-0abc",
             macs=[MAC0, MAC1], tags={"env": "test", "team": "core"}, ssh_keys=[{"name": "k", "data": KEY}],
             addresses=[{"address": "127.0.0.1", "network": "default", "mac": MAC0, "prefix": 8},
                        {"address": "203.0.113.9", "network": "public", "mac": MAC0, "public": True},
                        {"address": "2001:db8:20::5", "network": "v6", "mac": MAC0, "prefix": 64},
                        {"address": "10.21.0.7", "network": "back", "mac": MAC1, "prefix": 24}],
             user_data=USER_DATA,
             ec2={"iam_role": "web-role", "life_cycle": "spot", "security_groups": ["web", "ssh"],
                  "spot": {"action": "stop", "time": "2026-11-24T23:00:00Z"},
                  "placement_group": "pg-1", "partition_number": 2, "host_id": "h-0123",
                  "events": [{"code": "system-reboot", "state": "active", "not_before": "2026-12-01T10:00:00Z"}]})
    proc.db = db
    yield proc
    proc.stop()


def _aws_env(server, tmp) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_SERVICE_ENDPOINT=f"http://127.0.0.1:{server.port}/", HOME=str(tmp),
               AWS_CONFIG_FILE=str(tmp / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"))
    return env


BOTOCORE = """
import json, botocore.session, botocore.utils
session = botocore.session.get_session()
creds = session.get_credentials()
frozen = creds.get_frozen_credentials()
print(json.dumps({"method": creds.method, "key": frozen.access_key, "secret": frozen.secret_key,
                  "token": frozen.token, "region": botocore.utils.IMDSRegionProvider(session).provide()}))
"""


def test_botocore_gets_role_credentials_and_region(server, tmp_path):
    proc = subprocess.run([sys.executable, "-c", BOTOCORE], env=_aws_env(server, tmp_path), capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    served = http(server.port, "/latest/meta-data/iam/security-credentials/web-role").json()
    assert got["method"] == "iam-role"
    assert got["key"] == served["AccessKeyId"] and got["key"].startswith("ASIA") and len(got["key"]) == 20
    assert got["secret"] == served["SecretAccessKey"] and got["token"] == served["Token"]
    assert got["region"] == "eu-west-3"  # botocore's IMDS region provider (placement/availability-zone)


def test_credentials_rotate_and_every_process_agrees(server):
    first = http(server.port, "/latest/meta-data/iam/security-credentials/web-role").json()
    assert first["Code"] == "Success" and first["Type"] == "AWS-HMAC"
    updated = calendar.timegm(time.strptime(first["LastUpdated"], "%Y-%m-%dT%H:%M:%SZ"))
    expires = calendar.timegm(time.strptime(first["Expiration"], "%Y-%m-%dT%H:%M:%SZ"))
    assert expires - updated == 6 * 3600 and updated <= time.time() < updated + 3600
    assert http(server.port, "/latest/meta-data/iam/security-credentials/").text == "web-role"
    # the same registry, another server process: the same set (derived, not stored); the next
    # window gives another set
    from cloudseed.provider.registry import open_registry
    from cloudseed.provider.server.credentials.ec2_credentials import ROTATION, CredentialIssuer

    registry = open_registry(server.db)
    try:
        key = bytes.fromhex(registry.shared_setting("ec2_credentials_key", lambda: "00"))
    finally:
        registry.close()
    window = updated // ROTATION
    issuer = CredentialIssuer(key)
    assert issuer.credentials(INSTANCE, "iam", "web-role", window)["AccessKeyId"] == first["AccessKeyId"]
    later = issuer.credentials(INSTANCE, "iam", "web-role", window + 1)
    assert later["AccessKeyId"] != first["AccessKeyId"] and later["Token"] != first["Token"]
    own = http(server.port, "/latest/meta-data/identity-credentials/ec2/security-credentials/ec2-instance").json()
    assert own["Type"] == "AWS-HMAC" and own["AccessKeyId"] != first["AccessKeyId"]
    assert http(server.port, "/latest/meta-data/identity-credentials/ec2/info").json()["AccountId"] == "210987654321"


EC2_METADATA = """
import json, sys
from ec2_metadata import EC2Metadata
md = EC2Metadata()
md.service_url = sys.argv[1]
md.dynamic_url, md.metadata_url, md.userdata_url = (md.service_url + p for p in ("dynamic/", "meta-data/",
                                                                                   "user-data/"))
names = ["account_id", "ami_id", "autoscaling_target_lifecycle_state", "availability_zone",
         "availability_zone_id", "ami_launch_index", "ami_manifest_path", "domain", "iam_info",
         "iam_security_credentials", "instance_action", "instance_id", "instance_identity_document",
         "instance_life_cycle", "instance_profile_arn", "instance_profile_id", "instance_profile_name",
         "instance_type", "kernel_id", "mac", "partition", "private_hostname", "private_ipv4", "public_hostname",
         "public_ipv4", "region", "reservation_id", "security_groups", "spot_instance_action", "user_data"]
out = {name: getattr(md, name) for name in names}
out["user_data"] = out["user_data"].decode()
out["spot_instance_action"] = [out["spot_instance_action"].action, str(out["spot_instance_action"].time)]
out["public_keys"] = {k: v.openssh_key for k, v in md.public_keys.items()}
out["tags"] = {k: md.tags[k] for k in md.tags}
nic_names = ["device_number", "interface_id", "ipv4_associations", "ipv6s", "ipv6_prefix", "owner_id",
             "private_hostname", "private_ipv4s", "public_hostname", "public_ipv4s", "security_groups",
             "security_group_ids", "subnet_id", "subnet_ipv4_cidr_block", "subnet_ipv6_cidr_blocks", "vpc_id",
             "vpc_ipv4_cidr_block", "vpc_ipv4_cidr_blocks", "vpc_ipv6_cidr_blocks"]
out["nics"] = {mac: {n: getattr(nic, n) for n in nic_names} for mac, nic in md.network_interfaces.items()}
print(json.dumps(out, default=str))
"""


def test_ec2_metadata_package_answers_every_property(server):
    proc = subprocess.run([sys.executable, "-c", EC2_METADATA, f"http://127.0.0.1:{server.port}/latest/"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["account_id"] == "210987654321" and got["ami_id"] == "ami-0abc"
    assert got["availability_zone"] == "eu-west-3b" and got["availability_zone_id"] == "ew3-az2"
    assert got["region"] == "eu-west-3" and got["domain"] == "amazonaws.com" and got["partition"] == "aws"
    assert got["instance_id"] == INSTANCE and got["instance_type"] == "t3.micro"
    assert got["instance_life_cycle"] == "spot" and got["instance_action"] == "none"
    assert got["instance_profile_name"] == "web-role"
    assert got["instance_profile_arn"] == "arn:aws:iam::210987654321:instance-profile/web-role"
    assert got["iam_security_credentials"]["Code"] == "Success"
    assert got["instance_identity_document"]["instanceId"] == INSTANCE
    assert got["mac"] == MAC0 and got["private_ipv4"] == "127.0.0.1" and got["public_ipv4"] == "203.0.113.9"
    assert got["security_groups"] == ["web", "ssh"]
    assert got["spot_instance_action"] == ["stop", "2026-11-24 23:00:00+00:00"]
    assert got["public_keys"] == {"k": KEY} and got["tags"] == {"env": "test", "team": "core"}
    assert got["user_data"] == USER_DATA and got["kernel_id"] is None
    nic0, nic1 = got["nics"][MAC0], got["nics"][MAC1]
    assert nic0["device_number"] == 0 and nic1["device_number"] == 1
    assert nic0["ipv4_associations"] == {"203.0.113.9": ["127.0.0.1"]}
    assert nic0["ipv6s"] == ["2001:db8:20::5"] and nic0["subnet_ipv6_cidr_blocks"] == ["2001:db8:20::/64"]
    assert nic0["subnet_ipv4_cidr_block"] == "127.0.0.0/8" and nic1["subnet_ipv4_cidr_block"] == "10.21.0.0/24"
    assert nic1["vpc_ipv4_cidr_block"] == "10.21.0.0/16" and nic1["vpc_ipv4_cidr_blocks"] == ["10.21.0.0/16"]
    assert nic0["vpc_id"] == nic1["vpc_id"] and nic0["vpc_id"].startswith("vpc-")
    assert nic0["subnet_id"] != nic1["subnet_id"] and nic1["subnet_id"].startswith("subnet-")
    assert nic0["security_group_ids"] == nic1["security_group_ids"] and len(nic0["security_group_ids"]) == 2
    assert nic0["owner_id"] == "210987654321" and nic1["private_ipv4s"] == ["10.21.0.7"]


def test_identity_signatures_verify_with_the_published_certificate(server, tmp_path):
    cert = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db,
                           "identity-certificate"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert cert.returncode == 0 and cert.stdout.startswith("-----BEGIN CERTIFICATE-----"), cert.stderr
    (tmp_path / "cert.pem").write_text(cert.stdout)
    base = "/latest/dynamic/instance-identity/"
    assert http(server.port, base).text.splitlines() == ["document", "pkcs7", "signature", "rsa2048"]
    document = http(server.port, base + "document").body
    (tmp_path / "document").write_bytes(document)
    for name, extra in (("rsa2048", []), ("pkcs7", ["-content", str(tmp_path / "document")])):
        (tmp_path / name).write_text("-----BEGIN PKCS7-----\n" + http(server.port, base + name).text
                                     + "\n-----END PKCS7-----\n")
        verified = subprocess.run(["openssl", "smime", "-verify", "-in", str(tmp_path / name), "-inform", "PEM",
                                   "-certfile", str(tmp_path / "cert.pem"), "-noverify", *extra],
                                  capture_output=True, timeout=30)
        assert verified.returncode == 0 and verified.stdout == document, verified.stderr
    (tmp_path / "sig").write_bytes(base64.b64decode(http(server.port, base + "signature").text))
    subprocess.run(["openssl", "x509", "-in", str(tmp_path / "cert.pem"), "-pubkey", "-noout", "-out",
                    str(tmp_path / "pub")], check=True, timeout=30)
    verified = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(tmp_path / "pub"), "-signature",
                               str(tmp_path / "sig"), str(tmp_path / "document")], capture_output=True, timeout=30)
    assert verified.returncode == 0, verified.stderr


REFERENCE = """
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceEc2 as ds
tmp, url = sys.argv[1], sys.argv[2]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
ds.identify_platform = lambda: ds.CloudNames.AWS
cfg = {"datasource_list": ["Ec2"], "datasource": {"Ec2": {"metadata_urls": [url], "max_wait": 20, "timeout": 5}}}
src = ds.DataSourceEc2(cfg, distro, paths)
ok = src.get_data()
net = ds.convert_ec2_metadata_network_config(src.metadata["network"], macs_to_nics=json.loads(sys.argv[3]),
                                             fallback_nic="eth0")
print(json.dumps({"ok": ok, "instance_id": src.get_instance_id(), "keys": src.get_public_ssh_keys(),
                  "userdata": src.userdata_raw.decode(), "zone": src.availability_zone, "region": src.region,
                  "hostname": src.get_hostname().hostname, "network": net,
                  "identity": src.identity, "api": src.metadata.get("instance-life-cycle"),
                  "signed": {k: v for k, v in src._crawled_metadata["dynamic"]["instance-identity"].items()
                             if k != "document"}}, default=str))
"""


@pytest.mark.reference
def test_reference_cloud_init_ec2_datasource_reads_the_same_instance(server, tmp_path):
    from cloudseed.agent.datasources.ec2 import network_config_from_macs
    from tests.reference import reference_python

    macs = {MAC0: "eth0", MAC1: "eth1"}
    proc = reference_python(REFERENCE, str(tmp_path), f"http://127.0.0.1:{server.port}", json.dumps(macs))
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"] is True and got["instance_id"] == INSTANCE
    assert got["keys"] == [KEY] and got["userdata"] == USER_DATA
    assert got["zone"] == "eu-west-3b" and got["region"] == "eu-west-3"
    assert got["hostname"] == "ip-10-20-0-5" and got["identity"]["accountId"] == "210987654321"
    assert got["api"] == "spot"
    # it reads the three signed leaves too (signed in process); openssl, independent, verifies one
    assert sorted(got["signed"]) == ["pkcs7", "rsa2048", "signature"], got["signed"]
    lines = got["signed"]["rsa2048"]  # its crawler keeps a leaf of several lines as their list
    (tmp_path / "ref-rsa2048.pem").write_text("-----BEGIN PKCS7-----\n" + "\n".join(lines) + "\n-----END PKCS7-----\n")
    verified = subprocess.run(["openssl", "smime", "-verify", "-in", str(tmp_path / "ref-rsa2048.pem"), "-inform",
                               "PEM", "-noverify"], capture_output=True, text=True)
    assert verified.returncode == 0 and json.loads(verified.stdout)["instanceId"] == INSTANCE, verified.stderr
    ethernets = got["network"]["ethernets"]
    assert ethernets["eth0"]["dhcp6"] is True and ethernets["eth1"]["dhcp4-overrides"] == {"route-metric": 200}
    # our agent's conversion of the same served tree is the reference's
    ours = _served_macs(server)
    assert network_config_from_macs(ours, system_macs=macs) == got["network"]


def _served_macs(server) -> dict:
    """The served ``network/interfaces/macs`` tree, leaves with several lines as lists (as crawled)."""
    base = "/latest/meta-data/network/interfaces/macs/"
    tree: dict = {}
    for mac in http(server.port, base).text.splitlines():
        mac = mac.rstrip("/")
        nic = tree[mac] = {}
        for leaf in http(server.port, f"{base}{mac}/").text.splitlines():
            if leaf.endswith("/"):
                continue
            lines = http(server.port, f"{base}{mac}/{leaf}").text.splitlines()
            nic[leaf] = lines if len(lines) > 1 else lines[0]
    return tree


def test_optional_categories_follow_the_record(server):
    from tests.provider.server.server_support import new_address

    address = new_address()
    server.add(instance_id="i-0ec2c11e4700000002", hostname="plain", availability_zone="cn-north-1a",
               addresses=[address], tags={"env": "hidden"}, ec2={"instance_metadata_tags": "disabled"})
    md = "/latest/meta-data/"
    listing = server.get(md, address).text.splitlines()
    assert "tags/" not in listing and "spot/" not in listing and "iam/" not in listing
    assert {"services/", "events/", "identity-credentials/", "instance-life-cycle"} <= set(listing)
    for path in ("tags/instance/", "tags/instance/env", "spot/instance-action", "spot/termination-time",
                 "iam/info", "iam/security-credentials/"):
        assert server.get(md + path, address).status == 404, path
    assert server.get(md + "services/domain", address).text == "amazonaws.com.cn"
    assert server.get(md + "services/partition", address).text == "aws-cn"
    assert server.get(md + "events/maintenance/scheduled", address).json() == []
    assert server.get(md + "instance-life-cycle", address).text == "on-demand"
    # an older API version has only what AWS had then
    assert "services/" not in server.get("/2009-04-04/meta-data/", address).text.splitlines()
    # the instance that allows tags and has events sees them
    assert http(server.port, md + "tags/instance/team").text == "core"
    scheduled = http(server.port, md + "events/maintenance/scheduled").json()
    assert scheduled[0]["Code"] == "system-reboot" and scheduled[0]["NotBefore"] == "01 Dec 2026 10:00:00 GMT"
    assert http(server.port, md + "placement/partition-number").text == "2"


def test_bad_ec2_settings_are_refused_naming_the_key(server):
    for ec2, field in (({"life_cycle": "reserved"}, "ec2.life_cycle"), ({"hop_limit": 65}, "ec2.hop_limit"),
                       ({"spot": {"action": "stop", "time": "soon"}}, "ec2.spot.time"),
                       ({"iam_role": "a/b"}, "ec2.iam_role"), ({"colour": "red"}, "ec2.colour")):
        reply = server.admin("POST", "/v1/instances", {"instance_id": "i-bad-ec2", "ec2": ec2})
        assert reply.status == 400 and field in reply.text, (ec2, reply.text)


def test_many_new_instances_asking_for_signatures_at_once(server):
    """Signing runs in threads while the server answers: every instance gets its own signature."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.provider.server.server_support import new_address

    addresses = [new_address() for _ in range(12)]
    for index, address in enumerate(addresses):
        server.add(instance_id=f"i-0ec2519e{index:010d}", hostname=f"sig-{index}", addresses=[address])
    path = "/latest/dynamic/instance-identity/signature"
    with ThreadPoolExecutor(12) as pool:
        replies = list(pool.map(lambda a: (server.get(path, a), server.get(path, a)), addresses))
    assert all(first.status == 200 and first.body == again.body for first, again in replies)
    assert len({first.body for first, _again in replies}) == len(addresses)


def test_instances_cli_sets_and_merges_ec2_settings(tmp_path):
    db = str(tmp_path / "cli.db")

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, *args],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("add", "--id", "i-cli", "--iam-role", "app", "--spot-action", "terminate@2026-11-24T23:30:00Z",
        "--security-group", "web", "--security-group", "db", "--hop-limit", "2", "--instance-metadata-tags", "disabled")
    cli("update", "i-cli", "--life-cycle", "spot")  # merged: the other settings stay
    ec2 = json.loads(cli("show", "i-cli"))["ec2"]
    assert ec2 == {"iam_role": "app", "spot": {"action": "terminate", "time": "2026-11-24T23:30:00Z"},
                   "security_groups": ["web", "db"], "hop_limit": 2, "instance_metadata_tags": "disabled",
                   "life_cycle": "spot"}
    cli("update", "i-cli", "--spot-action", "none")
    assert "spot" not in json.loads(cli("show", "i-cli"))["ec2"]
    bad = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, "update", "i-cli",
                          "--spot-action", "explode@2026-11-24T23:30:00Z"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "ec2.spot.action" in bad.stderr
