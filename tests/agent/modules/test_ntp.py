"""ntp: the client chosen, its configuration checked by the real chronyd (``chronyd -p -f FILE``).

The roots are temporary directories; which clients "the image has" is an executable file at the
client's path in the root (all the module looks at). chrony.conf files are parsed by Debian's
chronyd 4.3 on the host (``-p``: print the parsed configuration and exit; an unknown or malformed
directive is an error). ntp.conf, timesyncd and openntpd files are checked by content: ntpd
(ntpsec), openntpd and systemd-timesyncd cannot run their config check here. The service
restart is only meaningful on the running system: these roots log the command line instead.
"""

from __future__ import annotations

import configparser
import logging
import os
import shutil
import subprocess

import pytest

from tests.agent.modules.module_support import run

CHRONY_DEBIAN = "/etc/chrony/chrony.conf"


def install(root, path: str) -> None:
    """Make ``path`` an executable file in ``root`` (the module looks for the client's binary)."""
    host = root.path(path)
    os.makedirs(os.path.dirname(host), exist_ok=True)
    with open(host, "w") as handle:
        handle.write("#!/bin/sh\nexit 0\n")
    os.chmod(host, 0o755)


def chronyd_check(path: str) -> list[str]:
    if not shutil.which("chronyd"):
        pytest.skip("chronyd is not installed (scripts/setup.sh: chrony)")
    proc = subprocess.run(["chronyd", "-p", "-f", path], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_auto_prefers_installed_chrony_and_chronyd_accepts_the_file(target, caplog):
    caplog.set_level(logging.INFO)
    install(target, "/usr/sbin/chronyd")
    install(target, "/usr/sbin/ntpd")
    cfg = {"ntp": {"servers": ["ntp1.example.com", "192.0.2.10"], "pools": ["pool.example.org"],
                   "peers": ["peer.example.com"], "allow": ["10.0.0.0/8", "2001:db8::/32"]}}
    result, _ = run(target, "ntp", cfg)
    assert result.status == "ok", result.reason
    parsed = chronyd_check(target.path(CHRONY_DEBIAN))
    for line in ("pool pool.example.org iburst", "server ntp1.example.com iburst", "server 192.0.2.10 iburst",
                 "peer peer.example.com", "allow 10.0.0.0/8", "allow 2001:db8::/32", "makestep 1 3"):
        assert line in parsed
    assert "not running systemctl reload-or-restart chrony" in caplog.text


def test_default_pools_per_distro(any_target):
    install(any_target, "/usr/sbin/chronyd")
    result, _ = run(any_target, "ntp", {"ntp": None})  # "ntp:" alone: the default client and pools
    assert result.status == "ok", result.reason
    rhel = os.path.exists(any_target.path("/etc/chrony.conf"))
    distro = "rocky" if rhel else "debian"
    parsed = chronyd_check(any_target.path("/etc/chrony.conf" if rhel else CHRONY_DEBIAN))
    assert [line for line in parsed if line.startswith("pool")] == [
        f"pool {n}.{distro}.pool.ntp.org iburst" for n in range(4)]


def test_existing_config_is_kept_once_as_dist(target):
    install(target, "/usr/sbin/chronyd")
    target.write(CHRONY_DEBIAN, "# the package's file\npool 2.debian.pool.ntp.org iburst\n")
    run(target, "ntp", {"ntp": {"servers": ["a.example"]}})
    run(target, "ntp", {"ntp": {"servers": ["b.example"]}})
    assert target.read_text(CHRONY_DEBIAN + ".dist") == "# the package's file\npool 2.debian.pool.ntp.org iburst\n"
    assert "server b.example iburst" in target.read_text(CHRONY_DEBIAN)


def test_ntpsec_on_debian(target):
    install(target, "/usr/sbin/ntpd")
    os.makedirs(target.path("/etc/ntpsec"))
    result, _ = run(target, "ntp", {"ntp": {"servers": ["ntp.example.com"], "allow": ["192.168.0.0/16"]}})
    assert result.status == "ok", result.reason
    text = target.read_text("/etc/ntpsec/ntp.conf")
    assert "server ntp.example.com iburst" in text
    assert "restrict 192.168.0.0 mask 255.255.0.0 nomodify notrap nopeer" in text
    assert not target.exists("/etc/ntp.conf")


def test_systemd_timesyncd(target):
    install(target, "/lib/systemd/systemd-timesyncd")
    result, ctx = run(target, "ntp", {"ntp": {"ntp_client": "systemd-timesyncd", "servers": ["a.example"],
                                              "pools": ["b.example"], "peers": ["c.example"]}})
    assert result.status == "ok", result.reason
    parser = configparser.ConfigParser()
    parser.read_string(target.read_text("/etc/systemd/timesyncd.conf.d/cloudseed.conf"))
    assert parser["Time"]["NTP"].split() == ["a.example", "b.example"]
    assert any("peers and allow do not apply to systemd-timesyncd" in w for w in ctx.warnings)


def test_openntpd_on_rhel(rhel_target):
    install(rhel_target, "/usr/sbin/ntpd")
    result, _ = run(rhel_target, "ntp", {"ntp": {"ntp_client": "openntpd", "pools": ["pool.example"],
                                                 "servers": ["one.example"]}})
    assert result.status == "ok", result.reason
    lines = [line for line in rhel_target.read_text("/etc/ntpd.conf").splitlines() if not line.startswith("#")]
    assert lines == ["servers pool.example", "server one.example", "sensor *"]


def test_custom_client_with_an_inline_template(target):
    install(target, "/usr/local/bin/myntpd")
    cfg = {"ntp": {"ntp_client": "myntp", "servers": ["s1.example", "s2.example"], "config": {
        "confpath": "/etc/myntp/myntp.conf", "check_exe": "myntpd", "packages": ["myntp"],
        "service_name": "myntp",
        "template": "## template:jinja\n{% for s in servers -%}\nserver {{s}} iburst\n{% endfor %}"}}}
    result, _ = run(target, "ntp", cfg)
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/myntp/myntp.conf") == "server s1.example iburst\nserver s2.example iburst\n"


def test_config_overrides_a_builtin_client(target):
    install(target, "/usr/sbin/chronyd")
    result, _ = run(target, "ntp", {"ntp": {"ntp_client": "chrony", "servers": ["x.example"],
                                            "config": {"confpath": "/etc/chrony/conf.d/cloud.conf"}}})
    assert result.status == "ok", result.reason
    chronyd_check(target.path("/etc/chrony/conf.d/cloud.conf"))
    assert not target.exists(CHRONY_DEBIAN)


def test_an_image_template_is_used(target):
    install(target, "/usr/sbin/chronyd")
    target.write("/etc/cloud/templates/chrony.conf.debian.tmpl",
                 "## template:jinja\n# image template\n{% for p in pools %}pool {{p}}\n{% endfor %}")
    run(target, "ntp", {"ntp": {"pools": ["img.example"]}})
    assert target.read_text(CHRONY_DEBIAN) == "# image template\npool img.example\n"


def test_disabled_does_nothing(target):
    result, _ = run(target, "ntp", {"ntp": {"enabled": False, "servers": ["a.example"]}})
    assert result.status == "ok"
    assert not target.exists("/etc/chrony")


def test_client_that_cannot_be_installed_is_reported_with_the_config_written(target):
    result, _ = run(target, "ntp", {"ntp": {"servers": ["a.example"]}})
    assert result.status == "failed"
    assert result.reason == ("ntp: chrony is not installed (chronyd not found); installing chrony: "
                             "apt-get update failed: apt-get: command not found on the target")
    chronyd_check(target.path(CHRONY_DEBIAN))


def test_a_missing_client_is_installed_with_apt(debian_root, tmp_path):
    """The real apt-get in a debootstrapped root installs the client's package from a signed loopback
    repository (tests/agent/packages/repo.py), after the configuration is written."""

    for tool in ("dpkg-deb", "apt-ftparchive", "gpg"):
        if not shutil.which(tool):
            pytest.skip(f"needs {tool} (scripts/setup.sh)")
    from tests.agent.packages import repo

    repository = repo.Repository(str(tmp_path / "repo"))
    try:
        repository.add("myntp", "1.0", files={"/usr/sbin/myntpd": "#!/bin/sh\nexit 0\n"},
                       postinst="chmod 755 /usr/sbin/myntpd")
        repository.publish()
        cfg = {"ntp": {"ntp_client": "myntp", "servers": ["time.example"], "config": {
            "confpath": "/etc/myntp.conf", "check_exe": "myntpd", "packages": ["myntp"], "service_name": "myntp",
            "template": "{% for s in servers %}server {{ s }}\n{% endfor %}"}}}
        with repo.serve_repository(repository) as served, repo.chroot_mounts(debian_root.top):
            repository.configure_root(debian_root, served.url)
            result, _ = run(debian_root, "ntp", cfg)
        assert result.status == "ok", result.reason
        assert debian_root.which("myntpd") == "/usr/sbin/myntpd"
        assert debian_root.read_text("/etc/myntp.conf") == "server time.example\n"
        status = debian_root.run(["dpkg-query", "-W", "-f", "${Status}", "myntp"]).stdout
        assert status == "install ok installed"
    finally:
        repository.close()


@pytest.mark.parametrize("cfg,words", [
    ({"ntp": "pool.ntp.org"}, "ntp: expected a mapping"),
    ({"ntp": {"servers": "a.example"}}, "ntp.servers: expected a list"),
    ({"ntp": {"ntp_client": "nosuch"}}, "ntp.ntp_client: 'nosuch' is not a known client"),
    ({"ntp": {"ntp_client": 7}}, "ntp.ntp_client: expected a client name"),
    ({"ntp": {"config": {"packages": "chrony"}}}, "ntp.config.packages: expected a list"),
    ({"ntp": {"ntp_client": "x", "config": {"confpath": "/etc/x.conf", "check_exe": "x", "packages": [],
                                             "service_name": "x", "template": "{% for %}"}}}, "ntp.config.template"),
])
def test_bad_input_writes_nothing(target, cfg, words):
    install(target, "/usr/sbin/chronyd")
    result, _ = run(target, "ntp", cfg)
    assert result.status == "failed" and words in result.reason, result.reason
    assert not target.exists(CHRONY_DEBIAN) and not target.exists("/etc/x.conf")
