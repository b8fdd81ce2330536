"""zypper_add_repo: .repo files zypper's INI reader accepts, zypp.conf additions, SUSE only."""

from __future__ import annotations

import configparser

from tests.agent.modules.module_support import run

LEAP = 'NAME="openSUSE Leap"\nID="opensuse-leap"\nID_LIKE="suse opensuse"\nVERSION_ID="15.6"\n'


def test_repositories_and_settings(target):
    target.write("/etc/os-release", LEAP)
    target.write("/etc/zypp/zypp.conf", "[main]\n# the image's own settings\n")
    result, _ = run(target, "zypper_add_repo", {"zypper": {
        "repos": [{"id": "my oss", "name": "OSS", "baseurl": "http://dl.example/oss/", "gpgcheck": True,
                   "Auto-Refresh": False, "priority": 90}],
        "config": {"download.use_deltarpm": True, "configdir": "/elsewhere", "solver.onlyRequires": ""}}})
    assert result.status == "ok", result.reason
    ini = configparser.ConfigParser()
    ini.read_string(target.read_text("/etc/zypp/repos.d/my_oss.repo"))
    assert dict(ini["my oss"]) == {"name": "OSS", "baseurl": "http://dl.example/oss/", "gpgcheck": "1",
                                   "auto_refresh": "0", "priority": "90", "enabled": "1", "autorefresh": "1"}
    conf = target.read_text("/etc/zypp/zypp.conf")
    assert conf.startswith("[main]\n# the image's own settings\n")
    assert conf.endswith("# Added from cloud-config by cloudseed\ndownload.use_deltarpm=1\n")
    assert "configdir" not in conf


def test_existing_repository_file_is_kept_and_bad_entries_write_nothing(target):
    target.write("/etc/os-release", LEAP)
    target.write("/etc/zypp/repos.d/oss.repo", "[oss]\nbaseurl=http://mine/\n")
    result, _ = run(target, "zypper_add_repo", {"zypper": {"repos": [{"id": "oss", "baseurl": "http://new/"}]}})
    assert result.status == "ok" and target.read_text("/etc/zypp/repos.d/oss.repo") == "[oss]\nbaseurl=http://mine/\n"
    result, _ = run(target, "zypper_add_repo", {"zypper": {"repos": [
        {"id": "a", "baseurl": "http://a/"}, {"id": "b", "name": "x\n[evil]\nbaseurl=http://evil/",
                                               "baseurl": "http://b/"}]}})
    assert result.status == "failed" and "zypper.repos[1].name: contains a line break" in result.reason
    assert not target.exists("/etc/zypp/repos.d/a.repo")
    result, _ = run(target, "zypper_add_repo", {"zypper": {"repos": [{"id": "c"}]}})
    assert result.status == "failed" and "zypper.repos[0].baseurl: missing" in result.reason


def test_not_applied_on_debian(target):
    result, ctx = run(target, "zypper_add_repo", {"zypper": {"repos": [{"id": "a", "baseurl": "http://a/"}]}})
    assert result.status == "skipped" and ctx.warnings and "not applicable to debian" in ctx.warnings[0]
