"""Short fuzz runs of the agent's parsers of untrusted bytes, as tests (a few thousand inputs each).

Each target starts from real inputs (user-data corpus, ISO 9660 and FAT images made with the
system's tools, network configs, a DHCP reply) and atheris mutates them, coverage-guided. The
long runs (``fuzz_agent.py TARGET -max_total_time=...``) and their figures are in docs/userdata.md.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import struct
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
RUNS = {"userdata": 4000, "seedfs": 1500, "network": 3000, "dhcp": 20000}


def _seed_userdata(corpus):
    for path in sorted(glob.glob(os.path.join(TESTS, "agent", "userdata", "corpus", "[0-9]*"))):
        shutil.copy(path, corpus)


def _seed_network(corpus):
    for path in sorted(glob.glob(os.path.join(TESTS, "network", "corpus", "*-0[1-6]-*")))[:18]:
        shutil.copy(path, corpus)


def _seed_seedfs(corpus, tmp_path):
    tree = tmp_path / "tree"
    (tree / "openstack" / "latest").mkdir(parents=True)
    (tree / "meta-data").write_text("instance-id: i-1\n")
    (tree / "user-data").write_text("#cloud-config\nhostname: h\n")
    (tree / "openstack" / "latest" / "meta_data.json").write_text('{"uuid": "i-1"}')
    made = 0
    if shutil.which("genisoimage"):
        subprocess.run(["genisoimage", "-quiet", "-V", "cidata", "-J", "-r", "-o", str(corpus / "seed.iso"),
                        str(tree)], check=True)
        made += 1
    if shutil.which("mkfs.vfat") and shutil.which("mcopy"):
        image = corpus / "seed.vfat"
        subprocess.run(["truncate", "-s", "200K", str(image)], check=True)
        subprocess.run(["mkfs.vfat", "-n", "CIDATA", str(image)], check=True, capture_output=True)
        subprocess.run(["mcopy", "-s", "-i", str(image), str(tree / "meta-data"), str(tree / "user-data"),
                        str(tree / "openstack"), "::"], check=True)
        made += 1
    if not made:
        pytest.skip("needs genisoimage or dosfstools+mtools to make seed images")


def _seed_dhcp(corpus):
    xid = 0x1234ABCD
    options = bytes([53, 1, 5, 1, 4, 255, 255, 255, 0, 3, 4, 10, 0, 0, 1, 6, 4, 10, 0, 0, 1, 51, 4, 0, 0, 14, 16,
                     121, 8, 24, 192, 168, 7, 10, 0, 0, 1, 255])
    dhcp = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 2, 1, 6, 0, xid, 0, 0, bytes(4), socket.inet_aton("10.0.0.5"),
                       bytes(4), bytes(4), bytes(16), b"", b"") + b"\x63\x82\x53\x63" + options
    udp = struct.pack("!HHHH", 67, 68, 8 + len(dhcp), 0) + dhcp
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, socket.inet_aton("10.0.0.1"),
                     socket.inet_aton("10.0.0.5"))
    (corpus / "offer").write_bytes(struct.pack("!I", xid) + ip + udp)


@pytest.mark.parametrize("target", sorted(RUNS))
def test_agent_parser_survives_fuzzed_inputs(target, tmp_path):
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    if target == "seedfs":
        _seed_seedfs(corpus, tmp_path)
    else:
        {"userdata": _seed_userdata, "network": _seed_network, "dhcp": _seed_dhcp}[target](corpus)
    run = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_agent.py"), target, f"-runs={RUNS[target]}",
                          "-seed=1", "-max_total_time=150", "-rss_limit_mb=1024", "-print_final_stats=1",
                          f"-artifact_prefix={tmp_path}/",
                          str(corpus)], capture_output=True, text=True, timeout=400)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    executed = re.search(r"stat::number_of_executed_units:\s+(\d+)", output)
    assert executed and int(executed.group(1)) >= RUNS[target], output[-2000:]
