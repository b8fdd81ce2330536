"""``cloudseed schema -t network-config``: verdicts on a corpus, ours against cloud-init 26.x and netplan.

The corpus is ``schema_corpus/`` (``ok-``/``bad-``: cloudseed's verdict; real-world shapes: MAAS
bonds and VLANs, Proxmox, OpenStack-converted v1, DigitalOcean, Vultr, EC2, Azure, GCE, Hetzner,
bare-metal bonds, workstation bridges, and the mistakes people make in them) and every v1/v2 case
of the rendering corpus (``corpus/v*.yaml``: all rendered by both implementations). cloud-init
22.4 has no network-config schema; 26.x checks v1 and v2 against its JSON schemas
(``reference_network_schema.py``: what ``cloud-init schema`` does where netplan is not installed,
and what its boot checks). Where netplan is installed, 26.x validates v2 with netplan's parser
instead: Debian 12's netplan (``/lib/netplan/generate``) stands for that here.

cloudseed follows 26.x's schema verdict, reporting the forms it refuses that the agent would apply
anyway with the spelling that both accept (``cloudseed.network.cloud_init_schema``). Where the
verdicts differ, ``DELIBERATE`` says why, and a test proves each reason with the referee it names:
netplan refuses what we refuse beyond 26.x's v2 schema; 26.x's own rendering of a v1 document we
refuse fails or is wrong; 26.x's renderers apply a form its schema refuses when no other spelling
works for all of them.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
import yaml

from tests.reference import NEW

HERE = os.path.dirname(__file__)
SCHEMA_CORPUS = sorted(glob.glob(os.path.join(HERE, "schema_corpus", "*.yaml")))
RENDER_CORPUS = sorted(glob.glob(os.path.join(HERE, "corpus", "v[12]-*.yaml")))
CORPUS = SCHEMA_CORPUS + RENDER_CORPUS
with open(os.path.join(HERE, "reference_network_schema.py")) as _driver:
    DRIVER = _driver.read()
with open(os.path.join(HERE, "reference_net_convert.py")) as _driver:
    NET_CONVERT = _driver.read()
NETPLAN_GENERATE = "/lib/netplan/generate"

# rendering-corpus documents the agent renders but whose form 26.x's schema refuses: our schema
# refuses them too, naming the spelling both accept
RENDERED_BUT_REFUSED = {
    "v1-11-routes-subnet.yaml", "v1-12-ipv6-routes.yaml", "v1-27-route-ipv6-default.yaml",  # route prefix
    "v1-22-dns-everywhere.yaml",                                  # a nameserver's search as one string
    "v2-09-bond.yaml", "v2-10-bond-active-backup.yaml", "v2-22-bond-mac-mtu.yaml",  # integer mii-monitor-interval
}

# v2 documents 26.x's JSON schema lets through and netplan refuses (so does 26.x itself where
# netplan is installed; upstream calls that schema too permissive: canonical/cloud-init#5854)
STRICTER_V2 = {
    "bad-v2-unknown-key.yaml": "a typo'd key (dhcp44)",
    "bad-v2-accept-ra-word.yaml": "accept-ra: perhaps",
    "bad-v2-address-no-prefix.yaml": "an address without its prefix length",
    "bad-v2-bond-member-missing.yaml": "a bond member the document never defines",
    "bad-v2-gateway-key-from-v1.yaml": "v1's gateway key in a v2 device",
    "bad-v2-gateway-typo.yaml": "gateway4: 192.168.1.256",
    "bad-v2-nameserver-singular.yaml": "nameserver: for nameservers:",
    "bad-v2-set-name-no-match.yaml": "set-name without match",
    "bad-v2-vlan-id-range.yaml": "VLAN id 5000",
    "bad-v2-vlan-link-missing.yaml": "a VLAN on a link the document never defines",
}
# v1 documents 26.x's schema lets through whose rendering by 26.x fails or is wrong (proved below)
STRICTER_V1 = {
    "bad-v1-bond-missing-member.yaml": "a bond member never defined: 26.x makes it a second bond",
    "bad-v1-bridge-missing-port.yaml": "a bridge port never defined: netplan refuses 26.x's output",
    "bad-v1-gateway-typo.yaml": "gateway 10.0.0.300: netplan refuses 26.x's output",
    "bad-v1-mac-typo.yaml": "a MAC address with 'zz': netplan refuses 26.x's output",
    "bad-v1-netmask-typo.yaml": "netmask 255.255.255.256: 26.x fails to convert it",
    "bad-v1-static-no-address.yaml": "a static subnet without address: 26.x fails to convert it",
}
# forms 26.x's schema refuses although its renderers apply them, with no spelling that it accepts
# and all its renderers read the same (proved below)
NO_SPELLING = {
    "v1-14-bond-lacp-mac.yaml": "bond-lacp-rate, bond-xmit-hash-policy: the spelling 26.x's networkd and "
                                "sysconfig renderers read; its schema wants bond-lacp_rate, which only its "
                                "NetworkManager renderer reads",
    "ok-v1-wakeonlan.yaml": "wakeonlan in v1: 26.x's v1 parser reads it and its renderers apply it, its v1 "
                            "schema forgot it",
    "ok-v2-hetzner-onlink.yaml": "a route with on-link (a gateway outside the subnet): netplan takes it, "
                                 "26.x's v2 schema allows only to, via and metric in a route",
    "ok-v2-policy-routing.yaml": "a route in a table of its own beside routing-policy: netplan takes it, "
                                 "26.x's v2 schema allows only to, via and metric in a route",
    "ok-v2-bridge-path-cost.yaml": "path-cost per port (netplan's form); 26.x's schema wants one number, "
                                   "which netplan refuses",
}
DELIBERATE = {**STRICTER_V2, **STRICTER_V1, **NO_SPELLING}


@functools.cache
def their_verdicts() -> dict:
    """cloud-init 26.x's verdict on every corpus document (one reference process for the module)."""
    return json.loads(NEW.python(DRIVER, *CORPUS).stdout)


