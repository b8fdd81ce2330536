"""lxd: the exact ``lxd``/``lxc`` command lines and preseed documents; LXD installed when missing.

Debian's archive has LXD (bookworm: 5.0), but ``lxd init`` talks to a running LXD daemon, which
needs its own storage, a bridge, dnsmasq and cgroup delegation: too heavy for a unit test on a
shared machine. So recording scripts stand in for ``lxd`` and ``lxc`` in a temporary Debian root
with a chrooted busybox shell: they log their argv and copy their stdin, and the test checks the
commands, their order and the documents fed to ``lxd init --preseed``, which are also parsed as
YAML to show they say what LXD would read. Differential: for the same documents the commands (and
stdin) equal what Debian's cloud-init 22.4's own handler runs (its ``subp`` recorded), except two
deliberate differences named in their tests (the trust password is not on a command line; a
boolean ``ipv4_nat``/``ipv6_nat`` is honoured). Real tool: every ``lxc`` command line the module
runs is given to Debian's own ``lxc`` (lxd-client 5.0, which needs only libc) with no daemon, and
must be parsed far enough to try the daemon's socket. (``lxd`` itself needs liblxc and dqlite: not
run.)
"""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from tests.agent.modules.module_support import run

PASSWORD = "trust-me-very-secret"
RECORDER = """\
#!/bin/sh
n=$(ls /var/log/stdin | grep -c .)
echo "$(basename $0) $*" >> /var/log/calls.log
cat > /var/log/stdin/$n
"""


def _lxd(root, lxc_extra: str = "", lxd_extra: str = "") -> None:
    root.makedirs("/var/log/stdin")
    root.write("/usr/bin/basename", "#!/bin/sh\necho ${1##*/}\n", mode=0o755)
    root.write("/usr/bin/lxd", RECORDER + lxd_extra, mode=0o755)
    root.write("/usr/bin/lxc", RECORDER + lxc_extra, mode=0o755)


def _calls(root) -> list[str]:
    return root.read_text("/var/log/calls.log").splitlines()


def _stdin(root, index: int) -> str:
    return root.read_text(f"/var/log/stdin/{index}")


def test_init_with_trust_password_on_stdin_and_a_new_bridge(shell_target, caplog):
    _lxd(shell_target)
    cfg = {"lxd": {"init": {"network_address": "0.0.0.0", "network_port": 8443, "storage_backend": "dir",
                            "storage_pool": "default", "trust_password": PASSWORD},
                   "bridge": {"mode": "new", "name": "lxdbr1", "mtu": 1500, "ipv4_address": "10.0.8.1",
                              "ipv4_netmask": 24, "ipv4_dhcp_first": "10.0.8.2", "ipv4_dhcp_last": "10.0.8.254",
                              "ipv6_address": "fd42::1", "ipv6_netmask": 64, "ipv6_nat": True, "domain": "lxd"}}}
    with caplog.at_level(logging.DEBUG):
        result, _ = run(shell_target, "lxd", cfg, stage="final")
    assert result.status == "ok", result.reason
    assert _calls(shell_target) == [
        "lxd waitready --timeout=300",
        "lxd init --auto --network-address=0.0.0.0 --network-port=8443 --storage-backend=dir --storage-pool=default",
        "lxd init --preseed",
        "lxc network create lxdbr1 ipv4.address=10.0.8.1/24 ipv4.nat=true ipv4.dhcp.ranges=10.0.8.2-10.0.8.254 "
        "ipv6.address=fd42::1/64 ipv6.nat=true dns.domain=lxd bridge.mtu=1500 --force-local",
        "lxc network attach-profile lxdbr1 default eth0 --force-local",
    ]
    assert yaml.safe_load(_stdin(shell_target, 2)) == {"config": {"core.trust_password": PASSWORD}}
    assert PASSWORD not in "\n".join(_calls(shell_target)) and PASSWORD not in caplog.text


def test_default_bridge_replaces_the_one_init_made(shell_target):
    _lxd(shell_target)
    result, _ = run(shell_target, "lxd", {"lxd": {"init": {"storage_backend": "dir"}, "bridge": {"mode": "new"}}},
                    stage="final")
    assert result.status == "ok", result.reason
    assert _calls(shell_target) == [
        "lxd waitready --timeout=300",
        "lxd init --auto --storage-backend=dir",
        "lxc network detach-profile lxdbr0 default --force-local",
        "lxc network delete lxdbr0 --force-local",
        "lxc profile device remove default eth0 --force-local",
        "lxc network create lxdbr0 ipv4.address=none ipv6.address=none --force-local",
        "lxc network attach-profile lxdbr0 default eth0 --force-local",
    ]


def test_existing_bridge_is_attached(shell_target):
    _lxd(shell_target)
    result, _ = run(shell_target, "lxd", {"lxd": {"bridge": {"mode": "existing", "name": "br0"}}}, stage="final")
    assert result.status == "ok", result.reason
    assert _calls(shell_target)[1:] == ["lxc network attach-profile br0 default eth0 --force-local"]


