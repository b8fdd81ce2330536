"""``lab --expect``: the file's errors name line and key; checks judge real facts and say what was found.

The facts come from the guest helper's own code (``cloudseed/lab/guest/labstate.py``) run on this
machine against real files, users, packages and mounts, or, for what only a provisioned guest
has (a sudo rule, an authorized key, services under systemd), as it answered in a real lab VM
(``recorded/guest-facts.json``, recorded from ``tests/e2e/test_lab_tries.py``'s guest).
"""

from __future__ import annotations

import json
import os
import socket

import pytest

from cloudseed.lab.reports import junit
from cloudseed.lab.reports.checks import ExpectError, evaluate, load, queries, summary
from tests.lab.guest_helper import labstate

HERE = os.path.dirname(os.path.abspath(__file__))


def write(tmp_path, text: str) -> str:
    path = tmp_path / "expect.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, message", [
    ("fils:\n  /etc/x: {}\n", "line 1, fils: unknown section (did you mean 'files'?)"),
    ("files:\n  /etc/x:\n    mdoe: '0644'\n", "line 3, files./etc/x.mdoe: unknown key (did you mean 'mode'?)"),
    ("files:\n  /etc/x:\n    mode: rwxr\n", "line 3, files./etc/x.mode: 'rwxr' is not a file mode"),
    ("files:\n  /etc/x: {matches: '(unclosed'}\n", "line 2, files./etc/x.matches: not a valid regular expression"),
    ("commands:\n  - {exit: 0}\n", "line 2, commands.0: each command is a mapping with a `run` string"),
    ("users:\n  bob: {password: unset}\n", "line 2, users.bob.password: one of locked, set, empty"),
    ("packages:\n  curl: [1]\n", "line 2, packages.curl: true (installed), false (not installed) or a version"),
    ("- a list\n", "top level: the file must be a mapping of sections"),
    ("files: {a: [\n", "not valid YAML"),
])
def test_expect_file_errors_name_the_line_and_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ExpectError) as error:
        load(path)
    assert str(error.value).startswith(path), error.value
    assert message in str(error.value), error.value


def test_missing_expect_file_is_named(tmp_path):
    with pytest.raises(ExpectError, match="nothere.yaml: No such file"):
        load(str(tmp_path / "nothere.yaml"))


def _judge(path: str):
    expect = load(path)
    return evaluate(expect, [labstate.fact(query) for query in queries(expect)])


def test_checks_hold_against_real_facts_of_this_machine(tmp_path):
    motd = tmp_path / "motd"
    motd.write_text("hello\nport=8080\n")
    os.chmod(motd, 0o640)
    os.symlink(str(motd), tmp_path / "link")
    text = f"""
hostname: {socket.gethostname()}
files:
  {motd}: {{content: "hello\\nport=8080\\n", contains: "port=8080", matches: "^port=\\\\d+$", mode: 0640,
            owner: root, group: root, kind: file}}
  {tmp_path / "link"}: {{kind: link, target: {motd}}}
  {tmp_path / "absent"}: {{exists: false}}
users:
  root: {{uid: 0, home: /root, primary_group: root, groups: [root]}}
  no-such-user-here: {{exists: false}}
groups:
  root: {{gid: 0, members: [root]}}
packages:
  bash: true
  dpkg: "1.*"
  no-such-package-here: false
mounts:
  /proc: {{fstype: proc, options: [rw]}}
  {tmp_path}: false
commands:
  - {{run: "echo out; echo err >&2; exit 3", exit: 3, stdout: out, stderr_is: err, stdout_matches: "^o.t$"}}
"""
    checks = _judge(write(tmp_path, text))
    assert [c.describe() for c in checks if not c.ok] == []
    assert len(checks) == 33
    assert summary(checks) == "checks: 33 passed, 0 failed"


