"""The Debian package: built by ``dpkg-buildpackage -us -uc -b``, lintian clean of errors, and swapped
for Debian's cloud-init in a debootstrapped bookworm root, then purged without leaving a file of ours.

Installing into the chroot uses ``dpkg -i --force-depends``: the tree has no python3 and fetching
it from the mirror at every run is slow; the installed package's code is then run with this
machine's Debian python3 against the chroot (``--root``), so the files the .deb put there are
the ones that run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

UNITS = ("cloudseed-local.service", "cloudseed-network.service", "cloudseed-config.service",
         "cloudseed-final.service")
SKIP_TREES = ("/proc", "/sys", "/dev", "/var/lib/dpkg", "/var/cache/debconf", "/var/log/dpkg.log",
              "/var/log/apt", "/var/cache/ldconfig", "/var/log/alternatives.log")


def test_lintian_reports_no_errors(deb_package):
    if not shutil.which("lintian"):
        pytest.skip("needs lintian (scripts/setup.sh)")
    out = subprocess.run(["lintian", "--no-tag-display-limit", deb_package], capture_output=True, text=True)
    errors = [line for line in out.stdout.splitlines() if line.startswith("E:")]
    assert not errors, out.stdout
    assert out.returncode in (0, 1), out.stderr  # 1 with warnings only in some lintian versions


def test_package_declares_the_swap_and_its_dependencies(deb_package):
    fields = subprocess.run(["dpkg-deb", "-f", deb_package, "Depends", "Provides", "Conflicts", "Replaces"],
                            capture_output=True, text=True, check=True).stdout
    assert "Provides: cloud-init" in fields and "Conflicts: cloud-init" in fields and "Replaces: cloud-init" in fields
    depends = fields.split("Depends:", 1)[1].splitlines()[0]
    assert {d.strip().split(" ")[0] for d in depends.split(",")} >= {"python3", "python3-yaml", "python3-jinja2"}
    assert "pycdlib" not in depends and "httptools" not in depends
    listing = subprocess.run(["dpkg-deb", "-c", deb_package], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/bin/cloud-init", "./usr/bin/cloud-id", "./usr/bin/cloud-init-per", "./usr/bin/cloudseed",
                 "./lib/systemd/system-generators/cloudseed-generator", "./usr/lib/cloudseed/cloudseed-stage",
                 "./usr/lib/python3/dist-packages/cloudseed/cli.py", *(f"./lib/systemd/system/{u}" for u in UNITS),
                 "./lib/systemd/system/cloudseed-before-sshd.target",
                 "./lib/systemd/system/cloudseed-hold-sshd.service",
                 "./lib/udev/rules.d/66-cloudseed-azure-ephemeral.rules"):  # cloud-init's Azure disk links go
        assert path in listing, path


def files(root) -> set[str]:
    found = set()
    for directory, dirnames, filenames in os.walk(root.top):
        inner = root.inner(directory)
        dirnames[:] = [d for d in dirnames if not f"{inner.rstrip('/')}/{d}".startswith(SKIP_TREES)]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(directory, d))]:
            path = f"{inner.rstrip('/')}/{name}"
            if not path.startswith(SKIP_TREES):
                found.add(path)
    return found


def dpkg(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["chroot", root.top, "dpkg", *args], capture_output=True, text=True,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
                               "LC_ALL": "C"})


def state(root, package: str) -> str:
    out = subprocess.run(["chroot", root.top, "dpkg-query", "-W", "-f=${Status}", package], capture_output=True,
                         text=True)
    return out.stdout.strip() or "not-installed"


def run_installed(root, program: str, *args: str) -> subprocess.CompletedProcess:
    """A program the package installed, with Debian's python3 and the package's files from the chroot."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": root.path("/usr/lib/python3/dist-packages"),
           "LC_ALL": "C.UTF-8"}
    return subprocess.run(["/usr/bin/python3", root.path(program), *args], capture_output=True, text=True, env=env)