def test_preseed_goes_on_stdin(shell_target):
    _lxd(shell_target)
    preseed = "config:\n  core.https_address: 192.168.1.1:9999\nstorage_pools:\n- name: default\n  driver: dir\n"
    result, _ = run(shell_target, "lxd", {"lxd": {"preseed": preseed}}, stage="final")
    assert result.status == "ok", result.reason
    assert _calls(shell_target) == ["lxd waitready --timeout=300", "lxd init --preseed"]
    assert _stdin(shell_target, 1) == preseed


def test_preseed_with_init_is_refused_before_anything_runs(shell_target):
    _lxd(shell_target)
    result, _ = run(shell_target, "lxd", {"lxd": {"preseed": "config: {}\n", "init": {"storage_backend": "dir"}}},
                    stage="final")
    assert result.status == "failed" and "lxd.preseed: cannot be combined with lxd.init" in result.reason
    assert not shell_target.exists("/var/log/calls.log")


def test_failing_init_masks_the_password(shell_target, caplog):
    _lxd(shell_target, lxd_extra=f'[ "$1" = init ] && {{ echo "Error: bad {PASSWORD}" >&2; exit 1; }}\nexit 0\n')
    with caplog.at_level(logging.DEBUG):
        result, _ = run(shell_target, "lxd", {"lxd": {"init": {"trust_password": PASSWORD}}}, stage="final")
    assert result.status == "failed" and "lxd: lxd init --auto failed: Error: bad [trust password]" in result.reason
    assert PASSWORD not in caplog.text


def test_missing_lxd_installed_through_apt(shell_target):
    """No lxd: the Debian package manager plugin installs it (a stand-in apt-get that puts lxd there)."""
    import os

    os.symlink("busybox", shell_target.path("/bin/chmod"))
    shell_target.makedirs("/var/log/stdin")
    shell_target.write("/usr/bin/basename", "#!/bin/sh\necho ${1##*/}\n", mode=0o755)
    shell_target.write("/var/log/lxd-to-install", RECORDER)
    shell_target.write("/usr/bin/apt-get", '#!/bin/sh\necho "apt-get $*" >> /var/log/apt.log\n'
                       'case "$*" in *" install "*) cat /var/log/lxd-to-install > /usr/bin/lxd; '
                       'chmod 755 /usr/bin/lxd;; esac\n', mode=0o755)
    result, _ = run(shell_target, "lxd", {"lxd": {"init": {"storage_backend": "dir"}}}, stage="final")
    assert result.status == "ok", result.reason
    apt = shell_target.read_text("/var/log/apt.log").splitlines()
    assert apt[0].endswith(" update") and apt[1].endswith(" install lxd") and "--assume-yes" in apt[1], apt
    assert _calls(shell_target) == ["lxd waitready --timeout=300", "lxd init --auto --storage-backend=dir"]


def test_missing_lxd_and_no_way_to_install(target):
    result, _ = run(target, "lxd", {"lxd": {"init": {"storage_backend": "zfs"}}}, stage="final")
    assert result.status == "failed"
    assert "lxd, zfsutils-linux not installed and cannot be installed" in result.reason


def test_wrong_type(target):
    result, _ = run(target, "lxd", {"lxd": {"init": {"network_port": "8443"}}}, stage="final")
    assert result.status == "failed" and "lxd.init.network_port: expected integer" in result.reason


# ---------------------------------------------------------------- differential against cloud-init 22.4
REF_LXD = r"""
import json, logging, sys
from cloudinit import subp
from cloudinit.config import cc_lxd
ran = []
def fake_subp(cmd, *args, **kwargs):
    ran.append([" ".join(cmd), kwargs.get("data")])
    return ("", "")
subp.subp = fake_subp
subp.which = lambda name, *a, **k: "/usr/bin/" + name
class Distro:
    def install_packages(self, packages):
        ran.append(["install " + " ".join(packages), None])
class Cloud:
    distro = Distro()
cc_lxd.handle("lxd", json.loads(sys.argv[1]), Cloud(), logging.getLogger(), [])
print(json.dumps(ran))
"""

SAME = {
    "init and a new bridge": {"lxd": {
        "init": {"network_address": "0.0.0.0", "network_port": 8443, "storage_backend": "zfs",
                 "storage_create_loop": 10, "storage_pool": "data"},
        "bridge": {"mode": "new", "name": "lxdbr0", "ipv4_address": "10.0.8.1", "ipv4_netmask": 24,
                   "ipv4_dhcp_first": "10.0.8.2", "ipv4_dhcp_last": "10.0.8.3", "ipv6_address": "fd98::1",
                   "ipv6_netmask": 64, "domain": "lxd", "mtu": 9000}}},
    "a new bridge of another name, no addresses": {"lxd": {"bridge": {"mode": "new", "name": "br1"}}},
    "an existing bridge after init": {"lxd": {"init": {"storage_backend": "dir"},
                                              "bridge": {"mode": "existing", "name": "lxdbr0"}}},
    "no bridge": {"lxd": {"init": {"storage_backend": "btrfs"}, "bridge": {"mode": "none"}}},
    "preseed": {"lxd": {"preseed": "config:\n  core.https_address: '[::]:8443'\n"}},
}


