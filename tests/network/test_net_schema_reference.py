"""``cloudseed schema -t network-config``: verdicts on a corpus, ours against cloud-init 26.x.

The corpus is ``schema_corpus/`` (``ok-``/``bad-``: cloudseed's verdict) and every v1/v2 case of
the rendering corpus (``corpus/v*.yaml``: all valid, both implementations render them). cloud-init
22.4 has no network-config schema; 26.x checks v1 and v2 against its JSON schemas (netplan's
own validator turned off: ``reference_network_schema.py``). Where a verdict differs, ``DELIBERATE``
says why: a config 26.x's own renderers accept (the rendering corpus proves it) that only its schema
rejects, or one netplan would refuse that 26.x's v2 schema lets through.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest
from reference import NEW

HERE = os.path.dirname(__file__)
SCHEMA_CORPUS = sorted(glob.glob(os.path.join(HERE, "schema_corpus", "*.yaml")))
RENDER_CORPUS = sorted(glob.glob(os.path.join(HERE, "corpus", "v[12]-*.yaml")))
CORPUS = SCHEMA_CORPUS + RENDER_CORPUS
with open(os.path.join(HERE, "reference_network_schema.py")) as _driver:
    DRIVER = _driver.read()

_PREFIX_ROUTE = "a v1 route with `prefix` (cloud-init's v1 parser reads it, its schema knows only netmask)"
_MII_INTEGER = "netplan's mii-monitor-interval as an integer (netplan and cloud-init's renderers take it)"
DELIBERATE = {
    "v1-11-routes-subnet.yaml": _PREFIX_ROUTE,
    "v1-12-ipv6-routes.yaml": _PREFIX_ROUTE,
    "v1-27-route-ipv6-default.yaml": _PREFIX_ROUTE,
    "v1-14-bond-lacp-mac.yaml": "bond-lacp-rate and bond-xmit-hash-policy bond params: cloud-init's renderers "
                                "write them, its v1 schema forgot them",
    "v1-22-dns-everywhere.yaml": "a nameserver entry's `search` as one string: cloud-init's v1 parser takes it",
    "v2-09-bond.yaml": _MII_INTEGER,
    "v2-10-bond-active-backup.yaml": _MII_INTEGER,
    "v2-22-bond-mac-mtu.yaml": _MII_INTEGER,
    # stricter: netplan itself refuses these; 26.x's v2 schema lets every key and value of an
    # ethernet through (netplan's validator, when installed, would catch them)
    "bad-v2-unknown-key.yaml": "stricter: an unknown key in an ethernet (netplan refuses it)",
    "bad-v2-accept-ra-word.yaml": "stricter: accept-ra must be a boolean (netplan refuses 'perhaps')",
}


def ours(path: str) -> tuple[bool, list[str]]:
    from cloudseed.commands.schema import check_network_text

    with open(path) as f:
        problems, errors = check_network_text(f.read(), path)
    return errors == 0, [str(p) for p in problems if p.level == "error"]


def expected_valid(path: str) -> bool:
    return not os.path.basename(path).startswith("bad-")


def test_corpus_is_mixed():
    names = [os.path.basename(p) for p in SCHEMA_CORPUS]
    assert sum(n.startswith("bad-") for n in names) >= 12 and sum(n.startswith("ok-") for n in names) >= 8
    assert len(CORPUS) >= 75


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_our_verdict(path):
    valid, errors = ours(path)
    assert valid == expected_valid(path), errors


@pytest.mark.reference
def test_verdicts_agree_with_the_newer_release():
    theirs = json.loads(NEW.python(DRIVER, *CORPUS).stdout)
    disagree, compared = {}, 0
    for path in CORPUS:
        if theirs[path] is None:
            continue
        compared += 1
        valid, errors = ours(path)
        if valid != theirs[path][0]:
            disagree[os.path.basename(path)] = (valid, errors, theirs[path][1])
    assert set(disagree) == set(DELIBERATE), json.dumps(
        {k: v for k, v in disagree.items() if k not in DELIBERATE} or sorted(set(DELIBERATE) - set(disagree)),
        indent=1)
    print(f"network-config verdicts vs {NEW.version()}: {compared - len(disagree)}/{compared} agree")
    assert compared == len(CORPUS)


@pytest.mark.reference
def test_where_both_reject_the_first_error_is_at_the_same_key():
    theirs = json.loads(NEW.python(DRIVER, *SCHEMA_CORPUS).stdout)
    for path in SCHEMA_CORPUS:
        if expected_valid(path) or os.path.basename(path) in DELIBERATE:
            continue
        _, errors = ours(path)
        ours_path = re.sub(r"\[(\d+)\]", r".\1", errors[0].split(" ", 1)[0].rstrip(":"))
        their_paths = [p for p, _ in theirs[path][1]]
        their_keys = {f"{p}.{k}" if p else k for p, m in theirs[path][1]
                      for k in re.findall(r"'([^']*)'", m.split("(", 1)[-1]) if "unexpected" in m}
        assert any(ours_path == t or ours_path.startswith(t + ".") or t.startswith(ours_path + ".")
                   for t in their_paths + sorted(their_keys)), (os.path.basename(path), errors, theirs[path][1])


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudseed", *args], capture_output=True, text=True,
                          input=stdin, timeout=60)


def test_cli_names_file_line_and_key_and_annotates(tmp_path):
    f = tmp_path / "net.yaml"
    f.write_text("version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    dhcp44: true\n")
    result = cli("schema", "-t", "network-config", "-c", str(f))
    assert result.returncode == 1
    assert f"{f}:5: error: ethernets.eth0.dhcp44: unknown key" in result.stdout
    annotated = cli("schema", "--schema-type", "network-config", "-c", str(f), "--annotate").stdout
    assert "    dhcp44: true\t\t# ERROR: ethernets.eth0.dhcp44: unknown key" in annotated
    assert annotated.startswith("version: 2\nethernets:\n")


def test_cli_valid_and_empty_network_config(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("network:\n  version: 1\n  config:\n    - type: physical\n      name: eth0\n")
    assert cli("schema", "-t", "network-config", "-c", str(ok)).stdout.strip() == "valid network-config"
    empty = tmp_path / "empty.yaml"
    empty.write_text("network: {}\n")
    result = cli("schema", "-t", "network-config", "-c", str(empty))
    assert result.returncode == 0 and "empty network-config: nothing to check" in result.stdout
