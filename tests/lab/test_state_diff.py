"""``lab --compare``'s differences, on the system states two real lab boots left (``recorded/``).

``state-cloudseed.json`` and ``state-cloud-init.json`` were collected by the guest helper
(``labstate.collect``) after ``cloudseed lab --compare --user-data recorded/compare-user-data.yaml``
booted the same user-data (a hostname and fqdn with ``manage_etc_hosts``, the default user and a
sudo user with a key, two files, a runcmd) with each agent. What differs there is known and
explained in docs/lab.md; a change made to one of the states is found and named.
"""

from __future__ import annotations

import copy
import json
import os

from cloudseed.lab.reports.state_diff import diff, format_diff

HERE = os.path.dirname(os.path.abspath(__file__))


def state(name: str) -> dict:
    with open(os.path.join(HERE, "recorded", f"state-{name}.json")) as handle:
        return json.load(handle)


def test_the_recorded_boots_differ_only_where_docs_lab_md_says():
    found = {(d.category, d.item): (d.ours, d.theirs) for d in diff(state("cloudseed"), state("cloud-init"))}
    # cloud-init 22.4 creates the named users before the default user; cloudseed in the order listed
    assert found[("users", "tester uid")] == ("1001", "1000")
    assert found[("users", "debian uid")] == ("1000", "1001")
    # deliberate: no DSA host key (OpenSSH 9 refuses DSA; cloud-init 22.4 still makes one)
    assert found[("ssh host keys", "types")] == ("-", "also ssh_host_dsa_key.pub")
    # the NIC's udev rule: the same rule, each agent's own file name (ours starts with a comment)
    assert found[("files", "/etc/udev/rules.d/70-cloudseed-net.rules")] == \
        ("wrote this", "wrote the same lines (comments aside) as /etc/udev/rules.d/70-persistent-net.rules")
    same = {"hostname", "hosts", "sudoers", "mounts", "fstab", "services", "packages", "network", "timezone"}
    assert not same & {category for category, _ in found}, found


def test_a_state_compared_with_itself_has_no_differences():
    assert diff(state("cloudseed"), state("cloudseed")) == []
    assert format_diff([]).startswith("no differences: cloudseed and cloud-init left the same state (files, users")


def test_each_kind_of_change_is_found_and_named():
    ours, theirs = state("cloudseed"), state("cloudseed")
    theirs = copy.deepcopy(theirs)
    path = next(p for p, f in theirs["files"].items() if f.get("text") and f.get("mode") != "0600")
    theirs["files"][path]["mode"] = "0600"
    theirs["files"][path]["text"] += "one more line\n"
    theirs["files"][path]["sha256"] = "0" * 64
    theirs["users"]["tester"]["shell"] = "/bin/sh"
    theirs["users"]["tester"]["sudo"] = []
    theirs["hostname"]["fqdn"] = "other.example.test"
    theirs["packages_installed"]["nginx"] = "1.22.1-9"
    theirs["services_enabled"].append("nginx.service")
    theirs["fstab"].append("/dev/vdb /mnt auto defaults 0 2")
    differences = diff(ours, theirs)
    lines = [d.line(("cloudseed", "cloud-init")) for d in differences]
    assert f"files: {path} mode: cloudseed {ours['files'][path]['mode']}; cloud-init 0600" in lines
    assert any(line.startswith(f"files: {path} content: ") for line in lines)
    assert "users: tester shell: cloudseed /bin/bash; cloud-init /bin/sh" in lines
    assert "users: tester sudo: cloudseed tester ALL=(ALL) NOPASSWD:ALL; cloud-init none" in lines
    assert "hostname: fqdn: cloudseed cmphost.example.test; cloud-init other.example.test" in lines
    assert "packages: nginx: cloudseed not installed; cloud-init 1.22.1-9" in lines
    assert "services: enabled: cloudseed -; cloud-init also nginx.service" in lines
    assert "fstab: entries: cloudseed -; cloud-init also /dev/vdb /mnt auto defaults 0 2" in lines
    assert len(differences) == 8, lines
    text = format_diff(differences)
    assert text.startswith("8 difference(s) between cloudseed and cloud-init:")
    # the content's unified diff under its line, from cloud-init's file to ours (what switching changes)
    assert "      --- cloud-init\n      +++ cloudseed\n" in text and "      -one more line" in text
    assert text.splitlines()[-1] == "the same: groups, sudoers, hosts, mounts, network, ssh host keys, timezone"
