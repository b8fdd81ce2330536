"""Differential tests: ``cloudseed userdata show --json`` against Debian's cloud-init 22.4 and 26.x.

Every document in ``corpus/`` is processed by both. The reference's view is read back from the
files its handlers wrote (``reference_userdata.py``); ours comes from the CLI. They must agree
on the merged cloud-config, the scripts (names and contents), the boothooks, the per-frequency
scripts and the part-handlers. ``@SERVER@`` in a document is the URL of a loopback HTTP server
serving ``corpus/served/``. Documents named ``*-deliberate-*`` are where we differ on purpose;
their tests say how and why. Every comparison runs against both oracles (``tests/reference.py``):
where they disagree, cloudseed follows the newer one and ``OLD_ONLY`` names the documents where it
therefore differs from 22.4, and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.agent.userdata.userdata_http import IncludeServer
from tests.reference import OLD, Oracle

HERE = os.path.dirname(__file__)
CORPUS = os.path.join(HERE, "corpus")
INSTANCE_DATA = os.path.join(CORPUS, "instance-data.json")
with open(os.path.join(HERE, "reference_userdata.py")) as _driver:
    DRIVER = _driver.read()
DOCUMENTS = sorted(n for n in os.listdir(CORPUS)
                   if os.path.isfile(os.path.join(CORPUS, n)) and n != "instance-data.json")
COMPARED = [n for n in DOCUMENTS if "-deliberate-" not in n]

pytestmark = pytest.mark.reference


@pytest.fixture(scope="module")
def server():
    served = os.path.join(CORPUS, "served")
    files = {}
    with IncludeServer({}) as srv:
        for name in os.listdir(served):
            with open(os.path.join(served, name), "rb") as f:
                files["/" + name] = f.read().replace(b"@SERVER@", srv.url.encode())
        srv.files.update(files)
        yield srv


def _blob(name: str, server: IncludeServer, tmp_path) -> str:
    with open(os.path.join(CORPUS, name), "rb") as f:
        data = f.read().replace(b"@SERVER@", server.url.encode())
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def ours(path: str, tmp_path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "userdata", "show", "--json", path,
                           "--instance-data", INSTANCE_DATA, "--include-cache", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def reference(path: str, oracle: Oracle = OLD) -> dict:
    return json.loads(oracle.python(DRIVER, path, INSTANCE_DATA).stdout)


_BATCHES: dict = {}   # oracle label -> {document: that release's view}


def reference_batch(oracle: Oracle, server: IncludeServer, tmp_path_factory) -> dict:
    """Every compared document through ``oracle`` in one reference process (each in a forked child)."""
    if oracle.label not in _BATCHES:
        directory = tmp_path_factory.mktemp(f"blobs-{oracle.label}")
        paths = [_blob(name, server, directory) for name in COMPARED]
        views = json.loads(oracle.python(DRIVER, "--batch", INSTANCE_DATA, *paths, timeout=600).stdout)
        _BATCHES[oracle.label] = dict(zip(COMPARED, views))
    return _BATCHES[oracle.label]


def comparable(view: dict) -> dict:
    """The parts of a view both sides can be compared on, in a canonical order."""
    def named(items):
        return sorted((i["name"], i["content"]) for i in items)

    return {
        "cloud_config": json.loads(json.dumps(view["cloud_config"], default=str)),
        "scripts": named(view["scripts"]),
        "boothooks": named(view["boothooks"]),
        "scripts_per_freq": {freq: named(items) for freq, items in view["scripts_per_freq"].items()},
        "handlers": sorted(h["name"].removesuffix(".py") for h in view["handlers"]),
    }


# document -> why cloudseed (following the newer release) differs from 22.4 there
OLD_ONLY: dict[str, str] = {}


@pytest.mark.parametrize("oracle", ["22.4", "new"], indirect=True)
@pytest.mark.parametrize("name", COMPARED)
def test_agrees_with_reference(name, oracle, server, tmp_path, tmp_path_factory):
    if oracle is OLD and name in OLD_ONLY:
        pytest.skip(f"follows the newer release here: {OLD_ONLY[name]}")
    path = _blob(name, server, tmp_path)
    theirs = reference_batch(oracle, server, tmp_path_factory)[name]
    assert "error" not in theirs, theirs
    assert comparable(ours(path, tmp_path)) == comparable(theirs)


def test_deliberate_non_ascii_in_8bit_mime_part_is_kept(server, tmp_path):
    # The reference parses MIME from a str, and the email package then re-encodes a non-ASCII
    # 8bit payload with raw-unicode-escape: "ü" becomes an invalid byte, YAML refuses the part
    # and the cloud-config is lost. We parse MIME from bytes, so the text arrives intact.
    path = _blob("36-deliberate-non-ascii-mime.mime", server, tmp_path)
    mine = ours(path, tmp_path)
    assert mine["cloud_config"] == {"final_message": "Grüße, café"}
    assert mine["errors"] == []
    assert reference(path)["cloud_config"] != mine["cloud_config"]


def test_corpus_covers_every_format():
    kinds = " ".join(DOCUMENTS)
    for word in ("cloud-config", "shell-script", "boothook", "mime-nested", "gzip", "include",
                 "include-once", "part-handler", "archive", "jinja", "per-freq", "jsonp", "merge"):
        assert word in kinds, word
    assert len(COMPARED) >= 25


MERGE_CASES = [
    (spec, old, new)
    for spec in ("dict(replace)+list()+str()", "list()+dict()+str()", "list(append)+dict(recurse_array)+str()",
                 "dict(no_replace,recurse_list)+list(prepend)", "dict(recurse_str)+str(append)",
                 "dict(allow_delete,replace)", "dict(recurse_array,no_replace)+list(no_replace)",
                 "list(recurse_dict,replace)+dict(no_replace)", "dict(replace)", "list(append)")
    for old, new in (
        ({"a": [1, 2], "b": {"c": "x", "d": [1]}, "e": "s"}, {"a": [3], "b": {"c": "y", "d": [2]}, "e": "t"}),
        ({"a": [{"k": 1}, {"k": 2}]}, {"a": [{"j": 1}], "z": None}),
        ({"a": "str", "n": 1}, {"a": ["list"], "n": 2, "b": None}),
        ({"a": {"b": {"c": [1]}}}, {"a": {"b": {"c": [2], "d": 1}}}),
    )
]


@pytest.mark.parametrize("oracle", ["22.4", "new"], indirect=True)
def test_mergers_agree_with_reference(oracle):
    from cloudseed.agent.userdata.merging import Merger

    code = ("import importlib.util, json, sys\nfrom cloudinit import mergers\n"
            "out = []\n"
            "for spec, old, new in json.load(sys.stdin):\n"
            "    out.append(mergers.construct(mergers.string_extract_mergers(spec)).merge(old, new))\n"
            "print(json.dumps(out))\n")
    theirs = json.loads(oracle.python(code, input=json.dumps(MERGE_CASES)).stdout)
    mine = [Merger.from_string(spec).merge(old, new) for spec, old, new in MERGE_CASES]
    assert mine == theirs


@pytest.mark.parametrize("oracle", ["22.4", "new"], indirect=True)
def test_vendor_under_user_agrees_with_reference_mergemanydict(oracle):
    from cloudseed.agent.userdata import merge_vendor_under_user

    pairs = [({"a": 1, "l": [1], "d": {"x": 1}}, {"a": 2, "l": [2, 3], "d": {"x": 2, "y": 3}, "v": 1}),
             ({"runcmd": ["u"]}, {"runcmd": ["v1", "v2"], "merge_how": "list(append)+dict()+str()"}),
             ({"merge_how": "dict(replace)"}, {"k": "vendor"})]
    code = ("import json, sys\nfrom cloudinit import util\n"
            "print(json.dumps([util.mergemanydict([u, v]) for u, v in json.load(sys.stdin)]))\n")
    theirs = json.loads(oracle.python(code, input=json.dumps(pairs)).stdout)
    mine = [merge_vendor_under_user(v, u) for u, v in pairs]
    assert mine == theirs
