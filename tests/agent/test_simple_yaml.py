"""The PyYAML-free reader of small documents gives yaml.safe_load's result or declines.

Documents are generated from fragments chosen to sit on YAML's edges (booleans, numbers, nulls,
indicators, comments, quotes, indentation, continuation lines); whenever the reader accepts one,
its result must equal PyYAML's. Typical meta-data must be accepted, or the fast path is moot.
"""

from __future__ import annotations

import random

import pytest
import yaml

from cloudseed.agent.config import simple_yaml

KEYS = ["instance-id", "local-hostname", "hostname", "a", "_x", "on", "Yes", "null", "a.b", "1st", "key ",
        "'quoted'", "<<", "k-", "NO", "nO"]
VALUES = ["iid-abc", "bench", "my-host.example.com", "yes", "No", "off", "True", "null", "~", "12", "1.5",
          "0x1F", "1e3", ".inf", "2001-12-14", "a b", "a  b", "a: b", "a #c", "a#b", "'x'", "'it''s'", '"q"',
          '"a\\tb"', "''", '""', "-", "- a", "[a, b]", "{a: 1}", "&anchor a", "*alias", "!tag a", "|", ">",
          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFhD+/x= user@host", "=", "a,b", "e1", "y", "n", "a:b", "%x",
          "@x", "`x`", "a   ", "' padded '"]
INDENTS = ["", " ", "  ", "    "]


def fragment(rng: random.Random) -> str:
    kind = rng.random()
    key = rng.choice(KEYS)
    if kind < 0.45:
        return f"{key}: {rng.choice(VALUES)}\n"
    if kind < 0.6:
        indent = rng.choice(INDENTS)
        return f"{key}:\n" + "".join(f"{indent}- {rng.choice(VALUES)}\n" for _ in range(rng.randint(0, 3)))
    if kind < 0.72:
        indent = rng.choice(INDENTS[1:])
        return f"{key}:\n" + "".join(f"{indent}{rng.choice(KEYS)}: {rng.choice(VALUES)}\n"
                                     for _ in range(rng.randint(1, 3)))
    if kind < 0.78:
        return rng.choice(["# comment\n", "\n", "   \n", "---\n", "...\n", "  # indented comment\n"])
    if kind < 0.8:
        return f"{key}: {rng.choice(VALUES)}\n  continued {rng.choice(VALUES)}\n"
    if kind < 0.84:
        indent, deeper = rng.choice(INDENTS), rng.choice(INDENTS)
        gap = rng.choice(["", "", "\n", "# c\n"])
        return f"{key}:\n{indent}- {rng.choice(VALUES)}\n{gap}{indent}{deeper}{rng.choice(VALUES)}\n"
    if kind < 0.9:
        return f"{rng.choice(INDENTS)}{key}: {rng.choice(VALUES)}\n"
    return f"{key}:{rng.choice(['', ' ', 'x', '  '])}\n"


def pyyaml(text: str):
    try:
        return ("ok", yaml.safe_load(text))
    except yaml.YAMLError:
        return ("error", None)


def test_generated_documents_agree_with_pyyaml_whenever_accepted():
    rng = random.Random(20261121)
    accepted = 0
    for _ in range(25000):
        text = "".join(fragment(rng) for _ in range(rng.randint(1, 6)))
        ours = simple_yaml.load(text)
        if ours is None:
            continue
        accepted += 1
        assert pyyaml(text) == ("ok", ours), text
    assert accepted > 500  # the generator does reach the accepted subset


@pytest.mark.parametrize("text", [
    "instance-id: iid-lab-0001\nlocal-hostname: bench\n",
    "instance-id: iid-bench-0001\nlocal-hostname: bench\npublic-keys:\n"
    "- ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF+/= u@h\n",
    "---\n# seed\ninstance-id: 'i-abc'\nhostname: \"web\"\n\npublic-keys:\n  - ssh-rsa AAAAB3Nza== a@b\n",
    "instance-id: i-1\nplacement:\n  availability-zone: nova\n  region: RegionOne\n",
    # what yaml.safe_dump writes for a long key: the plain scalar folded onto a second line
    "instance-id: iid-lab-0001\npublic-keys:\n"
    "- ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyNFbMnqOes4N4WGjufSKivh0UNukinzY6/vZehMbPg\n  root@vm\n",
    "a: b\n  c\n",
])
def test_typical_meta_data_is_read_without_pyyaml(text):
    ours = simple_yaml.load(text)
    assert ours is not None and ours == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "", "# only a comment\n", "---\n", "- a\n- b\n", "instance-id: 42\n", "a: yes\n", "a: b\n\n  c\n",
    "a: b\n# c\n  d\n",
    "network-interfaces: |\n  auto eth0\n", "a: [1, 2]\n", "a: 'x' # c\n", "k: \"a\\nb\"\n", "k: é\n",
    "a:\tb\n", "  a: b\n", "a: b\r\n",
])
def test_anything_else_is_left_to_pyyaml(text):
    assert simple_yaml.load(text) is None


def test_the_local_stage_reads_simple_meta_data_without_importing_pyyaml(tmp_path):
    """A NoCloud seed directory with plain meta-data: the local stage never imports yaml."""
    import subprocess
    import sys

    seed = tmp_path / "var/lib/cloud/seed/nocloud"
    seed.mkdir(parents=True)
    (seed / "meta-data").write_text("instance-id: iid-simple\nlocal-hostname: plain\n")
    (seed / "user-data").write_text("#cloud-config\n{}\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text("ID=debian\nVERSION_ID=12\n")
    code = ("import sys\nfrom cloudseed.cli import main\nrc = main(['--root', sys.argv[1], 'init', '--local'])\n"
            "print('yaml imported' if 'yaml' in sys.modules else 'no yaml')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("no yaml"), proc.stdout + proc.stderr
    assert "iid-simple" in (tmp_path / "var/lib/cloudseed/data/instance-id").read_text()
