"""Differential tests: the files our modules write vs the files Debian's cloud-init 22.4 writes.

The reference runs with Debian's python3 (``tests/reference.py``); its functions are driven
directly against temporary paths:
- /etc/hosts: its templater renders its own ``hosts.<distro>.tmpl`` with the same names;
- /etc/hostname: its Debian distro's hostname writer on a temporary file;
- sshd configuration: ``ssh_util.update_ssh_config`` on a temporary sshd_config (with and
  without an ``Include`` of the drop-in directory);
- sudoers: ``Distro.write_sudo_rules`` with the drop-in and ``/etc/sudoers`` redirected;
- /etc/default/locale: its Debian ``update_locale_conf`` with ``subp`` prefixed by ``chroot`` into
  the debootstrapped tree, so ``update-locale`` runs against that tree.
Documented differences: product names, dates and the template's comment prose (comment lines
are compared after removing those); our in-place sshd edit keeps unrelated lines byte for byte
where the reference re-spaces them (compared token by token); drop-in and sudoers file names.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from identity_support import run
from reference import reference_python, reference_tree

pytestmark = pytest.mark.reference

_STAMP = re.compile(r"^# (Created|Added) by (cloud-init|cloudseed) v\. \S+ on .*$", re.MULTILINE)


def ref(code: str, *args: str) -> str:
    return reference_python(code, *args).stdout


def without_comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def normalise_stamps(text: str) -> str:
    return _STAMP.sub(r"# \1 by PRODUCT", text)


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


DEBIAN_SSHD = ("Include {d}/*.conf\n\n#PermitRootLogin prohibit-password\nKbdInteractiveAuthentication no\n"
               "UsePAM yes\nX11Forwarding yes\nPrintMotd no\nAcceptEnv LANG LC_*\n"
               "Subsystem\tsftp\t/usr/lib/openssh/sftp-server\n")
RHEL_SSHD = ("HostKey /etc/ssh/ssh_host_rsa_key\nSyslogFacility AUTHPRIV\n#PasswordAuthentication yes\n"
             "PasswordAuthentication no\nChallengeResponseAuthentication no\nUsePAM yes\n"
             "Subsystem\tsftp\t/usr/libexec/openssh/sftp-server\n")
UPDATE_SSHD = ("import sys; from cloudinit import ssh_util; "
               "ssh_util.update_ssh_config({'PasswordAuthentication': sys.argv[2]}, fname=sys.argv[1])")


@pytest.mark.parametrize("value", [True, False])
def test_sshd_drop_in_matches(target, tmp_path, value):
    main = tmp_path / "sshd_config"
    main.write_text(DEBIAN_SSHD.format(d=f"{main}.d"))
    ref(UPDATE_SSHD, str(main), "yes" if value else "no")
    theirs_drop_in = (tmp_path / "sshd_config.d" / "50-cloud-init.conf").read_text()
    target.write("/etc/ssh/sshd_config", DEBIAN_SSHD.format(d="/etc/ssh/sshd_config.d"))
    result, _ = run(target, "ssh", {"ssh_genkeytypes": [], "ssh_pwauth": value})
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/ssh/sshd_config.d/50-cloudseed.conf") == theirs_drop_in
    # both leave the main file alone
    assert main.read_text() == DEBIAN_SSHD.format(d=f"{main}.d")
    assert target.read_text("/etc/ssh/sshd_config") == DEBIAN_SSHD.format(d="/etc/ssh/sshd_config.d")


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("config", [RHEL_SSHD, RHEL_SSHD.replace("PasswordAuthentication no\n", "")])
def test_sshd_in_place_edit_matches(rhel_target, tmp_path, value, config):
    main = tmp_path / "sshd_config"
    main.write_text(config)
    ref(UPDATE_SSHD, str(main), "yes" if value else "no")
    rhel_target.write("/etc/ssh/sshd_config", config)
    run(rhel_target, "ssh", {"ssh_genkeytypes": [], "ssh_pwauth": value})
    ours = rhel_target.read_text("/etc/ssh/sshd_config")
    # the reference re-spaces every line it parses; compare token by token
    assert [line.split() for line in ours.splitlines()] == [line.split() for line in main.read_text().splitlines()]
    assert "Subsystem\tsftp\t/usr/libexec" in ours  # ours keeps unrelated lines as they were


SUDO_USERS = [("debian", ["ALL=(ALL) NOPASSWD:ALL"]), ("alice", ["ALL=(ALL) /usr/bin/apt", "ALL=(root) /bin/ls"]),
              ("bob", "ALL=(ALL:ALL) ALL")]


@pytest.mark.parametrize("sudoers_base", ["Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n",
                                          "Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n"])
def test_sudoers_matches(target, tmp_path, sudoers_base):
    base = tmp_path / "sudoers"
    drop_dir = tmp_path / "sudoers.d"
    base.write_text(sudoers_base.replace("/etc/sudoers.d", str(drop_dir)))
    code = ("import sys, json; from cloudinit import distros; from cloudinit.distros import debian\n"
            "d = debian.Distro('debian', {}, None)\n"
            "d.ensure_sudo_dir = lambda path, sudo_base=sys.argv[1]: \\\n"
            "    distros.Distro.ensure_sudo_dir(d, path, sys.argv[1])\n"
            "for user, rules in json.loads(sys.argv[3]):\n"
            "    d.write_sudo_rules(user, rules, sudo_file=sys.argv[2])\n")
    ref(code, str(base), str(drop_dir / "90-cloud-init-users"), json.dumps(SUDO_USERS))
    target.write("/etc/sudoers", sudoers_base, mode=0o440)
    users = [{"name": name, "sudo": rules, "lock_passwd": False} for name, rules in SUDO_USERS]
    from cloudseed.agent.distros import file_header
    from cloudseed.agent.sudoers import write_user_rules
    from cloudseed.agent.users import normalize_users

    # the users themselves need useradd (the chroot tests cover that); here only the sudoers writer runs,
    # fed by the same normalisation and rule parsing users_groups uses
    requests, _ = normalize_users({"users": users}, None)
    from cloudseed.agent.sudoers import rules_from_config

    for request in requests:
        write_user_rules(target, "/etc/sudoers.d/90-cloudseed-users", request.name,
                         rules_from_config(request.spec["sudo"], f"{request.where}.sudo"), file_header(), request.where)
    ours = normalise_stamps(target.read_text("/etc/sudoers.d/90-cloudseed-users"))
    theirs = normalise_stamps((drop_dir / "90-cloud-init-users").read_text())
    assert ours == theirs
    ours_base = normalise_stamps(target.read_text("/etc/sudoers"))
    theirs_base = normalise_stamps(base.read_text()).replace(str(drop_dir), "/etc/sudoers.d")
    assert ours_base == theirs_base


@pytest.mark.root
@pytest.mark.parametrize("existing", [None, "#  File generated by update-locale\nLANG=C\n",
                                      "LANG=C\nLC_TIME=C.UTF-8\n"])
def test_default_locale_matches(chroot, chroot_tree, existing):
    path = chroot.path("/etc/default/locale")
    saved = read(path) if os.path.exists(path) else None

    def reset():
        if existing is None:
            if os.path.exists(path):
                os.unlink(path)
        else:
            with open(path, "w") as handle:
                handle.write(existing)

    try:
        reset()
        code = ("import sys; from cloudinit import subp; from cloudinit.distros import debian\n"
                "real = subp.subp\n"
                "subp.subp = lambda args, *a, **k: real(['chroot', sys.argv[1]] + list(args), *a, **k)\n"
                "debian.update_locale_conf('C.UTF-8', '/etc/default/locale')\n")
        ref(code, chroot_tree)
        theirs = read(path)
        reset()
        result, _ = run(chroot, "locale", {"locale": "C.UTF-8"})
        assert result.status == "ok", result.reason
        assert read(path) == theirs
    finally:
        if saved is not None:
            with open(path, "w") as handle:
                handle.write(saved)
        shutil.rmtree(chroot.path("/var/lib/cloudseed"), ignore_errors=True)
