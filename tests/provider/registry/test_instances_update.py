"""``cloudseed instances update`` is a patch: each flag changes what it names, nothing else is lost.

Issue 23: ``update ID --gce-attribute k=v`` replaced the whole ``clouds`` object, losing the Azure,
Oracle, DigitalOcean, Hetzner and Vultr settings and the GCE project id. The test walks EVERY
option of ``instances update`` (read from the command's own parser, so a new flag without a case
here fails it): an instance with every field set is updated with that one flag, and the record
before and after must differ exactly where the flag says.
"""

from __future__ import annotations

import argparse
import json

import pytest

from cloudseed.cli import main
from cloudseed.provider.registry import open_registry

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyA a@example"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyB b@example"
CLOUDS = {"gce": {"project_id": "gce-proj", "attributes": {"enable-oslogin": "FALSE"}},
          "azure": {"vm_size": "Standard_B2s"}, "oracle": {"shape": "VM.Standard.E4.Flex"},
          "digitalocean": {"droplet_id": 4242}, "hetzner": {"numeric_id": 77}, "vultr": {"region": "ams"}}


def flatten(value, prefix=""):
    """{'a.b': 1, ...} of a JSON value (lists as whole values)."""
    if isinstance(value, dict) and value:
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, text in {"key_a": KEY_A, "key_b": KEY_B, "ud": "#cloud-config\nhostname: a\n",
                       "ud2": "#cloud-config\nhostname: b\n", "vendor": json.dumps({"cloud-init": "#cloud-config\n"}),
                       "vendor2": "#cloud-config\nruncmd: [true]\n",
                       "netdata": json.dumps({"links": [], "networks": [], "services": []}),
                       "netdata2": json.dumps({"links": [{"id": "l0", "type": "phy",
                                                          "ethernet_mac_address": "52:54:00:00:00:09"}],
                                               "networks": [], "services": []}),
                       "clouds": json.dumps(CLOUDS), "clouds_patch": json.dumps({"vultr": None, "hetzner": {}}),
                       "ec2": json.dumps({"vpc_id": "vpc-1", "placement_group": "pg"}),
                       "ec2_patch": json.dumps({"host_id": "h-9"})}.items():
        path = tmp_path / name
        path.write_text(text)
        paths[name] = str(path)
    return paths


def full_instance(db: str, files: dict) -> None:
    assert main(["instances", "--db", db, "add", "--id", "i-full", "--hostname", "full", "--name", "Full",
                 "--address", "10.0.0.5/24@net-a", "--address", "fd00::5/64@net-a", "--mac", "52:54:00:00:00:01",
                 "--gateway", "10.0.0.254", "--nameserver", "10.0.0.53",
                 "--ssh-key", files["key_a"], "--user-data", files["ud"], "--vendor-data", files["vendor"],
                 "--network-data", files["netdata"], "--availability-zone", "az-1", "--project-id", "proj",
                 "--tag", "env=test", "--tag", "team=web", "--meta", "role=web", "--meta", "tier=1",
                 "--imds-tokens", "required", "--instance-type", "m1.large", "--ami-id", "ami-1",
                 "--iam-role", "app", "--instance-metadata-tags", "disabled", "--hop-limit", "2",
                 "--life-cycle", "spot", "--spot-action", "stop@2026-11-24T21:00:00Z", "--security-group", "web",
                 "--rebalance-notice", "2026-11-24T20:58:00Z", "--target-lifecycle-state", "InService",
                 "--clouds-json", files["clouds"], "--gce-attribute", "ssh-keys=u:k",
                 "--gce-project-attribute", "p=1", "--ec2-json", files["ec2"]]) == 0