def _ours(shell_target, cfg: dict) -> list[list]:
    _lxd(shell_target)
    for tool in ("/sbin/zfs", "/sbin/lvcreate", "/sbin/mkfs.btrfs"):
        shell_target.makedirs("/sbin")
        shell_target.write(tool, "#!/bin/sh\nexit 0\n", mode=0o755)
    result, _ = run(shell_target, "lxd", cfg, stage="final")
    assert result.status == "ok", result.reason
    calls = _calls(shell_target)
    return [[call, _stdin(shell_target, i) or None] for i, call in enumerate(calls)]


def _theirs(cfg: dict) -> list[list]:
    from tests.reference import reference_python

    return json.loads(reference_python(REF_LXD, json.dumps(cfg)).stdout)


@pytest.mark.reference
@pytest.mark.parametrize("case", sorted(SAME))
def test_same_commands_as_cloud_init(shell_target, case):
    assert _ours(shell_target, SAME[case]) == _theirs(SAME[case])


@pytest.mark.reference
def test_trust_password_on_stdin_not_argv_deliberately(shell_target):
    """Deliberate: cloud-init 22.4 puts ``--trust-password=...`` on the command line (visible in ps)."""
    cfg = {"lxd": {"init": {"storage_backend": "dir", "trust_password": PASSWORD}}}
    theirs, ours = _theirs(cfg), _ours(shell_target, cfg)
    assert theirs[1][0] == f"lxd init --auto --storage-backend=dir --trust-password={PASSWORD}"
    assert ours[1][0] == "lxd init --auto --storage-backend=dir"
    assert ours[2] == ["lxd init --preseed", f'config:\n  core.trust_password: "{PASSWORD}"\n']


@pytest.mark.reference
def test_boolean_nat_is_honoured_deliberately(shell_target):
    """Deliberate: 22.4's schema makes ``ipv4_nat``/``ipv6_nat`` booleans but its code compares them with
    the string "true", so ``ipv4_nat: true`` turns NAT off there; here true means NAT."""
    cfg = {"lxd": {"bridge": {"mode": "new", "name": "br1", "ipv4_address": "10.1.0.1", "ipv4_netmask": 24,
                              "ipv4_nat": True, "ipv6_address": "fd00::1", "ipv6_netmask": 64, "ipv6_nat": True}}}
    theirs, ours = _theirs(cfg), _ours(shell_target, cfg)
    create = "lxc network create br1 ipv4.address=10.1.0.1/24{} ipv6.address=fd00::1/64{} --force-local"
    assert theirs[1][0] == create.format("", "")
    assert ours[1][0] == create.format(" ipv4.nat=true", " ipv6.nat=true")


# ---------------------------------------------------------------- the real lxc parses what we run
@pytest.fixture(scope="module")
def real_lxc(tmp_path_factory):
    """Debian's ``lxc`` (package lxd-client, which needs only libc), unpacked once into the cache."""
    import glob
    import os
    import shutil
    import subprocess
    import tempfile

    from tests.reference import CACHE

    tree = os.path.join(CACHE, "lxd-client")
    binary = os.path.join(tree, "usr", "bin", "lxc")
    if not os.path.exists(binary):
        if not shutil.which("apt-get"):
            pytest.skip("needs apt-get to fetch Debian's lxd-client")
        os.makedirs(CACHE, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            os.chmod(tmp, 0o755)
            subprocess.run(["apt-get", "download", "lxd-client"], cwd=tmp, capture_output=True)
            debs = glob.glob(os.path.join(tmp, "lxd-client_*.deb"))
            if not debs:
                pytest.skip("Debian's lxd-client could not be fetched (apt-get download lxd-client)")
            subprocess.run(["dpkg", "-x", debs[0], tree], check=True)
    return binary


def test_real_lxc_accepts_every_command_line(shell_target, real_lxc, tmp_path):
    """Each ``lxc`` command the module runs, given to Debian's LXD 5.0 client with no daemon: it must
    get as far as connecting to the daemon's socket (a wrong flag or argument count fails before)."""
    import subprocess

    _lxd(shell_target)
    cfg = {"lxd": {"init": {"storage_backend": "dir"},
                   "bridge": {"mode": "new", "name": "lxdbr0", "mtu": 1400, "ipv4_address": "10.0.8.1",
                              "ipv4_netmask": 24, "ipv4_dhcp_first": "10.0.8.2", "ipv4_dhcp_last": "10.0.8.254",
                              "ipv6_address": "fd42::1", "ipv6_netmask": 64, "ipv6_nat": True, "domain": "lxd"}}}
    result, _ = run(shell_target, "lxd", cfg, stage="final")
    assert result.status == "ok", result.reason
    lxc_calls = [c.split(" ") for c in _calls(shell_target) if c.startswith("lxc ")]
    assert len(lxc_calls) == 5
    env = {"LXD_DIR": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    for argv in lxc_calls:
        proc = subprocess.run([real_lxc, *argv[1:]], capture_output=True, text=True, env=env, timeout=30)
        assert proc.returncode != 0 and f"dial unix {tmp_path}/unix.socket" in proc.stderr, (argv, proc.stderr)
