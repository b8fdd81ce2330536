"""EC2 documents that must look like EC2's: 12-digit account ids, distinct security group and subnet
ids, the 2009-04-04 listing (no ``mac``, as on EC2), rebalance and Auto Scaling settings."""

from __future__ import annotations

import json

import pytest

from cloudseed.provider.instance_data.ec2 import account_id, identity_document, security_group_ids, subnet_id
from cloudseed.provider.registry import InstanceRecord
from tests.provider.server.server_support import new_address

# A real EC2 instance's /2009-04-04/meta-data/ listing, as posted in cloud-init issue 5711 (2024)
EC2_2009_04_04 = ["ami-id", "ami-launch-index", "ami-manifest-path", "block-device-mapping/", "hostname",
                  "instance-action", "instance-id", "instance-type", "local-hostname", "local-ipv4", "placement/",
                  "profile", "public-hostname", "public-ipv4", "public-keys/", "reservation-id", "security-groups"]


@pytest.mark.parametrize("project, expected", [
    ("", "123456789012"), ("210987654321", "210987654321"), ("4242", "000000004242"),
    ("rcproj", None), ("1234567890123", None), ("b5e8-4a7f", None),
])
def test_account_ids_are_always_twelve_digits(project, expected):
    record = InstanceRecord(instance_id="i-acct", project_id=project)
    account = account_id(record)
    assert len(account) == 12 and account.isdigit()
    if expected:
        assert account == expected
    assert account_id(InstanceRecord(instance_id="i-other", project_id=project)) == account  # deterministic
    assert json.loads(identity_document(record))["accountId"] == account


def test_non_numeric_project_has_a_numeric_arn(server):
    address = new_address()
    server.add(instance_id=f"ac-{address.replace('.', '-')}", hostname="ac", project_id="rcproj",
               addresses=[{"address": address, "network": "default"}], ec2={"iam_role": "web"})
    info = server.get("/latest/meta-data/iam/info", address).json()
    account = info["InstanceProfileArn"].split(":")[4]
    assert len(account) == 12 and account.isdigit() and "rcproj" not in info["InstanceProfileArn"]
    assert server.get("/latest/meta-data/identity-credentials/ec2/info", address).json()["AccountId"] == account


def test_a_bad_account_id_setting_is_refused(server):
    reply = server.admin("POST", "/v1/instances", {"instance_id": "i-badacct", "ec2": {"account_id": "rcproj"}})
    assert reply.status == 400 and reply.json()["field"] == "ec2.account_id"


def test_security_group_and_subnet_ids_differ_for_the_same_name():
    record = InstanceRecord(instance_id="i-ids", project_id="210987654321")
    group = security_group_ids(record)[0]  # the group "default"
    subnet = subnet_id(record, "default")  # the network "default"
    assert group.startswith("sg-") and subnet.startswith("subnet-")
    assert group[3:] != subnet[7:]


def test_old_versions_list_what_ec2_lists(server):
    address = new_address()
    server.add(instance_id=f"old-{address.replace('.', '-')}", hostname="old",
               addresses=[{"address": address, "network": "default"}, {"address": "198.51.100.7", "public": True,
                                                                       "network": "default"}],
               macs=["52:54:00:00:20:09"], ssh_keys=["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOld old@example"])
    assert sorted(server.get("/2009-04-04/meta-data/", address).text.split("\n")) == EC2_2009_04_04
    assert server.get("/2009-04-04/meta-data/mac", address).status == 404  # ec2metadata --mac: unavailable
    assert server.get("/2009-04-04/meta-data/profile", address).text == "default-hvm"
    assert server.get("/2011-01-01/meta-data/mac", address).text == "52:54:00:00:20:09"


def test_rebalance_and_lifecycle_settings(server):
    address = new_address()
    server.add(instance_id=f"rb-{address.replace('.', '-')}", hostname="rb",
               addresses=[{"address": address, "network": "default"}],
               ec2={"rebalance": {"notice_time": "2026-11-24T20:58:00Z"}, "target_lifecycle_state": "Standby"})
    assert server.get("/latest/meta-data/events/recommendations/rebalance", address).json() == {
        "noticeTime": "2026-11-24T20:58:00Z"}
    assert server.get("/2020-10-27/meta-data/events/recommendations/rebalance", address).status == 200
    assert server.get("/2019-10-01/meta-data/events/recommendations/rebalance", address).status == 404
    assert server.get("/latest/meta-data/autoscaling/target-lifecycle-state", address).text == "Standby"
    assert "autoscaling/" in server.get("/latest/meta-data/", address).text.split("\n")
    bad = server.admin("POST", "/v1/instances", {"instance_id": "i-badlc", "ec2": {"target_lifecycle_state": "Up"}})
    assert bad.status == 400 and bad.json()["field"] == "ec2.target_lifecycle_state"
