"""update_etc_hosts: /etc/hosts from the template (compared with the reference's rendering), the localhost
mode, and bad values.

The reference (Debian's cloud-init 22.4, run with Debian's python3 through ``tests/reference.py``) is
driven directly against temporary paths: its templater renders its own ``hosts.<distro>.tmpl`` with the
same names. Documented differences: product names, dates and template comment prose are not compared.
"""

from __future__ import annotations

import os

import pytest

from tests.agent.modules.module_support import run
from tests.reference import reference_python, reference_tree


def test_etc_hosts_template_debian(target):
    result, _ = run(target, "update_etc_hosts", {"manage_etc_hosts": True, "fqdn": "a.example.com"})
    assert result.status == "ok", result.reason
    text = target.read_text("/etc/hosts")
    assert "127.0.1.1 a.example.com a\n127.0.0.1 localhost\n" in text
    assert "::1 localhost ip6-localhost ip6-loopback" in text
    assert "{{" not in text and "{#" not in text


def test_etc_hosts_template_rhel(rhel_target):
    run(rhel_target, "update_etc_hosts", {"manage_etc_hosts": "template", "fqdn": "r.example.com"})
    text = rhel_target.read_text("/etc/hosts")
    assert "127.0.0.1 r.example.com r\n" in text and "::1 r.example.com r\n" in text
    assert "127.0.1.1" not in text


def test_etc_hosts_user_template_override(target):
    target.write("/etc/cloudseed/templates/hosts.debian.tmpl",
                 "## template:jinja\n{% if fqdn %}10.0.0.5 {{ fqdn }} {{ hostname }}{% endif %}\n")
    run(target, "update_etc_hosts", {"manage_etc_hosts": True, "fqdn": "x.example.net"})
    assert target.read_text("/etc/hosts") == "10.0.0.5 x.example.net x\n"


def test_etc_hosts_localhost_mode_keeps_other_lines(any_target):
    any_target.write("/etc/hosts", "127.0.0.1 localhost\n192.0.2.9 gateway\n")
    run(any_target, "update_etc_hosts", {"manage_etc_hosts": "localhost", "fqdn": "m.example.com"})
    text = any_target.read_text("/etc/hosts")
    assert "192.0.2.9 gateway" in text
    ip = "127.0.0.1" if "rocky" in any_target.read_text("/etc/os-release") else "127.0.1.1"
    assert f"{ip} m.example.com m" in text
    # idempotent: a second run changes nothing
    run(any_target, "update_etc_hosts", {"manage_etc_hosts": "localhost", "fqdn": "m.example.com"})
    assert any_target.read_text("/etc/hosts") == text


def test_etc_hosts_false_leaves_file(target):
    target.write("/etc/hosts", "mine\n")
    result, _ = run(target, "update_etc_hosts", {"manage_etc_hosts": False})
    assert target.read_text("/etc/hosts") == "mine\n"
    assert result.status in ("ok", "skipped")


def test_etc_hosts_bad_value_named(target):
    result, _ = run(target, "update_etc_hosts", {"manage_etc_hosts": "sometimes"})
    assert result.status == "failed" and result.reason.startswith("manage_etc_hosts:")


def ref(code: str, *args: str) -> str:
    return reference_python(code, *args).stdout


def without_comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


@pytest.mark.reference
@pytest.mark.parametrize("distro,template", [("debian", "hosts.debian"), ("rhel", "hosts.redhat")])
@pytest.mark.parametrize("fqdn", ["web1.example.com", "solo"])
def test_etc_hosts_template_matches(request, distro, template, fqdn):
    tree = reference_tree() or pytest.skip("reference unavailable")
    template_path = os.path.join(tree, "etc/cloud/templates", f"{template}.tmpl")
    hostname = fqdn.split(".")[0]
    theirs = ref("import sys; from cloudinit import templater; "
                 "sys.stdout.write(templater.render_string(open(sys.argv[1]).read(), "
                 "{'hostname': sys.argv[2], 'fqdn': sys.argv[3]}))", template_path, hostname, fqdn)
    root = request.getfixturevalue("rhel_target" if distro == "rhel" else "target")
    result, _ = run(root, "update_etc_hosts", {"manage_etc_hosts": True, "fqdn": fqdn, "hostname": hostname})
    assert result.status == "ok", result.reason
    ours = root.read_text("/etc/hosts")
    assert without_comments(ours) == without_comments(theirs)