def test_failed_checks_say_what_was_expected_and_found_and_where(tmp_path):
    motd = tmp_path / "motd"
    motd.write_text("hullo\n")
    os.chmod(motd, 0o644)
    text = f"""files:
  {motd}:
    mode: "0600"
    content: "hello\\n"
  {tmp_path / "missing"}: {{}}
users:
  root: {{shell: /bin/zsh}}
packages:
  bash: false
  no-such-package-here: true
commands:
  - {{name: probe, run: "printf 'a\\nb\\n'; exit 2", stdout_is: "a"}}
"""
    failed = [c.describe() for c in _judge(write(tmp_path, text)) if not c.ok]
    assert failed == [
        f"FAIL  file {motd}: content: expected 'hello\\n', found 'hullo\\n' (line 4)",
        f"FAIL  file {motd}: mode: expected 0600, found 0644 (line 3)",
        f"FAIL  file {tmp_path / 'missing'}: exists: expected present, found absent (line 5)",
        "FAIL  user root: shell: expected /bin/zsh, found /bin/bash (line 7)",
        f"FAIL  package bash: installed: expected not installed, found installed, version "
        f"{labstate.package_fact('bash')['version']} (line 9)",
        "FAIL  package no-such-package-here: installed: expected installed, found not installed (line 10)",
        "FAIL  command 1 (probe): exit: expected 0, found 2 (stderr: '') (line 12)",
        "FAIL  command 1 (probe): stdout_is: expected 'a', found 'a\\nb\\n' (line 12)",
    ]


@pytest.mark.parametrize("written", ["'0640'", "0640", "640", "0o640", '"640"'])
def test_a_mode_means_octal_however_it_is_written(tmp_path, written):
    target = tmp_path / "f"
    target.write_text("x")
    os.chmod(target, 0o640)
    checks = _judge(write(tmp_path, f"files:\n  {target}: {{mode: {written}}}\n"))
    assert [(c.aspect, c.ok, c.expected) for c in checks] == [("exists", True, "present"), ("mode", True, "0640")]


def test_users_sudo_keys_groups_and_services_judged_from_a_real_guests_answers(tmp_path):
    """The facts a lab VM gave for the user-data of tests/e2e/test_lab_tries.py (recorded there)."""
    with open(os.path.join(HERE, "recorded", "guest-facts.json")) as handle:
        recorded = json.load(handle)
    expect = load(write(tmp_path, recorded["expect"]))
    assert queries(expect) == recorded["queries"]
    verdict = {(c.subject, c.aspect): (c.ok, c.found) for c in evaluate(expect, recorded["facts"])}
    assert verdict[("user tester", "sudo")][0] is True
    assert verdict[("user tester", "authorized key")][0] is True
    assert verdict[("user tester", "groups")][0] is True
    assert verdict[("user tester", "password")] == (True, "locked")
    assert verdict[("service ssh.service", "active")] == (True, "active")
    assert verdict[("service ssh.service", "enabled")][0] is True
    assert verdict[("user tester", "shell")] == (False, "/bin/bash")  # the recorded expect asks /bin/sh on purpose


def test_junit_report_lists_each_check_and_each_failure(tmp_path):
    import xml.etree.ElementTree as ET

    motd = tmp_path / "motd"
    motd.write_text("x")
    checks = _judge(write(tmp_path, f"files:\n  {motd}: {{content: y}}\n"))
    out = tmp_path / "junit.xml"
    junit.write(str(out), [junit.SuiteRun("try 1", checks, 3.5),
                           junit.SuiteRun("try 2", [], 0, "the agent did not finish")])
    root = ET.parse(out).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "3", "2")
    first, second = root.findall("testsuite")
    assert (first.get("name"), first.get("tests"), first.get("failures"), first.get("time")) == \
        ("try 1", "2", "1", "3.500")
    cases = first.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == \
        [(f"file {motd}", "exists"), (f"file {motd}", "content")]
    assert cases[0].find("failure") is None
    assert cases[1].find("failure").get("message") == "expected 'y', found 'x'"
    assert second.find("testcase/failure").get("message") == "the agent did not finish"
    assert not os.path.exists(f"{out}.partial")