def ours(path: str) -> tuple[bool, list[str]]:
    from cloudseed.commands.schema import check_network_text

    with open(path) as f:
        problems, errors = check_network_text(f.read(), path)
    return errors == 0, [str(p) for p in problems if p.level == "error"]


def expected_valid(path: str) -> bool:
    name = os.path.basename(path)
    return not name.startswith("bad-") and name not in RENDERED_BUT_REFUSED


def version_of(path: str) -> int | None:
    with open(path) as f:
        cfg = yaml.safe_load(f)
    net = cfg.get("network", cfg) if isinstance(cfg, dict) else None
    return net.get("version") if isinstance(net, dict) and net.get("version") in (1, 2) else None


def test_corpus_is_large_and_mixed():
    names = [os.path.basename(p) for p in SCHEMA_CORPUS]
    assert sum(n.startswith("bad-") for n in names) >= 50 and sum(n.startswith("ok-") for n in names) >= 45
    assert len(CORPUS) >= 160
    versions = [version_of(p) for p in CORPUS]
    assert versions.count(1) >= 70 and versions.count(2) >= 70
    assert set(DELIBERATE) <= {os.path.basename(p) for p in CORPUS}


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_our_verdict(path):
    valid, errors = ours(path)
    assert valid == expected_valid(path), errors


@pytest.mark.reference
def test_verdicts_agree_with_the_newer_release():
    theirs = their_verdicts()
    disagree, compared = {}, {1: 0, 2: 0}
    for path in CORPUS:
        assert theirs[path] is not None, path
        compared[version_of(path) or 1] += 1
        valid, errors = ours(path)
        if valid != theirs[path][0]:
            disagree[os.path.basename(path)] = (valid, errors, theirs[path][1])
    assert set(disagree) == set(DELIBERATE), json.dumps(
        {k: v for k, v in disagree.items() if k not in DELIBERATE} or sorted(set(DELIBERATE) - set(disagree)),
        indent=1)
    for version in (1, 2):
        differ = sum(version_of(p) == version for p in CORPUS if os.path.basename(p) in disagree)
        print(f"network-config v{version} verdicts vs cloud-init {NEW.version()}: "
              f"{compared[version] - differ}/{compared[version]} agree, {differ} named deliberate differences")
    total = len(CORPUS)
    print(f"network-config verdicts vs cloud-init {NEW.version()}: {total - len(disagree)}/{total} agree "
          f"({1 - len(disagree) / total:.1%}); with the {len(disagree)} named deliberate differences 100%")


