"""The datasource cache's format version is checked on read (issue 17.7).

An unknown version, or a record that does not parse, is one clear log line and a fresh
datasource search: never a crash, never a silent misread.
"""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from cloudseed.agent.boot.stages import Agent

CACHE = "/run/cloudseed/datasource.json"
CORE = ("network: {config: disabled}\ncloud_init_modules: [write_files]\n"
        "cloud_config_modules: []\ncloud_final_modules: []\n")


@pytest.fixture
def seeded(target):
    root = target
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", CORE)
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-cache\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data",
               "#cloud-config\nwrite_files: [{path: /etc/from-seed, content: seed}]\n")
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    assert Agent(root).run_local() == 0
    assert json.loads(root.read_text(CACHE))["format"] == 1
    return root


def tamper(root, **changes):
    data = json.loads(root.read_text(CACHE))
    data.update(changes)
    # a record a future release might write: same name, different meaning of its fields
    root.write(CACHE, json.dumps(data), mode=0o600)


def test_the_cache_this_version_writes_is_read_back(seeded, caplog):
    caplog.set_level(logging.INFO, logger="cloudseed")
    assert Agent(seeded).run_network() == 0
    assert "not used" not in caplog.text
    assert seeded.read_text("/etc/from-seed") == "seed"


@pytest.mark.parametrize("changes, named", [
    ({"format": 2, "metadata": ["a", "list", "in", "a", "new", "layout"]}, "format version is 2"),
    ({"format": None}, "format version is None"),
    ({"format": 1, "userdata_raw": "not base64 at all!"}, "does not parse"),
    ({"format": 1, "name": "NoSuchCloud"}, "'NoSuchCloud'"),
])
def test_an_unreadable_cache_is_logged_and_the_datasource_searched_again(seeded, caplog, changes, named):
    tamper(seeded, **changes)
    caplog.set_level(logging.INFO, logger="cloudseed")
    assert Agent(seeded).run_network() == 0
    lines = [r.getMessage() for r in caplog.records if "datasource cache" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert CACHE in lines[0] and named in lines[0] and "searching for the datasource again" in lines[0]
    # the fresh search found the seed again: the boot goes on with the right instance
    assert seeded.read_text("/etc/from-seed") == "seed"
    rewritten = json.loads(seeded.read_text(CACHE))  # by the fresh search, in the current format
    assert (rewritten["format"], rewritten["name"]) == (1, "NoCloud")
    assert rewritten["metadata"] == {"instance-id": "iid-cache"}
    data = json.loads(seeded.read_text("/run/cloudseed/instance-data.json"))
    assert data["v1"]["instance_id"] == "iid-cache"


def test_a_cache_that_is_not_json_is_never_a_crash(seeded):
    seeded.write(CACHE, b"\x00\xffnot json", mode=0o600)
    seeded.write("/var/lib/cloudseed/instance/datasource.json", "[1, 2]", mode=0o600)
    assert Agent(seeded).run_modules("config") == 0  # no cache usable: the modules run without one
    assert Agent(seeded).run_network() == 0
    assert seeded.read_text("/etc/from-seed") == "seed"
