"""yum_add_repo: .repo files as cloud-init writes them (options passed through), checked by dnf's parser.

``configparser`` reads the files as dnf's libdnf does (INI with indented continuation lines);
where Debian's archive has dnf, ``dnf --installroot`` also reads the written repository.
"""

from __future__ import annotations

import configparser
import shutil

import pytest

from tests.agent.modules.module_support import examples, run


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


# what each declared example writes: its .repo file and the sections dnf reads from it
EXAMPLE_REPOS = [
    ("/etc/yum.repos.d/epel-testing.repo", {"epel-testing": {
        "name": "EPEL testing", "baseurl": "https://mirror.example.com/epel/9/$basearch", "enabled": "0",
        "gpgcheck": "1", "gpgkey": "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9"}}),
    ("/etc/yum.repos.d/my-repo.repo", {"my-repo": {
        "metalink": "https://mirrors.example.com/metalink?repo=x&arch=$basearch"}}),
]


def test_each_example_writes_its_repo_file(rhel_target):
    cfgs = examples("yum_add_repo")
    assert len(cfgs) == len(EXAMPLE_REPOS), "a new example needs its expected .repo file here"
    for index, (cfg, (path, sections)) in enumerate(zip(cfgs, EXAMPLE_REPOS)):
        result, _ = run(rhel_target, "yum_add_repo", cfg)
        assert result.status == "ok", f"example {index}: {result.reason}"
        assert read_repo(rhel_target, path) == sections, f"example {index}"


def test_dnf_reads_the_repo_files(rhel_target):
    """dnf itself parses what was written (disabled repositories: nothing is fetched)."""
    import subprocess

    dnf = shutil.which("dnf")
    if not dnf:
        pytest.skip("needs dnf (scripts/setup.sh installs it)")
    cfg = {"yum_repos": {
        "two urls": {"name": "Two URLs", "baseurl": ["http://a.example/r/$basearch", "http://b.example/r"],
                     "enabled": False, "gpgcheck": True, "priority": 10},
        "meta": {"metalink": "https://m.example/metalink?repo=x&arch=$basearch", "enabled": False}}}
    result, _ = run(rhel_target, "yum_add_repo", cfg)
    assert result.status == "ok", result.reason
    reposdir = rhel_target.path("/etc/yum.repos.d")
    proc = subprocess.run([dnf, "--installroot", rhel_target.top, f"--setopt=reposdir={reposdir}",
                           "--releasever", "9", "--forcearch", "x86_64", "-q", "repoinfo", "--all"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    info = {}
    for block in proc.stdout.split("Repo-id")[1:]:
        pairs = (line.split(":", 1) for line in ("Repo-id" + block).splitlines() if ":" in line)
        fields = {key.strip(): value.strip() for key, value in pairs}
        info[fields["Repo-id"]] = fields
    assert info["two-urls"]["Repo-name"] == "Two URLs"
    assert info["two-urls"]["Repo-baseurl"] == "http://a.example/r/x86_64, http://b.example/r"
    assert info["two-urls"]["Repo-status"] == "disabled"
    assert info["meta"]["Repo-metalink"].startswith("https://m.example/metalink?repo=x&arch=x86_64")