# flag -> (arguments, {changed path: new value}); paths are flatten() keys of the shown record.
CASES = {
    "--hostname": (["new-host"], {"hostname": "new-host"}),
    "--name": (["New Name"], {"name": "New Name"}),
    "--address": (["10.9.0.5/24@net-b"], {"addresses": [{"address": "10.9.0.5", "network": "net-b", "prefix": 24}]}),
    "--mac": (["52:54:00:00:00:02"], {"macs": ["52:54:00:00:00:02"]}),
    "--gateway": (["auto"], {"gateway": None}),
    "--nameserver": (["none"], {"nameservers": []}),
    "--ssh-key": (["@key_b"], {"ssh_keys": [{"name": "key0", "type": "ssh-ed25519", "data": KEY_B}]}),
    "--user-data": (["@ud2"], {"user_data": "#cloud-config\nhostname: b\n"}),
    "--no-user-data": ([], {"user_data": None}),
    "--vendor-data": (["@vendor2"], {"vendor_data": "#cloud-config\nruncmd: [true]\n",
                                     "vendor_data.cloud-init": ...}),
    "--network-data": (["@netdata2"], {"network_data.links": [{"id": "l0", "type": "phy",
                                                               "ethernet_mac_address": "52:54:00:00:00:09"}]}),
    "--availability-zone": (["az-2"], {"availability_zone": "az-2"}),
    "--project-id": (["proj2"], {"project_id": "proj2"}),
    "--tag": (["env=prod"], {"tags.env": "prod"}),
    "--remove-tag": (["team"], {"tags.team": ...}),
    "--meta": (["tier=2"], {"meta.tier": "2"}),
    "--remove-meta": (["role"], {"meta.role": ...}),
    "--imds-tokens": (["optional"], {"imds_tokens": "optional"}),
    "--instance-type": (["m1.small"], {"instance_type": "m1.small"}),
    "--ami-id": (["ami-2"], {"ami_id": "ami-2"}),
    "--iam-role": (["other"], {"ec2.iam_role": "other"}),
    "--instance-metadata-tags": (["enabled"], {"ec2.instance_metadata_tags": "enabled"}),
    "--hop-limit": (["3"], {"ec2.hop_limit": 3}),
    "--life-cycle": (["on-demand"], {"ec2.life_cycle": "on-demand"}),
    "--spot-action": (["none"], {"ec2.spot.action": ..., "ec2.spot.time": ...}),
    "--security-group": (["db"], {"ec2.security_groups": ["db"]}),
    "--rebalance-notice": (["none"], {"ec2.rebalance.notice_time": ...}),
    "--target-lifecycle-state": (["Terminated"], {"ec2.target_lifecycle_state": "Terminated"}),
    "--ec2-json": (["@ec2_patch"], {"ec2.host_id": "h-9"}),
    "--clouds-json": (["@clouds_patch"], {"clouds.vultr.region": ..., "clouds.hetzner.numeric_id": ...,
                                          "clouds.hetzner": {}}),
    "--gce-attribute": (["block-project-ssh-keys=TRUE"], {"clouds.gce.attributes.block-project-ssh-keys": "TRUE"}),
    "--gce-project-attribute": (["q=2"], {"clouds.gce.project_attributes.q": "2"}),
    "--gce-service-account": (["sa@proj.iam.gserviceaccount.com=cloud-platform"],
                              {"clouds.gce.service_accounts": [{"email": "sa@proj.iam.gserviceaccount.com",
                                                                "scopes": ["cloud-platform"]}]}),
    "--no-gce-service-account": ([], {"clouds.gce.service_accounts": []}),
    "--no-azure-system-identity": ([], {"clouds.azure.system_identity": False}),
    "--azure-user-identity": (["uai-1"], {"clouds.azure.user_identities": [{"name": "uai-1"}]}),
}
NOT_FIELDS = {"-h", "--help"}  # argparse's own


def update_options() -> set[str]:
    """Every option string of ``cloudseed instances update`` (its real parser)."""
    from cloudseed.commands import instances

    parser = argparse.ArgumentParser()
    instances.configure(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    update = sub.choices["update"]
    return {opt for action in update._actions for opt in action.option_strings} - NOT_FIELDS


def test_every_update_flag_has_a_case():
    assert update_options() - set(CASES) == set(), "flags of 'instances update' without a patch case here"
    assert set(CASES) - update_options() == set()


@pytest.mark.parametrize("flag", sorted(CASES))
def test_update_changes_only_what_the_flag_names(tmp_path, files, flag):
    db = str(tmp_path / "registry.db")
    full_instance(db, files)
    with open_registry(db) as registry:
        before = flatten(registry.get("i-full").to_dict())
    assert before["clouds.gce.project_id"] == "gce-proj" and before["clouds.vultr.region"] == "ams"
    args, expected = CASES[flag]
    args = [files[a[1:]] if a.startswith("@") else a for a in args]
    assert main(["instances", "--db", db, "update", "i-full", flag, *args]) == 0
    with open_registry(db) as registry:
        after = flatten(registry.get("i-full").to_dict())
    changed = {k for k in before.keys() | after.keys() if before.get(k, ...) != after.get(k, ...)}
    changed.discard("password_set")
    assert changed == set(expected), f"{flag} changed {sorted(changed)}, expected {sorted(expected)}"
    for key, value in expected.items():
        assert after.get(key, ...) == value, (key, after.get(key, ...))


def test_removing_what_is_not_there_is_a_clear_error(tmp_path, files, capsys):
    db = str(tmp_path / "registry.db")
    full_instance(db, files)
    assert main(["instances", "--db", db, "update", "i-full", "--remove-tag", "nope"]) == 1
    assert "--remove-tag 'nope'" in capsys.readouterr().err
    assert main(["instances", "--db", db, "update", "i-full"]) == 1
    assert "nothing to change" in capsys.readouterr().err
