"""set_hostname: the hostname from the config or the datasource, written in Debian and RHEL roots;
/etc/hostname compared with what Debian's cloud-init 22.4 writes.

The reference (Debian's cloud-init 22.4, run with Debian's python3 through ``tests/reference.py``) is
driven directly against temporary paths: its Debian distro's hostname writer on a temporary file.
Documented differences: product names, dates and template comment prose are not compared.
"""

from __future__ import annotations

import pytest

from tests.agent.modules.module_support import InputDatasource, run
from tests.reference import reference_python


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


def ref(code: str, *args: str) -> str:
    return reference_python(code, *args).stdout


@pytest.mark.reference
@pytest.mark.parametrize("existing", ["", "old-name\n", "# keep this comment\nold-name\n\n"])
def test_etc_hostname_matches(target, tmp_path, existing):
    path = tmp_path / "hostname"
    if existing:
        path.write_text(existing)
    ref("import sys; from cloudinit.distros import debian; "
        "debian.Distro('debian', {}, None)._write_hostname(sys.argv[1], sys.argv[2])", "newhost", str(path))
    if existing:
        target.write("/etc/hostname", existing)
    result, _ = run(target, "set_hostname", {"hostname": "newhost"})
    assert result.status == "ok"
    assert target.read_text("/etc/hostname") == path.read_text()


@pytest.mark.reference
def test_etc_hostname_inline_comment_differs_deliberately(target, tmp_path):
    """The reference glues an inline comment to the name ('newhost# inline'); we keep the space."""
    path = tmp_path / "hostname"
    path.write_text("old-name # inline\n")
    ref("import sys; from cloudinit.distros import debian; "
        "debian.Distro('debian', {}, None)._write_hostname(sys.argv[1], sys.argv[2])", "newhost", str(path))
    assert path.read_text() == "newhost# inline\n"
    target.write("/etc/hostname", "old-name # inline\n")
    run(target, "set_hostname", {"hostname": "newhost"})
    assert target.read_text("/etc/hostname") == "newhost # inline\n"
