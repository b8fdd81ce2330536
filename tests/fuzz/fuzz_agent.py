"""Coverage-guided fuzzing (atheris) of the agent's parsers of untrusted bytes.

    .venv/bin/python tests/fuzz/fuzz_agent.py TARGET -runs=5000 DIR          # short run (test_fuzz_agent.py)
    .venv/bin/python tests/fuzz/fuzz_agent.py TARGET -max_total_time=600 DIR  # long run (figure in docs)

TARGET is one of:

* ``userdata``: a user-data blob (MIME, gzip, #include disabled, archives, YAML, Jinja) through
  ``process_userdata``: it never raises, every problem is a string, stored names are safe file names;
* ``seedfs``: an ISO 9660 or FAT image through ``seedfs.extract``: it raises nothing but
  ``SeedFSError``, and on error leaves nothing in the destination;
* ``network``: a network config (YAML or JSON; v1, v2 or network_data.json) parsed and rendered by
  all five renderers: nothing but ``NetworkConfigError``, and rendered files have absolute paths;
* ``dhcp``: a packet as the DHCP client's reply reader and lease builder see it: no exception.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile

import atheris

# run as a script under atheris, not by pytest: this checkout first, even from a Python without it installed
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

with atheris.instrument_imports():
    import yaml

    from cloudseed.agent import ephemeral, seedfs
    from cloudseed.agent.userdata import process_userdata
    from cloudseed.network import NetworkConfigError, parse, render

RENDERERS = ("eni", "netplan", "networkd", "sysconfig", "network-manager")
_SAFE = set("_-.()0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SCRATCH = tempfile.mkdtemp(prefix="cloudseed-fuzz-")


def userdata(data: bytes) -> None:
    processed = process_userdata(data, allow_includes=False)
    assert all(isinstance(e, str) for e in processed.errors)
    for part in processed.scripts + processed.boothooks:
        assert part.name and set(part.name) <= _SAFE and part.name not in (".", ".."), part.name


def seed_image(data: bytes) -> None:
    image = os.path.join(_SCRATCH, "image")
    with open(image, "wb") as handle:
        handle.write(data)
    dest = os.path.join(_SCRATCH, "out")
    shutil.rmtree(dest, ignore_errors=True)
    os.mkdir(dest)
    try:
        seedfs.extract(image, dest, max_total_bytes=1024 * 1024, max_files=64)
    except seedfs.SeedFSError:
        assert os.listdir(dest) == [], "a refused image left files behind"


def network(data: bytes) -> None:
    try:
        config = yaml.load(data.decode("utf-8", "replace"), Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return
    if not isinstance(config, dict):
        return
    try:
        model = parse(config, macs={})
    except NetworkConfigError:
        return
    for renderer in RENDERERS:
        try:
            files = render(model, renderer, "rhel" if renderer == "sysconfig" else "debian")
        except NetworkConfigError:
            continue
        assert all(f.path.startswith("/") and ".." not in f.path.split("/") for f in files)


def dhcp(data: bytes) -> None:
    if len(data) < 4:
        return
    xid = int.from_bytes(data[:4], "big")
    reply = ephemeral._reply(data[4:], xid)
    if reply is None:
        return
    _kind, address, options = reply
    if len(address) == 4:
        ephemeral._lease_from("eth0", address, options)


TARGETS = {"userdata": userdata, "seedfs": seed_image, "network": network, "dhcp": dhcp}


def main() -> None:
    logging.disable(logging.CRITICAL)   # what the parsers log about bad input is expected here
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
