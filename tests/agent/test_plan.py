"""``cloudseed plan``: what a cloud-config would change on an image, and that the image is left as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

USER_DATA = """\
#cloud-config
hostname: web-1
users:
  - default
  - name: bob
    groups: [docker, adm]
    ssh_authorized_keys: ["ssh-ed25519 AAAAC3Nza bob@laptop"]
  - name: alice
    sudo: ALL=(ALL) NOPASSWD:ALL
groups: [{admins: [alice]}]
packages: [nginx, curl]
package_upgrade: true
write_files:
  - {path: /etc/app.conf, content: x, permissions: '0640', owner: 'www-data:www-data'}
  - {path: /etc/motd, content: hello, append: true}
mounts:
  - [/dev/vdb, /data, ext4]
  - [/dev/vdc, /srv, ext4]
swap: {filename: /swapfile, size: 512M}
ntp: {enabled: true}
timezone: Europe/Paris
runcmd: [echo one, echo two]
rumcmd: [typo]
"""
DPKG_STATUS = """\
Package: curl
Status: install ok installed

Package: nginx
Status: deinstall ok config-files
"""


def snapshot(top: str) -> dict:
    out = {}
    for folder, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            with open(path, "rb") as handle:
                out[path] = (st.st_mode, st.st_mtime_ns, handle.read())
    return out


def test_plan_lists_the_changes_by_kind_and_changes_nothing(target, tmp_path):
    root = target
    root.write("/etc/passwd", "root:x:0:0:root:/root:/bin/bash\nbob:x:1000:1000::/home/bob:/bin/bash\n")
    root.write("/etc/cloud/cloud.cfg", "system_info:\n  default_user: {name: debian, groups: [sudo]}\n")
    root.write("/etc/hostname", "localhost\n")
    root.write("/etc/motd", "welcome\n")
    root.write("/etc/fstab", "UUID=x / ext4 defaults 0 1\n/dev/vdc /srv ext4 defaults 0 2\n")
    root.write("/var/lib/dpkg/status", DPKG_STATUS)
    user_data = tmp_path / "user-data"
    user_data.write_text(USER_DATA)
    before = snapshot(root.top)
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "plan", "--user-data",
                           str(user_data), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(root.top) == before  # not one byte, mode or time changed
    plan = json.loads(proc.stdout)
    files = {f["path"]: f for f in plan["files"]}
    assert files["/etc/app.conf"]["action"] == "create" and files["/etc/app.conf"]["mode"] == "0640"
    assert files["/etc/app.conf"]["owner"] == "www-data:www-data"
    assert files["/etc/motd"]["action"] == "append"
    assert files["/etc/hostname"]["action"] == "replace" and "web-1" in files["/etc/hostname"]["what"]
    assert files["/home/bob/.ssh/authorized_keys"]["mode"] == "0600"
    assert "/etc/localtime" in files and "/swapfile" in files
    users = {u["name"]: u for u in plan["users"]}
    assert users["debian"]["action"] == "create" and users["bob"]["action"] == "change"
    assert users["alice"]["sudo"] == "ALL=(ALL) NOPASSWD:ALL"
    groups = {g["name"]: g for g in plan["groups"]}
    assert groups["admins"] == {"name": "admins", "action": "create", "members": ["alice"]}
    assert groups["docker"]["action"] == "create" and "adm" not in groups  # adm exists already
    assert [(p["name"], p["action"]) for p in plan["packages"]] == [
        ("nginx", "install"), ("curl", "installed already"), ("*", "update the package index"),
        ("*", "upgrade every package")]  # nginx: only its configuration files are left
    mounts = {m["device"]: m["action"] for m in plan["mounts"]}
    assert mounts["/dev/vdb"] == "add an fstab line and mount" and mounts["/dev/vdc"] == "replace the fstab line"
    assert any(s["name"].startswith("NTP client") for s in plan["services"])
    assert plan["commands"] == [{"key": "runcmd", "count": 2, "when": "once, in the final stage",
                                 "note": "not run by plan"}]
    assert any("rumcmd: unknown key (did you mean 'runcmd'?)" in p for p in plan["problems"])


def test_plan_reads_the_images_own_seed_and_says_so_in_text(target):
    root = target
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\npackages: [htop]\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "plan"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "/var/lib/cloud/seed/nocloud/user-data" in proc.stdout.splitlines()[0]
    assert "htop: action: install (not checked: the image has no dpkg database)" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "plan", "--user-data",
                          "/nonexistent/ud"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "cannot read /nonexistent/ud" in bad.stderr


def test_plan_as_documented_root_after_the_verb_and_the_distros_own_default_user(target, tmp_path):
    """``cloudseed plan --root DIR`` (the docs' form) works; ``users: [default]`` on a Debian image without
    ``system_info`` plans Debian's built-in default user, as the boot creates it (no false 'no default user')."""
    root = target
    root.write("/etc/os-release", "ID=debian\nVERSION_ID=12\n")
    root.write("/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
    user_data = tmp_path / "user-data"
    user_data.write_text("#cloud-config\nusers: [default]\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "plan", "--root", root.top, "--user-data",
                           str(user_data), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["root"] == root.top
    assert [(u["name"], u["action"]) for u in plan["users"]] == [("debian", "create")]
    assert not any("no default user" in p for p in plan["problems"]), plan["problems"]
    missing = subprocess.run([sys.executable, "-m", "cloudseed", "plan", "--root", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no such directory" in missing.stderr and "Traceback" not in missing.stderr