@pytest.mark.reference
def test_where_both_reject_they_name_the_same_key():
    """Where both refuse a document, one of our errors is at (or above, or below) a key of one of
    theirs (26.x reports one branch of an ``anyOf`` only, so its first error may not be ours)."""
    theirs = their_verdicts()
    for path in SCHEMA_CORPUS:
        if expected_valid(path) or os.path.basename(path) in DELIBERATE:
            continue
        _, errors = ours(path)
        our_paths = [re.sub(r"\[(\d+)\]", r".\1", e.split(" ", 1)[0].rstrip(":")) for e in errors]
        their_paths = [p for p, _ in theirs[path][1]]
        their_keys = {f"{p}.{k}" if p else k for p, m in theirs[path][1]
                      for k in re.findall(r"'([^']*)'", m.split("(", 1)[-1]) if "unexpected" in m}
        assert any(o == t or o.startswith(t + ".") or t.startswith(o + ".")
                   for o in our_paths for t in their_paths + sorted(their_keys)), (
            os.path.basename(path), errors, theirs[path][1])


def netplan_accepts(cfg: dict) -> tuple[bool, str]:
    """netplan's own parser on a v2 document (``generate --root-dir``: nothing outside a temporary root)."""
    net = cfg.get("network", cfg)
    with tempfile.TemporaryDirectory(prefix="cloudseed-netplan-") as top:
        os.makedirs(f"{top}/etc/netplan")
        fd = os.open(f"{top}/etc/netplan/50-test.yaml", os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump({"network": net}, f)
        proc = subprocess.run([NETPLAN_GENERATE, "--root-dir", top], capture_output=True, text=True, timeout=30)
    return proc.returncode == 0, proc.stderr.strip()


def _need_netplan() -> None:
    if not os.access(NETPLAN_GENERATE, os.X_OK):
        pytest.skip(f"needs netplan's parser ({NETPLAN_GENERATE}: netplan.io, scripts/setup.sh)")


@pytest.mark.reference
def test_every_v2_verdict_is_26_with_or_without_netplan():
    """Where we refuse beyond 26.x's v2 schema, netplan refuses too (so does 26.x where netplan is
    installed); no v2 verdict of ours differs from both 26.x's schema and netplan."""
    _need_netplan()
    theirs = their_verdicts()
    v2 = [p for p in CORPUS if version_of(p) == 2]
    with_netplan = agree_netplan = 0
    for path in v2:
        with open(path) as f:
            netplan_ok, message = netplan_accepts(yaml.safe_load(f))
        valid, errors = ours(path)
        name = os.path.basename(path)
        agree_netplan += valid == netplan_ok
        with_netplan += valid == (netplan_ok and theirs[path][0])
        assert valid in (netplan_ok, theirs[path][0]), (name, errors, message, theirs[path][1])
        if name in STRICTER_V2:
            assert not netplan_ok, (name, "netplan accepts it")
        if name in NO_SPELLING:
            assert netplan_ok, (name, message)
    print(f"network-config v2 verdicts: {agree_netplan}/{len(v2)} agree with netplan alone, "
          f"{with_netplan}/{len(v2)} with 26.x's schema and netplan both")


@pytest.mark.reference
def test_the_reasons_26_renders_what_we_refuse_and_refuses_what_we_render():
    """26.x's own net-convert on the v1 documents of ``STRICTER_V1`` and ``NO_SPELLING`` (one process)."""
    _need_netplan()
    spelled = os.path.join(HERE, "schema_corpus", "ok-v1-bond-schema-spelling.yaml")
    hyphens = os.path.join(HERE, "corpus", "v1-14-bond-lacp-mac.yaml")
    wol = os.path.join(HERE, "schema_corpus", "ok-v1-wakeonlan.yaml")
    jobs = [(os.path.join(HERE, "schema_corpus", name), "netplan") for name in STRICTER_V1]
    jobs += [(doc, r) for doc in (spelled, hyphens) for r in ("networkd", "sysconfig", "network-manager")]
    jobs += [(wol, "network-manager")]
    with tempfile.TemporaryDirectory(prefix="cloudseed-26-net-") as top:
        batch = [[["--network-data", doc, "--kind", "yaml", "--output-kind", renderer,
                   "-D", "rhel" if renderer == "sysconfig" else "ubuntu"], f"{top}/{i}"]
                 for i, (doc, renderer) in enumerate(jobs)]
        errors = json.loads(NEW.python(NET_CONVERT, input=json.dumps(batch), timeout=600).stdout)
        out = {}
        for (doc, renderer), (_, directory), error in zip(jobs, batch, errors):
            text = "".join(_read(f) for f in sorted(glob.glob(f"{directory}/**", recursive=True))
                           if os.path.isfile(f))
            refused = None
            if error is None and renderer == "netplan":
                proc = subprocess.run([NETPLAN_GENERATE, "--root-dir", directory], capture_output=True, text=True)
                refused = proc.stderr if proc.returncode else None
            out[(os.path.basename(doc), renderer)] = (error, text, refused)
    for name in STRICTER_V1:
        error, text, refused = out[(name, "netplan")]
        if name == "bad-v1-bond-missing-member.yaml":
            assert error is None and yaml.safe_load(text)["network"]["bonds"].keys() == {"bond0", "ens4"}
        elif "fails to convert" in STRICTER_V1[name]:
            assert error is not None, name
        else:
            assert error is None and refused, (name, text)
    # the spelling 26.x's schema takes is lost by two of its renderers, the other by the third
    for renderer, words in (("networkd", ("LACPTransmitRate=fast", "TransmitHashPolicy=layer3+4")),
                            ("sysconfig", ("lacp_rate=fast", "xmit_hash_policy=layer3+4")),
                            ("network-manager", ("lacp_rate=fast", "xmit_hash_policy=layer3+4"))):
        schema_spelling = all(w in out[("ok-v1-bond-schema-spelling.yaml", renderer)][1] for w in words)
        hyphen_spelling = all(w in out[("v1-14-bond-lacp-mac.yaml", renderer)][1] for w in words)
        assert (schema_spelling, hyphen_spelling) == ((True, False) if renderer == "network-manager"
                                                      else (False, True)), renderer
    assert "wake-on-lan=64" in out[("ok-v1-wakeonlan.yaml", "network-manager")][1]


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


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


@pytest.mark.parametrize("name", sorted(NO_SPELLING))
def test_a_form_kept_although_26_refuses_it_is_a_warning(name):
    """The user learns that an image's cloud-init 26.x will boot degraded on it, and why it is kept."""
    from cloudseed.commands.schema import check_network_text

    path = next(p for p in CORPUS if os.path.basename(p) == name)
    with open(path) as f:
        problems, errors = check_network_text(f.read(), path)
    warnings = [p for p in problems if p.level == "warning"]
    assert errors == 0 and warnings and all(
        p.message.startswith("cloud-init 26.x's schema refuses this and its boot warns about it; kept: ")
        and p.line for p in warnings), [str(p) for p in problems]


def test_a_form_26_refuses_is_an_error_that_says_what_to_write_though_the_agent_applies_it(tmp_path):
    from cloudseed.network import parse

    f = tmp_path / "net.yaml"
    text = ("version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - type: static\n"
            "        address: 10.0.0.10/24\n        routes:\n          - network: 192.168.50.0\n"
            "            prefix: 24\n            gateway: 10.0.0.254\n"
            "  - type: bridge\n    name: br0\n    bridge_interfaces: []\n    params: {bridge_stp: off}\n")
    f.write_text(text)
    result = cli("schema", "-t", "network-config", "-c", str(f))
    assert result.returncode == 1
    assert (f"{f}:10: error: config[0].subnets[0].routes[0].prefix: cloud-init 26.x's schema has no prefix here "
            "(its boot warns otherwise): write network: 192.168.50.0/24, or give netmask") in result.stdout
    assert (f"{f}:15: error: config[1].params.bridge_stp: cloud-init 26.x's schema wants 'on' or 'off' here, "
            "quoted (unquoted, YAML reads a boolean): write \"off\"") in result.stdout
    model = parse(yaml.safe_load(text), macs={})     # the agent takes both as written
    assert model.interfaces["eth0"].subnets[0].routes[0].destination == "192.168.50.0/24"
    assert model.interfaces["br0"].bridge_params == {"stp": False}
