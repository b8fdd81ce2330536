"""Instance data and ``query`` against cloud-init 26.x: the same NoCloud seed read by both.

cloud-init 26.x's NoCloud datasource reads the seed in a temporary tree and writes its
instance-data files; cloudseed boots a temporary root with the same seed. Both answer
``query --list-keys`` (the keys templates and scripts can use), ``query v1 --list-keys`` and the
standard v1 values that come from the seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cloudseed.agent.boot.stages import BootState, run_local, run_network
from tests.reference import NEW

META = "instance-id: iid-query\nlocal-hostname: query-host\npublic-keys:\n  - ssh-ed25519 AAAAC3Nza q@host\n"
USER = "#cloud-config\nruncmd: [echo hi]\n"

_THEIRS = r"""
import json, os, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceNoCloud
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
sys_cfg = {"datasource": {"NoCloud": {"fs_label": None}}}
ds = DataSourceNoCloud.DataSourceNoCloud(sys_cfg, distros.fetch("debian")("debian", {}, paths), paths)
assert ds.get_data()
"""
# values taken from the seed (the distro, kernel and Python ones describe the machine each runs on)
SEED_VALUES = ("instance_id", "instance-id", "local_hostname", "local-hostname", "cloud_name", "cloud-name",
               "cloud_id", "platform", "region", "availability_zone", "availability-zone", "public_ssh_keys")


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ci26")
    os.makedirs(tmp / "cloud/seed/nocloud")
    (tmp / "cloud/seed/nocloud/meta-data").write_text(META)
    (tmp / "cloud/seed/nocloud/user-data").write_text(USER)
    NEW.python(_THEIRS, str(tmp))

    def query(*args: str) -> subprocess.CompletedProcess:
        return NEW.cli("query", "-i", str(tmp / "run/instance-data-sensitive.json"),
                       "-u", str(tmp / "cloud/seed/nocloud/user-data"), *args)
    return query


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    from cloudseed.core.root import TargetRoot

    top = tmp_path_factory.mktemp("ours")
    root = TargetRoot(str(top))
    root.write("/etc/os-release", 'ID=debian\nVERSION_ID="12"\n')
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg",
               "network: {config: disabled}\ncloud_init_modules: []\ncloud_config_modules: []\n"
               "cloud_final_modules: []\ndatasource_list: [NoCloud]\n")
    root.write("/var/lib/cloud/seed/nocloud/meta-data", META)
    root.write("/var/lib/cloud/seed/nocloud/user-data", USER)
    state = BootState.load(root)
    run_local(state)
    run_network(state)

    def query(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cloudseed", "--root", str(top), "cloud-init", "query", *args],
                              capture_output=True, text=True, timeout=60)
    return query


@pytest.mark.reference
def test_query_lists_the_keys_cloud_init_26_lists(theirs, ours):
    mine, their = ours("--list-keys"), theirs("--list-keys")
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.split() == their.stdout.split()


@pytest.mark.reference
def test_v1_keys_and_the_seed_values_agree(theirs, ours):
    assert ours("v1", "--list-keys").stdout.split() == theirs("v1", "--list-keys").stdout.split()
    mine, their = json.loads(ours("v1").stdout), json.loads(theirs("v1").stdout)
    assert {k: mine[k] for k in SEED_VALUES} == {k: their[k] for k in SEED_VALUES}
    assert mine["_beta_keys"] == their["_beta_keys"] == ["subplatform"]
