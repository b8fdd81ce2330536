"""``cloud-init``'s command on cloudseed, against temporary roots booted for real: verbs, options, exit codes."""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from cloudseed.agent.boot.stages import BootState, run_local, run_modules, run_network
from cloudseed.commands.cloud_init import cloud_init
from tests.compat.cloud_init_command import ADMIN_PASS, boot, ci, seed

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER_PASS = "Hunter2UserPassword"


def test_status_exit_codes_done_error_degraded_and_not_run(target, capsys):
    root = target
    assert ci(root, "status") == 0 and "not started" in capsys.readouterr().out
    seed(root)
    boot(root)
    assert ci(root, "status") == 0 and "status: done" in capsys.readouterr().out
    assert ci(root, "status", "--long", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["status"] == "done"
    seed(root, "#cloud-config\nchpasswd:\n  list: |\n    root:x\n", instance_id="iid-warn")  # deprecated key
    boot(root)
    assert ci(root, "status") == 2
    seed(root, "#cloud-config\nbootcmd: [[/nonexistent/command]]\n", instance_id="iid-error")
    boot(root)
    assert ci(root, "status", "--format", "yaml") == 1
    assert "status: error" in capsys.readouterr().out


def test_status_wait_returns_when_the_final_stage_is_done(target):
    root = target
    seed(root)
    state = BootState.load(root)
    run_local(state)
    waiter = subprocess.Popen([sys.executable, "-m", "cloudseed", "--root", root.top, "cloud-init",
                               "status", "--wait"], stdout=subprocess.PIPE, text=True, cwd=PROJECT)
    try:
        run_network(state)
        run_modules(state, "config")
        time.sleep(1.5)
        assert waiter.poll() is None  # the final stage has not run: still waiting
        run_modules(state, "final")
        out, _ = waiter.communicate(timeout=20)
    finally:
        waiter.kill()
    assert waiter.returncode == 0 and "status: done" in out


def test_query_schema_features_version_cloud_id_analyze(target, capsys, tmp_path):
    root = target
    seed(root)
    boot(root)
    capsys.readouterr()
    assert ci(root, "query", "v1.instance_id") == 0 and capsys.readouterr().out.strip() == "iid-cmd"
    assert ci(root, "query", "--format", "{{ v1.local_hostname }}") == 0 and capsys.readouterr().out.strip() == "cmd"
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("#cloud-config\nruncmd: [echo hi]\n")
    bad.write_text("#cloud-config\nruncmd: 3\n")
    assert ci(root, "schema", "-c", str(good)) == 0
    assert ci(root, "schema", "--config-file", str(bad)) == 1
    assert ci(root, "devel", "schema", "-c", str(bad)) == 1
    capsys.readouterr()
    assert ci(root, "features") == 0 and capsys.readouterr().out.split() == ["NETWORK_CONFIG_V1", "NETWORK_CONFIG_V2"]
    assert ci(root, "--version") == 0 and capsys.readouterr().out.startswith("cloud-init 23.4 (cloudseed ")
    from cloudseed.cli import main

    assert main(["--root", root.top, "cloud-id"]) == 0 and capsys.readouterr().out.strip() == "nocloud"
    assert main(["--root", root.top, "cloud-id", "--long"]) == 0
    assert ci(root, "analyze", "show") == 0 and ci(root, "analyze", "blame") == 0
    capsys.readouterr()
    assert ci(root, "analyze", "dump") == 0
    events = json.loads(capsys.readouterr().out)
    assert {e["name"] for e in events} >= {"init-local", "init-network", "modules-config", "modules-final"}
    assert ci(root, "analyze", "boot") == 0
    capsys.readouterr()
    assert ci(root, "modules", "--mode", "init") == 1
    # reported as cloud-init 24.1+ reports it
    assert ("`--mode init` is deprecated in 24.1 and scheduled to be removed in 29.1. Use `cloud-init init` "
            "instead.") in capsys.readouterr().err
    # the top-level --file was removed (24.x): a usage error (the subcommands' --file: test_cloud_init_file_option)
    assert ci(root, "--file", "/etc/extra.cfg", "status") == 2
    assert "removed in cloud-init 24.x" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        ci(root, "no-such-verb")
    assert exit_.value.code == 2


def test_cloud_id_exit_codes_not_run_and_disabled(target, capsys):
    from cloudseed.cli import main

    assert main(["--root", target.top, "cloud-id"]) == 3 and capsys.readouterr().out.strip() == "not started"  # 24.x+
    target.write("/etc/cloud/cloud-init.disabled", "")
    assert main(["--root", target.top, "cloud-id"]) == 2 and capsys.readouterr().out.strip() == "disabled"


def tree(top: str) -> dict[str, bytes]:
    out = {}
    for directory, _dirs, names in os.walk(top):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, top)] = f.read()
    return out


