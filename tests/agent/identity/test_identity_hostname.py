"""set_hostname, update_hostname, update_etc_hosts in temporary Debian and RHEL roots."""

from __future__ import annotations

from identity_support import InputDatasource, run


def test_hostname_from_config_written_debian(target):
    result, _ = run(target, "set_hostname", {"hostname": "web1", "fqdn": "web1.example.com"})
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/hostname") == "web1\n"


def test_rhel_prefers_fqdn_by_default(rhel_target):
    result, _ = run(rhel_target, "set_hostname", {"hostname": "web1", "fqdn": "web1.example.com"})
    assert result.status == "ok", result.reason
    assert rhel_target.read_text("/etc/hostname") == "web1.example.com\n"


def test_prefer_fqdn_over_hostname_false_on_rhel(rhel_target):
    run(rhel_target, "set_hostname", {"fqdn": "db.example.org", "prefer_fqdn_over_hostname": False})
    assert rhel_target.read_text("/etc/hostname") == "db\n"


def test_hostname_from_metadata_when_config_has_none(any_target):
    ds = InputDatasource(local_hostname="node-7.cloud.internal")
    result, _ = run(any_target, "set_hostname", {"prefer_fqdn_over_hostname": False}, datasource=ds)
    assert result.status == "ok"
    assert any_target.read_text("/etc/hostname") == "node-7\n"


def test_ip_address_metadata_hostname_becomes_ip_name(target):
    run(target, "set_hostname", {}, datasource=InputDatasource(local_hostname="10.1.2.3"))
    assert target.read_text("/etc/hostname") == "ip-10-1-2-3\n"


def test_preserve_hostname_leaves_file(target):
    target.write("/etc/hostname", "keepme\n")
    run(target, "set_hostname", {"hostname": "other", "preserve_hostname": True})
    assert target.read_text("/etc/hostname") == "keepme\n"


def test_create_hostname_file_false_does_not_create(target):
    result, _ = run(target, "set_hostname", {"hostname": "h1", "create_hostname_file": False})
    assert result.status == "ok"
    assert not target.exists("/etc/hostname")


def test_hostname_file_comments_kept(target):
    target.write("/etc/hostname", "# managed\nold\n")
    run(target, "set_hostname", {"hostname": "new"})
    assert target.read_text("/etc/hostname") == "# managed\nnew\n"


def test_invalid_hostname_names_key_and_writes_nothing(target):
    target.write("/etc/hostname", "old\n")
    result, _ = run(target, "set_hostname", {"hostname": "bad_name!"})
    assert result.status == "failed"
    assert result.reason.startswith("hostname:") and "bad_name!" in result.reason
    assert target.read_text("/etc/hostname") == "old\n"


def test_update_hostname_follows_config_until_admin_changes_it(target):
    run(target, "set_hostname", {"hostname": "first"})
    result, _ = run(target, "update_hostname", {"hostname": "second"})
    assert result.status == "ok"
    assert target.read_text("/etc/hostname") == "second\n"
    target.write("/etc/hostname", "admins-choice\n")
    run(target, "update_hostname", {"hostname": "third"})
    assert target.read_text("/etc/hostname") == "admins-choice\n"


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
