"""Every published cloud-init vulnerability, replayed against cloudseed (docs/security.md lists them).

Each test performs the attack of one CVE (or the closest thing cloudseed has to the vulnerable
part) and asserts that it fails here. Where cloudseed has no such part at all (no hotplug socket,
no certificate keys from Azure's wire server), the test checks the whole class: nothing a local
user could write to, no key the user did not give. These live beside the module tests because
several need the real Debian root (``chroot``: chpasswd, ssh-keygen, sshd's files).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile

import pytest

from cloudseed.agent.boot.stages import Agent
from tests.agent.modules.module_support import InputDatasource, run

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SEED = "/var/lib/cloud/seed/nocloud"


def _seed(root, user_data: str, modules: str) -> None:
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", "network: {config: disabled}\n" + modules)
    root.write(f"{SEED}/meta-data", "instance-id: iid-cve\n")
    root.write(f"{SEED}/user-data", user_data, mode=0o600)  # the input itself: not what is checked
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)


def _boot_command(root, *verb: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, *(verb or ("boot",))], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def _files_holding(top: str, needles: list[str], world_readable_only: bool = False) -> list[str]:
    """Regular files under ``top`` (not /proc, /sys, /dev) that contain one of ``needles``."""
    found = []
    for directory, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(directory, d) not in
                   {os.path.join(top, x) for x in ("proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin")}]
        for name in files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or (world_readable_only and not info.st_mode & 0o004):
                continue
            with open(path, "rb") as handle:
                data = handle.read()
            if any(n.encode() in data for n in needles):
                found.append(os.path.relpath(path, top))
    return found


# ------------------------------------------------------------------ CVE-2020-8631, CVE-2020-8632
def test_cve_2020_8631_random_passwords_do_not_come_from_pythons_seedable_random():
    """cloud-init drew generated passwords from ``random`` (a seedable PRNG). Here two processes with
    the same ``random.seed`` still get different passwords: they come from the OS (``secrets``)."""
    code = ("import random; random.seed(8631)\n"
            "from cloudseed.agent.modules.set_passwords import random_password\n"
            "print(random_password())")
    first, second = (subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    cwd=REPO).stdout.strip() for _ in range(2))
    assert first and second and first != second


def test_cve_2020_8632_random_passwords_are_long_enough():
    """cloud-init generated 9-character passwords; here 20 of 57 symbols (over 116 bits)."""
    from cloudseed.agent.modules.set_passwords import _RANDOM_ALPHABET, random_password

    passwords = {random_password() for _ in range(2000)}
    assert len(passwords) == 2000 and {len(p) for p in passwords} == {20}
    assert len(set(_RANDOM_ALPHABET)) >= 57 and set("".join(passwords)) <= set(_RANDOM_ALPHABET)


# ------------------------------------------------------------------ CVE-2021-3429
def test_cve_2021_3429_generated_passwords_reach_the_console_only(chroot):
    """cloud-init printed RANDOM passwords into the world-readable cloud-init-output.log. Here they are
    written to the console (the stderr the agent started with) even when ``output:`` sends everything
    to that log, and to no file of the instance."""
    _seed(chroot, "#cloud-config\noutput: {all: '>> /var/log/cloud-init-output.log'}\n"
                  "chpasswd: {expire: false, users: [{name: root, type: RANDOM}]}\n",
          "cloud_init_modules: []\ncloud_config_modules: [set_passwords]\ncloud_final_modules: [final_message]\n")
    proc = _boot_command(chroot)
    assert proc.returncode == 0, proc.stderr
    printed = [line for line in proc.stderr.splitlines() if line.startswith("root:")]
    assert len(printed) == 1, proc.stderr
    password = printed[0].split(":", 1)[1]
    assert len(password) == 20
    assert "stage final finished" in chroot.read_text("/var/log/cloudseed-output.log")  # the output did go there
    assert _files_holding(chroot.top, [password]) == []


# ------------------------------------------------------------------ CVE-2022-2084
def test_cve_2022_2084_schema_errors_never_carry_the_values(target):
    """cloud-init logged schema errors with the offending values: password hashes in a world-readable
    log. Here a boot whose user-data has schema errors beside secrets writes neither the hash nor the
    plain password into any world-readable file (nor into the 0640 log)."""
    hashed = "$6$rounds=4096$saltsalt$" + "Q" * 86
    _seed(target, "#cloud-config\n"
                  f"users: [{{name: eve, passwd: '{hashed}', lock_passwd: maybe-not, groups: 7}}]\n"
                  "chpasswd: {expire: plain-secret-2084, users: [{name: eve, password: plain-secret-2084, "
                  "type: text, extra: 1}]}\n"
                  "ssh_pwauth: plain-secret-2084\n",
          "cloud_init_modules: []\ncloud_config_modules: []\ncloud_final_modules: []\n")
    assert _boot_command(target).returncode == 0
    warnings = json.loads(target.read_text("/run/cloudseed/status.json"))["v1"]["init"]["warnings"]
    assert any("users[0].lock_passwd" in w for w in warnings), warnings       # the errors were reported
    assert _files_holding(target.top, [hashed, "plain-secret-2084"], world_readable_only=True) == []
    assert "plain-secret-2084" not in target.read_text("/var/log/cloudseed.log")
    assert hashed not in target.read_text("/var/log/cloudseed.log")


# ------------------------------------------------------------------ CVE-2023-1786
def test_cve_2023_1786_collect_logs_leaves_the_secrets_out(target, tmp_path):
    """cloud-init's collect-logs put user-data and sensitive instance data into a tarball users attach
    to public bug reports. Here, without --include-userdata, no collected file holds the secrets."""
    _seed(target, "#cloud-config\nchpasswd: {expire: false, users: [{name: root, password: hunter2-1786, "
                  "type: text}]}\nwrite_files: [{path: /etc/app.token, content: tok-1786-secret, "
                  "permissions: '0600'}]\n",
          "cloud_init_modules: []\ncloud_config_modules: []\ncloud_final_modules: []\n")
    Agent(target).run_all()
    tarball = tmp_path / "logs.tar.gz"
    proc = _boot_command(target, "collect-logs", "--tarfile", str(tarball))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        names = [m.name for m in members]
        contents = b"".join(archive.extractfile(m).read() for m in members)
    assert any(n.endswith("status.json") for n in names)                # it did collect
    assert not any(n.endswith(("user-data.txt", "instance-data-sensitive.json")) for n in names)
    assert b"hunter2-1786" not in contents and b"tok-1786-secret" not in contents


# ------------------------------------------------------------------ CVE-2024-6174
def test_cve_2024_6174_no_identified_datasource_means_no_metadata_request(tmp_path):
    """On platforms without DMI (non-x86) cloud-init stayed enabled when no datasource was identified
    and probed the link-local metadata address, where anyone on the network could answer with
    user-data. Here, in a guest namespace where an attacker's server answers at 169.254.169.254 for
    any path, a root without DMI and without a seed is disabled by the generator, and the default
    datasource list makes no request at all."""
    from cloudseed.agent.config import BUILTIN
    from tests.agent.datasources.netlab import PYTHON, SCRIPTED_SERVER, NetLab, find_in_guest

    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    answer = {"*": {"status": 200, "body": "instance-id: i-attacker\nlocal-hostname: owned\n"}}
    lab = NetLab()
    try:
        server = lab.start_in_cloud(PYTHON, SCRIPTED_SERVER, "169.254.169.254", "80", json.dumps(answer), ready="ready")
        out = find_in_guest(lab, str(root), list(BUILTIN["datasource_list"]))
        server.terminate()
        requests = server.stderr.read()
    finally:
        lab.close()
    assert out["ds"] is None, out
    assert "GET" not in requests, requests
    generated = subprocess.run([sys.executable, "-m", "cloudseed", "--root", str(root), "generator",
                                str(tmp_path / "g")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert generated.returncode == 0, generated.stderr
    assert (root / "run/cloudseed/disabled").exists() and not (root / "run/cloudseed/enabled").exists()


# ------------------------------------------------------------------ CVE-2024-11584
def test_cve_2024_11584_hotplug_leaves_nothing_a_local_user_can_write(shell_target):
    """cloud-init's hotplug FIFO (/run/cloud-init/share/hook-hotplug-cmd) was world-writable: any local
    user could inject hotplug events into a root process. cloudseed has no FIFO or socket: udev runs
    the root-owned hook. After a boot and install_hotplug, nothing the agent made is writable by others
    (or is a FIFO or socket at all)."""
    target = shell_target
    target.write("/bin/udevadm", "#!/bin/sh\nexit 0\n", mode=0o755)
    _seed(target, "#cloud-config\nupdates: {network: {when: [boot-new-instance, hotplug]}}\n",
          "cloud_init_modules: []\ncloud_config_modules: []\ncloud_final_modules: []\n")
    Agent(target).run_all()
    result, _ = run(target, "install_hotplug", {"updates": {"network": {"when": ["boot-new-instance", "hotplug"]}}},
                    datasource=InputDatasource(name="ConfigDrive"), stage="final")
    assert result.status == "ok", result.reason
    assert target.isfile("/etc/udev/rules.d/90-cloudseed-hook-hotplug.rules")
    loose = []
    for directory, dirs, files in os.walk(target.top):
        for name in dirs + files:
            info = os.lstat(os.path.join(directory, name))
            if stat.S_ISLNK(info.st_mode):
                continue
            if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode) or info.st_mode & 0o002:
                loose.append(os.path.relpath(os.path.join(directory, name), target.top))
    assert loose == []
    assert stat.S_IMODE(target.stat("/usr/lib/cloudseed/hook-hotplug").st_mode) == 0o755


# ------------------------------------------------------------------ CVE-2018-10896
def test_cve_2018_10896_a_new_instance_never_keeps_the_images_host_keys(chroot):
    """Fedora/RHEL's cloud-init shipped ``ssh_deletekeys: 0``: every instance cloned from an image kept the
    image's SSH host keys (one key for many machines). Here a new instance deletes and regenerates them
    by default, on every distro family."""
    chroot.makedirs("/etc/ssh")
    old = {}
    for keytype in ("ed25519", "ecdsa"):
        chroot.remove(f"/etc/ssh/ssh_host_{keytype}_key")
        chroot.remove(f"/etc/ssh/ssh_host_{keytype}_key.pub")
        chroot.run(["ssh-keygen", "-q", "-t", keytype, "-N", "", "-f", f"/etc/ssh/ssh_host_{keytype}_key"])
        old[keytype] = chroot.read_text(f"/etc/ssh/ssh_host_{keytype}_key.pub")
    _seed(chroot, "#cloud-config\n{}\n", "cloud_init_modules: [ssh]\ncloud_config_modules: []\n"
                                         "cloud_final_modules: []\nssh_genkeytypes: [ed25519, ecdsa]\n")
    proc = _boot_command(chroot)
    assert proc.returncode == 0, proc.stderr
    for keytype, text in old.items():
        assert chroot.read_text(f"/etc/ssh/ssh_host_{keytype}_key.pub") != text, keytype


# ------------------------------------------------------------------ CVE-2019-0816
def test_cve_2019_0816_azure_keys_given_only_by_fingerprint_are_never_authorized(target):
    """On Azure, cloud-init matched ovf-env.xml's key fingerprints against every certificate of the wire
    server's goal state, and so authorized the public keys of platform certificates (managed identity,
    extensions) for the user. cloudseed never reads those certificates: only keys given with their value
    (IMDS ``publicKeys`` or the OVF's) are the user's."""
    from cloudseed.agent.datasources import DatasourceContext
    from cloudseed.agent.datasources._azure_ovf import parse
    from cloudseed.agent.datasources.azure import Azure
    from cloudseed.agent.state import Paths

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFxUb2ucdAlOtSz8xhq4hEx2SCJkATUwXPS8Zb9zmH5f user@laptop"
    ovf = ('<ns0:Environment xmlns:ns0="http://schemas.dmtf.org/ovf/environment/1" '
           'xmlns:ns1="http://schemas.microsoft.com/windowsazure"><ns1:ProvisioningSection><ns1:Version>1.0'
           '</ns1:Version><ns1:LinuxProvisioningConfigurationSet><ns1:ConfigurationSetType>'
           'LinuxProvisioningConfiguration</ns1:ConfigurationSetType><ns1:UserName>alice</ns1:UserName>'
           '<ns1:SSH><ns1:PublicKeys><ns1:PublicKey><ns1:Fingerprint>6BE7A7C3C8A8F4B123CCA5D0C2F1BE4CA7B63ED7'
           '</ns1:Fingerprint><ns1:Path>/home/alice/.ssh/authorized_keys</ns1:Path></ns1:PublicKey>'
           f'<ns1:PublicKey><ns1:Fingerprint>AB</ns1:Fingerprint><ns1:Path>/home/alice/.ssh/authorized_keys'
           f'</ns1:Path><ns1:Value>{key}</ns1:Value></ns1:PublicKey></ns1:PublicKeys></ns1:SSH>'
           '<ns1:HostName>vm</ns1:HostName></ns1:LinuxProvisioningConfigurationSet></ns1:ProvisioningSection>'
           '</ns0:Environment>')
    ds = Azure(DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="local"))
    ds._fill((parse(ovf), "/dev/sr0"), {"compute": {"vmId": "a1b2"}})
    assert ds.public_keys == [key]
    ds._fill((parse(ovf), "/dev/sr0"), {"compute": {"vmId": "a1b2", "publicKeys": [{"keyData": key}]}})
    assert ds.public_keys == [key]
