"""The snapshot's network (``cloudseed/lab/guest/labnet.py``) without a VM: what counts as changed.

A try keeps the interfaces the snapshot raised only when the agent's new configuration defines
them as the snapshot's did. The configurations here are what cloudseed's own ENI renderer writes
(the fallback, and network configs that change the NIC), read beside the image's
``/etc/network/interfaces``; what ifupdown itself lists as ``auto`` and ``allow-hotplug`` is the
yardstick for the parser's classes. The e2e test (``tests/e2e/test_lab_tries.py``) runs both
paths in a VM.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time

import pytest

from cloudseed.lab.images.agent_install import NETWORK_CHECK
from cloudseed.network import parse as parse_network
from cloudseed.network import render
from tests.lab.guest_helper import labnet

IMAGE_INTERFACES = "source {dir}/interfaces.d/*\nauto lo\niface lo inet loopback\n"
MAC = "52:54:00:12:34:56"


def _tree(tmp_path, network: dict | None) -> str:
    """An /etc/network as the image has it, with what cloudseed renders for ``network`` in interfaces.d."""
    (tmp_path / "interfaces.d").mkdir()
    (tmp_path / "interfaces").write_text(IMAGE_INTERFACES.format(dir=tmp_path))
    if network is not None:
        model = parse_network(network, macs={MAC: "ens3"})
        for rendered in render(model, "eni"):
            if rendered.path.startswith("/etc/network/interfaces.d/"):
                (tmp_path / "interfaces.d" / rendered.path.rsplit("/", 1)[1]).write_text(rendered.content)
    return str(tmp_path / "interfaces")


def _snapshot(tmp_path) -> labnet.Config:
    """What the snapshot raised: the image's configuration and DHCP on its NIC, read back from the
    private file it wrote, as a try reads it."""
    config = labnet.snapshot_config("ens3", _tree(tmp_path / "image", None))
    private = tmp_path / "private"
    private.write_text(config.text())
    return labnet.parse(str(private))


FALLBACK = {"version": 2, "ethernets": {"ens3": {"match": {"macaddress": MAC}, "set-name": "ens3", "dhcp4": True}}}


@pytest.mark.parametrize("network", [FALLBACK, {"version": 2, "ethernets": {"ens3": {"dhcp4": True}}},
                                     {"version": 1, "config": [{"type": "physical", "name": "ens3",
                                                                "mac_address": MAC,
                                                                "subnets": [{"type": "dhcp"}]}]}],
                         ids=["fallback", "v2-dhcp-by-name", "v1-dhcp"])
def test_the_agents_fallback_and_the_same_dhcp_keep_the_snapshots_network(tmp_path, network):
    (tmp_path / "image").mkdir()
    (tmp_path / "try").mkdir()
    now = labnet.parse(_tree(tmp_path / "try", network))
    assert labnet.changed(_snapshot(tmp_path), now, ["lo", "ens3"]) == (["lo", "ens3"], [])


@pytest.mark.parametrize("network, changed", [
    ({"version": 2, "ethernets": {"ens3": {"dhcp4": True, "dhcp4-overrides": {"route-metric": 100}}}}, ["ens3"]),
    ({"version": 2, "ethernets": {"ens3": {"addresses": ["10.0.2.15/24"], "routes": [
        {"to": "default", "via": "10.0.2.2"}]}}}, ["ens3"]),
    ({"version": 2, "ethernets": {"ens3": {"dhcp4": True, "optional": True}}}, ["ens3"]),  # allow-hotplug, not auto
    ({"version": 2, "ethernets": {"ens3": {"dhcp4": True, "nameservers": {"addresses": ["10.0.2.3"]}}}}, ["ens3"]),
    ({"version": 1, "config": [{"type": "physical", "name": "ens3", "subnets": [{"type": "dhcp"}]},
                               {"type": "nameserver", "address": ["1.1.1.1"]}]}, ["lo"]),  # global DNS: on lo
], ids=["route-metric", "static", "optional", "nic-dns", "global-dns"])
def test_a_configuration_that_defines_an_interface_otherwise_takes_it_down(tmp_path, network, changed):
    (tmp_path / "image").mkdir()
    (tmp_path / "try").mkdir()
    now = labnet.parse(_tree(tmp_path / "try", network))
    snapshot = _snapshot(tmp_path)
    kept, down = labnet.changed(snapshot, now, ["lo", "ens3"])
    assert set(down) == set(changed) and set(kept) == {"lo", "ens3"} - set(changed)
    assert labnet.verdict_for(snapshot, now, ["lo", "ens3"])["restarted"] == sorted(changed)


def test_an_interface_no_longer_configured_or_behind_a_mapping_is_taken_down(tmp_path):
    (tmp_path / "image").mkdir()
    snapshot = _snapshot(tmp_path)
    (tmp_path / "none").mkdir()  # network: {config: disabled}: the agent writes nothing for ens3
    now = labnet.parse(_tree(tmp_path / "none", None))
    assert labnet.changed(snapshot, now, ["lo", "ens3"]) == (["lo"], ["ens3"])
    # reported apart from a changed one: ifup -a leaves it down, as a real boot would have it
    assert labnet.verdict_for(snapshot, now, ["lo", "ens3"]) == {"kept": ["lo"], "restarted": [], "removed": ["ens3"]}
    mapped = tmp_path / "mapped"
    mapped.write_text(snapshot.text() + "mapping ens3\n    script /usr/local/bin/pick\n")
    assert labnet.changed(snapshot, labnet.parse(str(mapped)), ["ens3"]) == ([], ["ens3"])


def test_the_parser_reads_continuations_comments_and_sourced_directories(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "10-eth").write_text("# a comment\nauto ens3\niface ens3 inet dhcp\n    pre-up echo a \\\n   b\n")
    (parts / "skipped.cfg").write_text("auto ens9\niface ens9 inet dhcp\n")  # not a run-parts name
    (tmp_path / "interfaces").write_text(f"source-directory {parts}\nallow-hotplug ens4\niface ens4 inet manual\n")
    config = labnet.parse(str(tmp_path / "interfaces"))
    assert config.stanzas == {"ens3": [("inet", "dhcp", ("pre-up echo a b",))], "ens4": [("inet", "manual", ())]}
    assert config.definition("ens3") == (("auto",), (("inet", "dhcp", ("pre-up echo a b",)),))
    assert config.definition("ens4")[0] == ("hotplug",)
    again = tmp_path / "again"
    again.write_text(config.text())
    assert labnet.parse(str(again)).stanzas == config.stanzas  # the private file reads back the same


def test_the_classes_are_those_ifupdown_lists(tmp_path):
    (tmp_path / "interfaces.d").mkdir()
    (tmp_path / "interfaces").write_text(IMAGE_INTERFACES.format(dir=tmp_path))
    (tmp_path / "interfaces.d" / "50-x").write_text(
        "auto ens3 ens5\niface ens3 inet dhcp\niface ens5 inet manual\nallow-auto ens6\niface ens6 inet manual\n"
        "allow-hotplug ens4\niface ens4 inet static\n  address 10.0.0.2/24\n")
    config = labnet.parse(str(tmp_path / "interfaces"))
    for klass in ("auto", "hotplug"):
        listed = subprocess.run(["ifquery", "-i", str(tmp_path / "interfaces"), "--list", f"--allow={klass}"],
                                capture_output=True, text=True, check=True).stdout.split()
        assert sorted(config.classes[klass]) == sorted(listed), klass


def test_networkings_first_step_waits_for_the_exec_loops_answer_once(tmp_path, monkeypatch):
    """The drop-in's shell and the exec loop's thread meet on two pipes; the pipes go with the answer."""
    check, done = tmp_path / "check", tmp_path / "done"
    monkeypatch.setattr(labnet, "CHECK", str(check))
    monkeypatch.setattr(labnet, "DONE", str(done))
    for fifo in (check, done):
        os.mkfifo(fifo)
    asked = []
    monkeypatch.setattr(labnet, "reconcile", lambda console: asked.append(time.sleep(0.5)))  # its own tests above
    thread = threading.Thread(target=labnet.answer_check, args=(print,), daemon=True)
    thread.start()
    command = shlex.split(NETWORK_CHECK.replace("/run/cloudseed-lab/net", str(tmp_path)))
    started = time.monotonic()
    assert subprocess.run(command, timeout=30).returncode == 0
    assert asked and time.monotonic() - started >= 0.5  # it waited for the answer
    thread.join(5)
    assert not thread.is_alive() and not check.exists() and not done.exists()
    started = time.monotonic()  # networking restarted later in the try: nobody to ask, no wait
    assert subprocess.run(command, timeout=30).returncode == 0 and time.monotonic() - started < 5
