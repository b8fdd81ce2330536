"""yum_add_repo: .repo files as cloud-init writes them (options passed through), checked by dnf's parser.

``configparser`` reads the files as dnf's libdnf does (INI with indented continuation lines);
where Debian's archive has dnf, ``dnf --installroot`` also reads the written repository.
"""

from __future__ import annotations

import configparser
import shutil

import pytest
from module_support import run
from test_apt_pipelining import _examples_validate_and_run


def read_repo(root, path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(root.read_text(path))
    return {section: dict(parser[section]) for section in parser.sections()}


def test_options_passed_through(rhel_target):
    cfg = {"yum_repos": {"epel testing": {
        "name": "EPEL testing", "baseurl": ["http://a.example/epel/$basearch", "http://b.example/epel/$basearch"],
        "enabled": False, "gpgcheck": True, "Repo-GPGCheck": 1, "priority": 10,
        "gpgkey": "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9"}}}
    result, _ = run(rhel_target, "yum_add_repo", cfg)
    assert result.status == "ok", result.reason
    text = rhel_target.read_text("/etc/yum.repos.d/epel-testing.repo")
    assert text.startswith("# Created by cloudseed")
    assert read_repo(rhel_target, "/etc/yum.repos.d/epel-testing.repo") == {"epel-testing": {
        "name": "EPEL testing", "baseurl": "http://a.example/epel/$basearch\nhttp://b.example/epel/$basearch",
        "enabled": "0", "gpgcheck": "1", "repo_gpgcheck": "1", "priority": "10",
        "gpgkey": "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9"}}


def test_repo_dir_metalink_and_missing_location(rhel_target):
    cfg = {"yum_repo_dir": "/etc/myrepos", "yum_repos": {
        "meta": {"metalink": "https://m.example/metalink?repo=x&arch=$basearch"},
        "list": {"mirrorlist": "https://m.example/list"},
        "nowhere": {"name": "no location", "enabled": True}}}
    result, _ = run(rhel_target, "yum_add_repo", cfg)
    assert result.status == "failed"
    assert "yum_repos.nowhere" in result.reason and "baseurl, metalink or mirrorlist" in result.reason
    assert sorted(rhel_target.listdir("/etc/myrepos")) == ["list.repo", "meta.repo"]


def test_existing_file_is_kept(rhel_target):
    rhel_target.write("/etc/yum.repos.d/keep.repo", "[keep]\nbaseurl=http://old/\n")
    result, _ = run(rhel_target, "yum_add_repo", {"yum_repos": {"keep": {"baseurl": "http://new/"}}})
    assert result.status == "ok"
    assert rhel_target.read_text("/etc/yum.repos.d/keep.repo") == "[keep]\nbaseurl=http://old/\n"


def test_bad_id_is_named(rhel_target):
    result, _ = run(rhel_target, "yum_add_repo", {"yum_repos": {"bad]id": {"baseurl": "http://x/"}}})
    assert result.status == "failed" and "yum_repos.bad]id" in result.reason
    assert rhel_target.listdir("/etc/yum.repos.d") == []


def test_not_on_debian(target):
    result, _ = run(target, "yum_add_repo", {"yum_repos": {"x": {"baseurl": "http://x/"}}})
    assert result.status == "skipped"


def test_examples_validate_and_run(rhel_target):
    _examples_validate_and_run(rhel_target, "yum_add_repo")


def test_dnf_reads_the_repo_file(rhel_target, tmp_path):
    dnf = shutil.which("dnf")
    if not dnf:
        pytest.skip("dnf is not installed here (Debian's archive has it as package 'dnf'; not in setup.sh)")
    import subprocess

    result, _ = run(rhel_target, "yum_add_repo", {"yum_repos": {"local": {
        "baseurl": f"file://{tmp_path}/nothing", "enabled": True, "gpgcheck": False, "name": "local"}}})
    assert result.status == "ok"
    reposdir = rhel_target.path("/etc/yum.repos.d")
    proc = subprocess.run([dnf, "--installroot", rhel_target.top, "--setopt", f"reposdir={reposdir}",
                           "repolist", "--all"], capture_output=True, text=True, timeout=120)
    assert "local" in proc.stdout, proc.stdout + proc.stderr
