"""The snapshot's network (``cloudseed/lab/guest/labnet.py``) without a VM: what counts as changed.

A try keeps the interfaces the snapshot raised only when the agent's new configuration defines
them as the snapshot's did. The configurations here are what cloudseed's own ENI renderer writes
(the fallback, and network configs that change the NIC), read beside the image's
``/etc/network/interfaces``; what ifupdown itself lists as ``auto`` and ``allow-hotplug`` is the
yardstick for the parser's classes. The e2e test (``tests/e2e/test_lab_tries.py``) runs both
paths in a VM.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time

import pytest

from cloudseed.lab.images.agent_install import NET_DIR, NETWORKING_START
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
    snapshot = _snapshot(tmp_path)
    assert labnet.changed(snapshot, now, ["lo", "ens3"]) == (["lo", "ens3"], [])
    # nothing left for networking's `ifup -a` to raise: it is left out (the drop-in's "kept")
    assert labnet.verdict_for(snapshot, now, ["lo", "ens3"])["ifup"] is False


def test_ifup_still_runs_when_the_configuration_adds_an_interface_the_snapshot_did_not_raise(tmp_path):
    (tmp_path / "image").mkdir()
    (tmp_path / "try").mkdir()
    network = {"version": 2, "ethernets": {"ens3": {"dhcp4": True}, "ens4": {"dhcp4": True}}}
    now = labnet.parse(_tree(tmp_path / "try", network))
    verdict = labnet.verdict_for(_snapshot(tmp_path), now, ["lo", "ens3"])
    assert verdict == {"kept": ["ens3", "lo"], "restarted": [], "removed": [], "ifup": True}


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
    assert labnet.verdict_for(snapshot, now, ["lo", "ens3"])["ifup"] is True


def test_an_interface_no_longer_configured_or_behind_a_mapping_is_taken_down(tmp_path):
    (tmp_path / "image").mkdir()
    snapshot = _snapshot(tmp_path)
    (tmp_path / "none").mkdir()  # network: {config: disabled}: the agent writes nothing for ens3
    now = labnet.parse(_tree(tmp_path / "none", None))
    assert labnet.changed(snapshot, now, ["lo", "ens3"]) == (["lo"], ["ens3"])
    # reported apart from a changed one: ifup -a leaves it down, as a real boot would have it
    assert labnet.verdict_for(snapshot, now, ["lo", "ens3"]) == {"kept": ["lo"], "restarted": [], "removed": ["ens3"],
                                                                 "ifup": True}
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


def _networking(tmp_path, rc: int = 0) -> tuple[list[str], object]:
    """The drop-in's command as systemd runs it (``$$`` read as ``$``), with its pipes, ifup and the
    hotplug mark in ``tmp_path`` (ifup a recorder: the test must not touch the host's network)."""
    ifup = tmp_path / "ifup"
    ifup.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/ifup.log\nexit {rc}\n')
    ifup.chmod(0o755)
    text = (NETWORKING_START.replace(NET_DIR, str(tmp_path)).replace("/sbin/ifup", str(ifup))
            .replace("/run/network/restart-hotplug", str(tmp_path / "restart-hotplug")).replace("$$", "$"))
    return shlex.split(text), tmp_path / "ifup.log"


@pytest.mark.parametrize("verdict, runs", [(None, True), ({"kept": ["ens3", "lo"], "ifup": False}, False),
                                           ({"kept": ["lo"], "restarted": ["ens3"], "ifup": True}, True)],
                         ids=["nobody-to-ask", "all-kept", "changed"])
def test_networking_asks_the_exec_loop_and_leaves_out_ifup_only_when_all_is_kept(tmp_path, monkeypatch,
                                                                                  verdict, runs):
    """The drop-in's shell and the exec loop's thread meet on two pipes; the pipes go with the answer."""
    check, done = tmp_path / "check", tmp_path / "done"
    monkeypatch.setattr(labnet, "CHECK", str(check))
    monkeypatch.setattr(labnet, "DONE", str(done))
    command, log = _networking(tmp_path)
    thread = None
    if verdict is not None:
        for fifo in (check, done):
            os.mkfifo(fifo)
        asked = []
        monkeypatch.setattr(labnet, "reconcile", lambda console: asked.append(time.sleep(0.5)) or verdict)
        thread = threading.Thread(target=labnet.answer_check, args=(print,), daemon=True)
        thread.start()
    started = time.monotonic()
    assert subprocess.run(command, timeout=30).returncode == 0
    if thread is not None:
        assert asked and time.monotonic() - started >= 0.5  # it waited for the answer
        thread.join(5)
        assert not thread.is_alive() and not check.exists() and not done.exists()
    # `ifup -a` as Debian's unit has it, unless every interface it would raise was kept
    assert (log.read_text() if log.exists() else "") == ("-a --read-environment\n" if runs else "")
    if thread is not None:  # networking restarted later in the try: nobody to ask, no wait, ifup runs
        started = time.monotonic()
        assert subprocess.run(command, timeout=30).returncode == 0 and time.monotonic() - started < 5
        assert log.read_text().endswith("-a --read-environment\n")


def test_networking_fails_with_ifup_and_raises_the_hotplug_class_after_a_restart(tmp_path):
    command, log = _networking(tmp_path, rc=3)
    assert subprocess.run(command, timeout=30).returncode == 3  # the unit fails as with its own ExecStart
    command, log = _networking(tmp_path, rc=0)
    (tmp_path / "restart-hotplug").touch()
    assert subprocess.run(command, timeout=30).returncode == 0
    assert log.read_text().splitlines()[-2:] == ["-a --read-environment", "-a --read-environment --allow=hotplug"]


def test_the_drop_in_runs_the_commands_of_debians_networking_unit():
    """The try's networking command ends in the image's own unit's two commands (ifupdown 0.8.41, the
    host's package here: the image's is the same Debian release's)."""
    unit = "/lib/systemd/system/networking.service"
    if not os.path.exists(unit):
        pytest.skip("ifupdown's unit is not installed")
    with open(unit) as handle:
        starts = [line.split("=", 1)[1].strip() for line in handle if line.startswith("ExecStart=")]
    assert len(starts) == 2 and starts[0] == "/sbin/ifup -a --read-environment"
    assert f"; {starts[0]} || exit; " in NETWORKING_START
    hotplug = shlex.split(starts[1].lstrip("-"))[2]  # -/bin/sh -c '...': the shell's script
    assert NETWORKING_START.endswith(f"{hotplug}; exit 0'")


def test_the_interfaces_up_are_read_from_ifupdowns_state_file(tmp_path, monkeypatch):
    state = tmp_path / "ifstate"
    state.write_text("lo=lo\nens3=ens3\n")
    monkeypatch.setattr(labnet, "STATE", str(state))
    assert labnet._up_now() == ["lo", "ens3"]
    state.unlink()  # no state file (an older ifupdown): ifquery's answer, which is the host's own state
    listed = subprocess.run(["ifquery", "--state"], capture_output=True, text=True).stdout
    assert labnet._up_now() == [line.split("=", 1)[0] for line in listed.splitlines() if "=" in line]


def test_a_hook_added_since_the_snapshot_keeps_ifup_in(tmp_path, monkeypatch):
    """`ifup -a` runs if-pre-up.d and if-up.d once for "--all" too: with the image's own hooks (the
    snapshot's) it is left out when all is kept; a hook the try wrote makes it run, as on a real boot."""
    net, etc = tmp_path / "net", tmp_path / "etc"
    net.mkdir()
    (etc / "if-up.d").mkdir(parents=True)
    (etc / "if-up.d" / "resolved").write_text("#!/bin/sh\n")
    monkeypatch.setattr(labnet, "HOOK_DIRS", (str(etc / "if-pre-up.d"), str(etc / "if-up.d")))
    for name in ("PRIVATE", "HOOKS", "CHECK", "DONE", "NET_DIR"):
        monkeypatch.setattr(labnet, name, getattr(labnet, name).replace(labnet.NET_DIR, str(net)))
    monkeypatch.setattr(labnet, "VERDICT", str(tmp_path / "network.json"))
    monkeypatch.setattr(labnet, "_up_now", lambda: ["lo", "ens3"])
    (tmp_path / "image").mkdir()
    snapshot = labnet.snapshot_config("ens3", _tree(tmp_path / "image", None))
    (tmp_path / "try").mkdir()
    monkeypatch.setattr(labnet, "INTERFACES", _tree(tmp_path / "try", FALLBACK))

    def reconcile() -> dict:
        (net / "interfaces").write_text(snapshot.text())
        return labnet.reconcile(print)

    (net / "hooks.json").write_text(json.dumps(labnet.hooks()))
    assert reconcile()["ifup"] is False
    (etc / "if-pre-up.d").mkdir()
    (etc / "if-pre-up.d" / "mine").write_text("#!/bin/sh\n")
    verdict = reconcile()
    assert verdict["ifup"] is True and verdict["kept"] == ["ens3", "lo"]


def test_the_networking_drop_in_asks_the_pipes_labnet_listens_on():
    # agent_install spells the guest helper's directory itself (the helper is a standalone script in
    # the guest, not imported by the host package): the two must name the same pipes
    assert NET_DIR == labnet.NET_DIR
    assert f"{NET_DIR}/check" == labnet.CHECK and f"{NET_DIR}/done" == labnet.DONE