@pytest.mark.root
def test_dpkg_swaps_cloud_init_keeps_its_settings_and_purge_leaves_nothing(debian_root, deb_package,
                                                                          cloud_init_deb):
    root = debian_root
    for path in (deb_package, cloud_init_deb):
        shutil.copy2(path, root.path("/tmp/"))
    root.write("/etc/cloud/cloud.cfg.d/99-image.cfg", "datasource_list: [NoCloud, None]\n")
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-deb\nlocal-hostname: swapped\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\n{}\n")
    # the agent's boot below runs no module that changes the image: only its own state
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", "network: {config: disabled}\ncloud_init_modules: []\n"
               "cloud_config_modules: []\ncloud_final_modules: []\n")

    installed = dpkg(root, "-i", "--force-depends", f"/tmp/{os.path.basename(cloud_init_deb)}")
    assert state(root, "cloud-init") == "install ok installed", installed.stdout + installed.stderr
    before = files(root)
    assert "/usr/bin/cloud-init" in before and "/etc/cloud/cloud.cfg" in before

    swap = dpkg(root, "-i", "--force-depends", f"/tmp/{os.path.basename(deb_package)}")
    assert swap.returncode == 0, swap.stdout + swap.stderr
    assert state(root, "cloudseed") == "install ok installed"
    assert state(root, "cloud-init").endswith(("config-files", "not-installed")), swap.stdout  # removed
    # the image's settings and cloud-init's configuration files stay; the commands are ours now
    assert root.read_text("/etc/cloud/cloud.cfg.d/99-image.cfg") == "datasource_list: [NoCloud, None]\n"
    assert root.exists("/etc/cloud/cloud.cfg")
    assert "cloudseed" in root.read_text("/usr/bin/cloud-init")
    assert not root.exists("/usr/lib/python3/dist-packages/cloudinit/__init__.py")
    # units enabled (into cloudseed.target, which the generator links at boot), generator in place
    for unit in UNITS:
        link = f"/etc/systemd/system/cloudseed.target.wants/{unit}"
        assert root.islink(link), link
    assert os.access(root.path("/lib/systemd/system-generators/cloudseed-generator"), os.X_OK)
    # never run at install time
    assert not root.exists("/var/lib/cloudseed") and not root.exists("/run/cloudseed")
    # status exit codes chosen to match what it replaced: Debian 12's cloud-init 22.4 (0 when degraded)
    assert 'status_exit_codes: "22.4"' in root.read_text("/etc/cloudseed/cloud.cfg.d/05-status-exit-codes.cfg")

    # the installed files work: a boot of the chroot's image, then cloud-init's command and paths
    boot = run_installed(root, "/usr/bin/cloudseed", "--root", root.top, "boot")
    assert boot.returncode == 0, boot.stderr
    status = run_installed(root, "/usr/bin/cloud-init", "--root", root.top, "status", "--format", "json")
    assert status.returncode == 0, status  # 22.4's rule: done, with or without warnings
    assert json.loads(status.stdout)["status"] == "done", status.stdout
    assert root.islink("/var/lib/cloud/instance") and root.exists("/var/lib/cloud/instance/boot-finished")
    assert root.read_text("/var/lib/cloud/data/instance-id").strip() == "iid-deb"

    purge = dpkg(root, "--purge", "cloudseed")
    assert purge.returncode == 0, purge.stdout + purge.stderr
    root.remove(f"/tmp/{os.path.basename(deb_package)}")
    after = files(root)
    # cloud-init's /etc/cloud/cloud.cfg.d/05_logging.cfg (a conffile, kept as the image's) sends the output to
    # /var/log/cloud-init-output.log: the agent honoured it, and that log is the image's, as after
    # cloud-init's own purge; every other file the package or the agent made is gone
    configured_log = "/var/log/cloud-init-output.log"
    assert configured_log in root.read_text("/etc/cloud/cloud.cfg.d/05_logging.cfg") and not root.islink(configured_log)
    assert not after - before - {configured_log}, sorted(after - before)
    left = sorted(p for p in after if "cloudseed" in p and not p.startswith("/etc/cloudseed/cloud.cfg.d/00-test"))
    assert not left, left
    # what is gone is cloud-init's own files (removed by the swap), never the image's
    assert {"/etc/cloud/cloud.cfg.d/99-image.cfg", "/var/lib/cloud/seed/nocloud/meta-data"} <= after
    assert all(not p.startswith("/etc/cloud/") for p in before - after), sorted(before - after)
