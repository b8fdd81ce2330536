"""``cloudseed seed build`` from the command line: files, registry, network config, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cloudseed.cli import main
from tests.provider.seeds.images import KEY, blkid, extract, tree


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_build_from_files(tmp_path, capsys):
    user = _write(tmp_path, "ud", "#cloud-config\nruncmd: [true]\n")
    meta = _write(tmp_path, "md.yaml", "availability-zone: zone-a\n")
    key = _write(tmp_path, "lab.pub", KEY + "\n")
    out = str(tmp_path / "seed.iso")
    assert main(["seed", "build", "--instance-id", "iid-1", "--hostname", "h1", "--user-data", user,
                 "--meta-data", meta, "--ssh-key", key, "-o", out]) == 0
    assert "label cidata" in capsys.readouterr().out
    files = tree(extract(out, "iso9660", str(tmp_path / "x")))
    assert b"availability-zone: zone-a" in files["meta-data"]
    assert b"instance-id: iid-1" in files["meta-data"]


def test_v2_network_config_becomes_network_data_json(tmp_path):
    net = _write(tmp_path, "net.yaml", "network:\n  version: 2\n  ethernets:\n    eth0:\n"
                 "      match: {macaddress: '52:54:00:12:34:56'}\n      addresses: [192.0.2.10/24]\n")
    out = str(tmp_path / "cd.vfat")
    assert main(["seed", "build", "--kind", "configdrive", "--fs", "vfat", "--instance-id", "i",
                 "--network-config", net, "-o", out]) == 0
    files = tree(extract(out, "vfat", str(tmp_path / "x")))
    data = json.loads(files["openstack/latest/network_data.json"])
    assert data["links"][0]["ethernet_mac_address"] == "52:54:00:12:34:56"
    assert data["networks"][0]["ip_address"] == "192.0.2.10"


def test_network_config_that_cannot_be_expressed_is_an_error(tmp_path, capsys):
    net = _write(tmp_path, "net.yaml", "network:\n  version: 2\n  bonds:\n    bond0: {interfaces: [eth9]}\n")
    out = str(tmp_path / "cd.iso")
    assert main(["seed", "build", "--kind", "configdrive", "--instance-id", "i", "--network-config", net,
                 "-o", out]) == 2
    assert "network config" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_invalid_meta_data_names_file_and_line(tmp_path, capsys):
    meta = _write(tmp_path, "md.yaml", "a: 1\nb: [unclosed\n")
    assert main(["seed", "build", "--instance-id", "i", "--meta-data", meta, "-o", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "md.yaml" in err and "line" in err


def test_meta_data_must_be_a_mapping(tmp_path, capsys):
    meta = _write(tmp_path, "md.yaml", "- just\n- a list\n")
    assert main(["seed", "build", "--instance-id", "i", "--meta-data", meta, "-o", str(tmp_path / "s")]) == 2
    assert "must be a mapping" in capsys.readouterr().err


def test_missing_user_data_file(tmp_path, capsys):
    assert main(["seed", "build", "--instance-id", "i", "--user-data", str(tmp_path / "nope"),
                 "-o", str(tmp_path / "s")]) == 2
    assert "nope" in capsys.readouterr().err


def test_not_a_public_key(tmp_path, capsys):
    key = _write(tmp_path, "k.pub", "-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert main(["seed", "build", "--instance-id", "i", "--ssh-key", key, "-o", str(tmp_path / "s")]) == 2
    assert "not an OpenSSH public key" in capsys.readouterr().err


def test_build_from_registry(tmp_path):
    db = str(tmp_path / "reg.db")
    user = _write(tmp_path, "ud", "#!/bin/sh\necho from-registry\n")
    key = _write(tmp_path, "lab.pub", KEY + "\n")
    subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, "add", "--id", "iid-reg-7",
                    "--hostname", "fromdb", "--address", "10.0.0.7", "--ssh-key", key, "--user-data", user],
                   check=True, capture_output=True)
    out = str(tmp_path / "cd.iso")
    assert main(["seed", "build", "--kind", "configdrive", "--db", db, "--instance", "iid-reg-7", "-o", out]) == 0
    assert blkid(out)["LABEL"] == "config-2"
    files = tree(extract(out, "iso9660", str(tmp_path / "x")))
    meta = json.loads(files["openstack/latest/meta_data.json"])
    assert meta["uuid"] == "iid-reg-7" and meta["hostname"] == "fromdb"
    assert list(meta["public_keys"].values()) == [KEY]
    assert files["openstack/latest/user_data"] == b"#!/bin/sh\necho from-registry\n"
    assert json.loads(files["ec2/latest/meta-data.json"])["local-ipv4"] == "10.0.0.7"


def test_unknown_registry_instance(tmp_path, capsys):
    db = str(tmp_path / "reg.db")
    subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, "add", "--id", "x",
                    "--address", "10.0.0.8"], check=True, capture_output=True)
    assert main(["seed", "build", "--db", db, "--instance", "nope", "-o", str(tmp_path / "s")]) == 2
    assert "no such instance" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["a" * 70, "x:y"])
def test_file_name_rules(bad):
    from cloudseed.provider.seeds.errors import SeedError
    from cloudseed.provider.seeds.names import check_paths

    with pytest.raises(SeedError, match="file name"):
        check_paths([f"dir/{bad}"], "iso9660" if len(bad) > 64 else "vfat")
