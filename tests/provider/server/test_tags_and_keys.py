"""EC2 tags keep their values and OpenStack keys carry Nova's key type (issue 12 item 10).

``cloudseed instances add --tag env=test`` stores the tag ``env`` with the value ``test``;
``/latest/meta-data/tags/instance/`` lists the keys and ``tags/instance/env`` answers the value.
``meta_data.json`` ``keys[].type`` is ``ssh`` (what Nova publishes), not the key's algorithm.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.provider.server.server_support import ROOT, new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 tags@example"


def test_tags_keep_their_values_from_the_command_line_to_the_api(server, tmp_path):
    address = new_address()
    key = tmp_path / "key.pub"
    key.write_text(KEY + "\n")
    subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db_url, "add", "--id",
                    "i-tagged", "--hostname", "tagged", "--address", address, "--tag", "env=test", "--tag", "web",
                    "--tag", "note=a=b", "--ssh-key", str(key)], cwd=ROOT, check=True, capture_output=True,
                   timeout=60)
    assert server.get("/latest/meta-data/tags/instance/", address).text.splitlines() == ["env", "note", "web"]
    assert server.get("/latest/meta-data/tags/instance/env", address).text == "test"
    assert server.get("/latest/meta-data/tags/instance/note", address).text == "a=b"
    assert server.get("/latest/meta-data/tags/instance/web", address).text == ""
    shown = server.admin("GET", "/v1/instances/i-tagged").json()
    assert shown["tags"] == {"env": "test", "note": "a=b", "web": ""}
    found = server.admin("GET", "/v1/instances?tag=env%3Dtest").json()["instances"]
    assert [r["instance_id"] for r in found] == ["i-tagged"]
    assert server.admin("GET", "/v1/instances?tag=env%3Dprod").json()["instances"] == []
    meta = json.loads(server.get("/openstack/latest/meta_data.json", address).body)
    assert meta["keys"] == [{"name": "key0", "type": "ssh", "data": KEY}]


def test_bad_tags_are_refused_naming_the_tag(server):
    for tags in ({"a/b": "x"}, {"ok": 5}, {"": "x"}, "env=test"):
        reply = server.admin("POST", "/v1/instances", {"instance_id": "i-bad-tags", "tags": tags})
        assert reply.status == 400 and reply.json()["field"].startswith("tags"), (tags, reply.text)
