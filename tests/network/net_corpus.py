"""The network config corpus in tests/network/corpus: loading cases the same way everywhere."""

from __future__ import annotations

import glob
import json
import os

import yaml

CORPUS_DIR = os.path.join(os.path.dirname(__file__), "corpus")
RENDERERS = ("eni", "netplan", "networkd", "sysconfig", "network-manager")


def cases() -> list:
    """Corpus file names (v1-*.yaml, v2-*.yaml, os-*.json)."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(CORPUS_DIR, "*"))
                  if not p.endswith("macs.json"))


def corpus_macs() -> dict:
    """MAC -> name map given to both implementations for OpenStack cases."""
    with open(os.path.join(CORPUS_DIR, "macs.json")) as f:
        data = json.load(f)
    data.pop("_comment", None)
    return data


def path_of(case: str) -> str:
    return os.path.join(CORPUS_DIR, case)


def load(case: str) -> dict:
    with open(path_of(case)) as f:
        return json.load(f) if case.endswith(".json") else yaml.safe_load(f)


def kind(case: str) -> str:
    """The reference's --kind for a case."""
    return "network_data.json" if case.endswith(".json") else "yaml"


def macs_for(case: str) -> dict:
    # cloud-init uses the -m map only for network_data.json; v2 MACs are looked up on the host
    # (where none of the corpus MACs exist), so we give an empty map for YAML cases.
    return corpus_macs() if case.endswith(".json") else {}


def distro_for(renderer: str) -> str:
    return "rhel" if renderer == "sysconfig" else "debian"
