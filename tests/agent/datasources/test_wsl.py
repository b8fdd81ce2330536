"""The WSL datasource in fake root trees laid out as WSL gives them.

A root with WSL's kernel release, the Windows drive mounted (``/proc/mounts``: 9p ``aname=drvfs`` at
``/mnt/c``) and the Windows user's profile under ``/mnt/c/Users/<name>`` holding ``.cloud-init`` and
``.ubuntupro/.cloud-init``: the precedence of the user-data files, the meta-data instance id, the
Ubuntu Pro agent's and Landscape's data, and the agent provisioning such a root end to end. There is no
cloud-init 22.4 oracle (WSL came in 24.1): the expectations follow cloud-init 24.x's documentation.
"""

from __future__ import annotations

import email
import time

import pytest
import yaml

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources.wsl import WSL, WSLError
from cloudseed.agent.state import Paths

UBUNTU = 'ID=ubuntu\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\nPRETTY_NAME="Ubuntu 24.04 LTS"\n'
HOME = "/mnt/c/Users/alice"
MOUNTS = "C:\\134 /mnt/c 9p rw,noatime,dirsync,aname=drvfs;path=C:\\;uid=1000;gid=1000,mmap,access=client 0 0\n"


def wsl_root(target, os_release: str = UBUNTU, files: dict[str, str] | None = None) -> None:
    target.write("/proc/sys/kernel/osrelease", "5.15.153.1-microsoft-standard-WSL2\n")
    target.write("/proc/mounts", "none / ext4 rw 0 0\n" + MOUNTS)
    target.write("/etc/os-release", os_release)
    for name in ("Public", "Default", "bob"):
        target.makedirs(f"/mnt/c/Users/{name}")
    target.makedirs(f"{HOME}/Documents")
    for path, text in (files or {}).items():
        target.write(f"{HOME}/{path}", text)


def context(target, **ds) -> DatasourceContext:
    cfg = {"datasource": {"WSL": {"instance_name": "Dev-Box", **ds}}}
    return DatasourceContext(root=target, cfg=cfg, cmdline="", paths=Paths(target), stage=LOCAL)


def found(target, **ds):
    return find_datasource(context(target, **ds), ["WSL"]).datasource


def test_detection(target):
    assert WSL.why(context(target)) is None
    target.write("/proc/sys/kernel/osrelease", "6.1.0-18-cloud-amd64\n")
    assert WSL.why(context(target)) is None
    start = time.monotonic()
    assert find_datasource(context(target), ["WSL"]).tried == [] and time.monotonic() - start < 0.5
    target.write("/proc/sys/kernel/osrelease", "5.15.153.1-microsoft-standard-WSL2\n")
    assert WSL.why(context(target)) == "kernel release '5.15.153.1-microsoft-standard-WSL2' is WSL's"
    target.write("/proc/sys/kernel/osrelease", "6.1.0\n")
    target.write("/proc/sys/fs/binfmt_misc/WSLInterop", "enabled\n")
    assert "WSLInterop" in WSL.why(context(target))


@pytest.mark.parametrize("present,expected", [
    (["default.user-data", "ubuntu-all.user-data", "ubuntu-24.04.user-data", "Dev-Box.user-data"],
     "Dev-Box.user-data"),
    (["default.user-data", "ubuntu-all.user-data", "UBUNTU-24.04.USER-DATA"], "UBUNTU-24.04.USER-DATA"),
    (["default.user-data", "Ubuntu-All.user-data"], "Ubuntu-All.user-data"),
    (["default.user-data", "debian-all.user-data"], "default.user-data"),
])
def test_user_data_precedence(target, present, expected):
    wsl_root(target, files={f".cloud-init/{name}": f"#cloud-config\nfrom: {name}\n" for name in present})
    ds = found(target)
    assert ds is not None and yaml.safe_load(ds.userdata_raw) == {"from": expected}
    assert ds.instance_id == "iid-datasource-wsl" and ds.platform == "wsl"
    assert ds.extra["user_data_files"] == [f"{HOME}/.cloud-init/{expected}"]


def test_codename_when_no_version_and_meta_data(target):
    wsl_root(target, os_release="ID=debian\nVERSION_CODENAME=trixie\n", files={
        ".cloud-init/debian-trixie.user-data": "#!/bin/sh\necho hi\n",
        ".cloud-init/Dev-Box.meta-data": "instance-id: wsl-7\nlocal-hostname: box\n",
        ".ubuntupro/.cloud-init/agent.yaml": "landscape: {client: {account_name: x}}\n",  # not Ubuntu: unread
    })
    ds = found(target)
    assert ds.userdata_raw == b"#!/bin/sh\necho hi\n"  # not YAML mapping: as it is
    assert ds.instance_id == "wsl-7" and ds.local_hostname == "box"