@pytest.mark.parametrize("renderer", ["netplan", "networkd", "eni", "sysconfig"])
def test_devel_net_convert_writes_what_net_render_writes(tmp_path, renderer):
    from cloudseed.cli import main

    config = tmp_path / "net.yaml"
    config.write_text("version: 2\nethernets:\n  eth0:\n    match: {macaddress: '52:54:00:12:34:56'}\n"
                      "    set-name: eth0\n    addresses: [192.0.2.10/24]\n"
                      "    routes: [{to: default, via: 192.0.2.1}]\n")
    ours, theirs = tmp_path / "compat", tmp_path / "render"
    distro = "centos" if renderer == "sysconfig" else "debian"
    assert cloud_init(["devel", "net-convert", "-p", str(config), "-k", "yaml", "-d", str(ours), "-D", distro,
                       "-O", renderer, "-m", "eth0,52:54:00:12:34:56"]) == 0
    family = "rhel" if renderer == "sysconfig" else "debian"
    assert main(["net", "render", str(config), "--renderer", renderer, "--root", str(theirs), "--kind", "auto",
                 "--distro", family, "--mac", "52:54:00:12:34:56=eth0"]) == 0
    assert tree(str(ours)) == tree(str(theirs)) and tree(str(ours))
    assert cloud_init(["devel", "net-convert", "-p", str(config), "-k", "eni", "-d", str(ours), "-O", renderer]) == 1


def test_collect_logs_keeps_secrets_out(target, tmp_path, monkeypatch):
    root = target
    seed(root, f"#cloud-config\nchpasswd:\n  users:\n    - name: root\n      password: {USER_PASS}\n      type: text\n")
    boot(root)
    sensitive = root.read_text("/run/cloudseed/instance-data-sensitive.json")
    assert ADMIN_PASS in sensitive and USER_PASS in sensitive
    # a secret that reached a log by accident is redacted too
    with open(root.path("/var/log/cloudseed.log"), "a") as f:
        f.write(f"oops: {ADMIN_PASS}\n")

    def contents(tarball) -> bytes:
        with tarfile.open(tarball) as tar:
            names = tar.getnames()
            assert all(n.startswith("cloud-init-logs-") for n in names)
            return b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())

    redacted = tmp_path / "redacted.tar.gz"
    assert ci(root, "collect-logs", "--tarfile", str(redacted), "--redact") == 0
    data = contents(redacted)
    assert b"iid-cmd" in data  # the status and the redacted instance data are in
    assert ADMIN_PASS.encode() not in data and USER_PASS.encode() not in data
    assert os.stat(redacted).st_mode & 0o077 == 0
    default = tmp_path / "default.tar.gz"
    assert ci(root, "collect-logs", "-t", str(default)) == 0
    assert ADMIN_PASS.encode() not in contents(default)
    # with the user-data asked for and no --redact, the secrets are there: the checks above can fail
    full = tmp_path / "full.tar.gz"
    assert ci(root, "collect-logs", "-t", str(full), "--include-userdata") == 0
    assert USER_PASS.encode() in contents(full) and ADMIN_PASS.encode() in contents(full)
    # cloud-init 24.3's spelling: --redact-sensitive / -r
    assert ci(root, "collect-logs", "-t", str(full), "-u", "-r") == 0
    assert USER_PASS.encode() not in contents(full) and ADMIN_PASS.encode() not in contents(full)
    # an existing world-readable file is replaced by a private one, not rewritten keeping its mode
    os.chmod(default, 0o644)
    assert ci(root, "collect-logs", "-t", str(default)) == 0
    assert os.stat(default).st_mode & 0o077 == 0


def test_collect_logs_to_a_directory_that_does_not_exist_says_so(target, tmp_path, capsys):
    root = target
    seed(root)
    boot(root)
    capsys.readouterr()
    assert ci(root, "collect-logs", "-t", str(tmp_path / "nope" / "logs.tgz")) == 1
    err = capsys.readouterr().err
    assert "cannot write" in err and "nope/logs.tgz" in err and "No such file or directory" in err
    assert not (tmp_path / "nope").exists()


def test_collect_logs_gathers_what_cloud_init_24_3_gathers(target, tmp_path):
    """The configuration (not keys/ or templates/), the data directory, the previous boot's journal
    when there is a journal; files only root may read stay out by default (cloud-init 24.3's rule,
    which it applies only with --redact-sensitive)."""
    root = target
    seed(root)
    boot(root)
    root.write("/etc/cloud/cloud.cfg.d/90-site.cfg", "datasource_list: [NoCloud]\n", mode=0o644)
    root.write("/etc/cloud/cloud.cfg.d/91-private.cfg", "apt: {proxy: http://u:p@proxy}\n", mode=0o600)
    root.write("/etc/cloud/templates/hosts.debian.tmpl", "x\n")
    root.write("/etc/cloud/keys/secret.pem", "k\n")
    tarball = tmp_path / "logs.tar.gz"
    assert ci(root, "collect-logs", "-t", str(tarball)) == 0
    with tarfile.open(tarball) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"etc/cloud/cloud.cfg.d/90-site.cfg", "etc/cloudseed/cloud.cfg.d/00-test.cfg",
            "var/lib/cloudseed/data/instance-id", "run/cloudseed/status.json", "version"} <= names
    assert not {"etc/cloud/cloud.cfg.d/91-private.cfg", "etc/cloud/templates/hosts.debian.tmpl",
                "etc/cloud/keys/secret.pem", "var/lib/cloudseed/instance/user-data.txt"} & names
    assert ci(root, "collect-logs", "-t", str(tarball), "--include-userdata") == 0
    with tarfile.open(tarball) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"etc/cloud/cloud.cfg.d/91-private.cfg", "var/lib/cloudseed/instance/user-data.txt"} <= names
    assert "var/lib/cloud/seed/nocloud/user-data" not in names  # 24.3+ takes the files at the top of seed/