def test_bad_meta_data_is_an_error(target):
    wsl_root(target, files={".cloud-init/default.user-data": "#cloud-config\n{}\n",
                            ".cloud-init/dev-box.meta-data": "local-hostname: box\n"})
    with pytest.raises(WSLError, match="dev-box.meta-data does not hold a mapping with instance-id"):
        WSL(context(target)).fetch()


def test_pro_agent_overrides_top_level_keys_and_landscape_replaces_user_data(target):
    wsl_root(target, files={
        ".cloud-init/default.user-data": "#cloud-config\npackages: [vim]\nlandscape: {client: {a: 1}}\n",
        ".ubuntupro/.cloud-init/agent.yaml": "#cloud-config\nlandscape:\n  client: {account_name: pro}\n"
                                             "ubuntu_pro: {token: T}\n",
    })
    ds = found(target)
    assert yaml.safe_load(ds.userdata_raw) == {"packages": ["vim"], "landscape": {"client": {"account_name": "pro"}},
                                               "ubuntu_pro": {"token": "T"}}
    assert ds.userdata_raw.startswith(b"#cloud-config\n")
    target.write(f"{HOME}/.ubuntupro/.cloud-init/Dev-Box.user-data", "#cloud-config\nlocale: fr_FR\n")
    ds = found(target)
    assert yaml.safe_load(ds.userdata_raw) == {"locale": "fr_FR", "landscape": {"client": {"account_name": "pro"}},
                                               "ubuntu_pro": {"token": "T"}}


def test_a_script_and_agent_yaml_become_a_multipart(target):
    wsl_root(target, files={".cloud-init/default.user-data": "#!/bin/sh\necho user\n",
                            ".ubuntupro/.cloud-init/agent.yaml": "ubuntu_pro: {token: T}\n"})
    ds = found(target)
    parts = [p.get_payload(decode=True) for p in email.message_from_bytes(ds.userdata_raw).walk()
             if not p.is_multipart()]
    assert parts[0] == b"#!/bin/sh\necho user\n" and yaml.safe_load(parts[1]) == {"ubuntu_pro": {"token": "T"}}


def test_nothing_to_read(target):
    wsl_root(target, files={".cloud-init/notes.txt": "x"})
    assert found(target) is None
    wsl_root(target)
    target.remove_tree(f"{HOME}/.cloud-init")
    with pytest.raises(WSLError, match="no Windows user profile with .cloud-init under /mnt/c/Users"):
        WSL(context(target)).fetch()


def test_home_choice(target):
    wsl_root(target, files={".cloud-init/default.user-data": "#cloud-config\n{}\n"})
    target.write("/mnt/c/Users/bob/.cloud-init/default.user-data", "#cloud-config\nbob: 1\n")
    with pytest.raises(WSLError, match="several Windows user profiles.*alice.*bob.*user_profile"):
        WSL(context(target)).fetch()
    ds = found(target, user_profile="/mnt/c/Users/bob")
    assert yaml.safe_load(ds.userdata_raw) == {"bob": 1}
    target.write("/proc/mounts", "none / ext4 rw 0 0\n")  # automount off, and no /mnt/c: nothing to read
    target.remove_tree("/mnt/c")
    with pytest.raises(WSLError, match="no Windows drive is mounted"):
        WSL(context(target)).fetch()


def test_agent_provisions_a_wsl_root(target):
    wsl_root(target, files={".cloud-init/DEV-BOX.user-data":
                            "#cloud-config\nwrite_files:\n  - {path: /etc/from-windows, content: seen}\n"})
    target.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
                 "datasource_list: [WSL, None]\ndatasource: {WSL: {instance_name: Dev-Box}}\n"
                 "cloud_init_modules: [write_files]\ncloud_config_modules: []\ncloud_final_modules: []\n")
    from cloudseed.agent.boot.stages import Agent

    agent = Agent(target)
    assert agent.run_local() == 0  # no renderer needed: WSL's network is left alone
    assert not target.exists("/etc/netplan") and not target.exists("/etc/systemd/network")
    assert agent.run_network() == 0
    assert target.read_text("/etc/from-windows") == "seen"