def test_clean_logs_seed_machine_id(target, capsys):
    root = target
    seed(root)
    boot(root)
    root.write("/etc/machine-id", "0123456789abcdef0123456789abcdef\n")
    root.write("/usr/lib/systemd/systemd", "", mode=0o755)
    assert ci(root, "clean", "--logs", "--machine-id") == 0
    assert not root.exists("/var/lib/cloudseed/instance") and not root.exists("/var/lib/cloud/instance")
    assert not root.islink("/var/lib/cloud/instance") and not root.islink("/run/cloud-init/status.json")
    assert root.exists("/var/lib/cloud/seed/nocloud/meta-data")  # seeds stay without --seed
    assert root.read_text("/etc/machine-id") == "uninitialized\n"
    assert ci(root, "status") == 0 and "not started" in capsys.readouterr().out
    # --seed removes cloud-init's seed directory too (an image cleaned by Packer's `cloud-init clean --seed`
    # must not boot its build's NoCloud seed again)
    assert ci(root, "clean", "--seed") == 0
    assert not root.exists("/var/lib/cloud/seed")


def test_make_mime_builds_multipart_user_data(tmp_path, capsys):
    config, script = tmp_path / "config.yaml", tmp_path / "run.sh"
    config.write_text("#cloud-config\nruncmd: [echo hi]\n")
    script.write_text("#!/bin/sh\necho hi\n")
    assert cloud_init(["devel", "make-mime", "-a", f"{config}:cloud-config", "-a", f"{script}:x-shellscript"]) == 0
    message = email.message_from_string(capsys.readouterr().out)
    parts = [p for p in message.walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/cloud-config", "text/x-shellscript"]
    assert parts[0].get_payload(decode=True).decode() == config.read_text()
    assert cloud_init(["devel", "make-mime", "-a", f"{config}:not-a-type"]) == 1
    assert cloud_init(["devel", "make-mime", "-a", f"{config}:not-a-type", "--force"]) == 0
    capsys.readouterr()
    assert cloud_init(["devel", "make-mime", "--list-types"]) == 0
    assert "x-shellscript-per-boot" in capsys.readouterr().out.split()


def test_install_cloud_init_compat_writes_the_launchers(target):
    from cloudseed.cli import main

    assert main(["install", "--root", target.top, "--cloud-init-compat"]) == 0
    for name in ("cloud-init", "cloud-id", "cloud-init-per"):
        assert os.access(target.path(f"/usr/bin/{name}"), os.X_OK)
        assert "cloudseed" in target.read_text(f"/usr/bin/{name}")


def test_clean_configs_removes_generated_configuration_only(target):
    """``clean --configs`` (cloud-init 25.2): what the agent generated goes, the rest stays."""
    root = target
    generated = ["/etc/netplan/50-cloudseed.yaml", "/etc/systemd/network/10-cloudseed-eth0.network",
                 "/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection",
                 "/etc/netplan/50-cloud-init.yaml", "/etc/ssh/sshd_config.d/50-cloudseed.conf"]
    theirs = ["/etc/netplan/01-admin.yaml", "/etc/systemd/network/20-admin.network",
              "/etc/ssh/sshd_config.d/10-admin.conf"]
    for path in generated + theirs:
        root.write(path, "x\n")
    fstab = ("UUID=1 / ext4 defaults 0 1\n"
             "/dev/vdb /data auto defaults,nofail,comment=cloudconfig 0 2\n"
             "/dev/disk/cloud/azure_resource /mnt auto defaults,nofail,comment=cloudconfig 0 2\n")
    root.write("/etc/fstab", fstab, mode=0o640)
    assert ci(root, "clean", "--configs", "network") == 0
    assert [p for p in generated if root.exists(p)] == ["/etc/ssh/sshd_config.d/50-cloudseed.conf"]
    assert ci(root, "clean", "-c", "datasource") == 0     # Azure's resource disk line only
    assert root.read_text("/etc/fstab") == "".join(fstab.splitlines(keepends=True)[:2])
    assert ci(root, "clean", "-c", "all") == 0
    assert not any(root.exists(p) for p in generated) and all(root.exists(p) for p in theirs)
    assert root.read_text("/etc/fstab") == "UUID=1 / ext4 defaults 0 1\n"
    assert root.stat("/etc/fstab").st_mode & 0o777 == 0o640
    with pytest.raises(SystemExit):
        ci(root, "clean", "-c", "everything")
