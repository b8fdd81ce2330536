"""The RPM spec builds with ``rpmbuild -bb`` (Debian's rpm; ``--nodeps``: its rpm database is empty)
into a noarch package that swaps cloud-init and holds the agent, units, generator and commands.

Its scriptlets run for real: ``rpm --root`` installs it over a stand-in cloud-init package (built
here, versions 22.1 and 23.4) in a temporary root whose ``/bin/sh`` is a static busybox, and the
``status`` exit codes it writes follow the cloud-init it replaced, as the Debian package's do."""

from __future__ import annotations

import glob
import os
import shutil
import stat
import subprocess
import tarfile

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(PROJECT, "packaging", "rpm", "cloudseed.spec")


def _query(rpm: str, *what: str) -> list[str]:
    return subprocess.run(["rpm", "-qp", *what, rpm], capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> str:
    """cloudseed's RPM, built once for this file."""
    if not shutil.which("rpmbuild"):
        pytest.skip("needs rpm (scripts/setup.sh)")
    from cloudseed import __version__

    tmp_path = tmp_path_factory.mktemp("rpm")
    sources = tmp_path / "SOURCES"
    sources.mkdir()
    top = f"cloudseed-{__version__}"
    with tarfile.open(sources / f"{top}.tar.gz", "w:gz") as tar:
        for name in ("cloudseed", "packaging", "pyproject.toml", "README.md"):
            tar.add(os.path.join(PROJECT, name), f"{top}/{name}",
                    filter=lambda info: None if "__pycache__" in info.name else info)
    build = subprocess.run(["rpmbuild", "--define", f"_topdir {tmp_path}", "--nodeps", "-bb", SPEC],
                           capture_output=True, text=True, env={**os.environ, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert build.returncode == 0, build.stderr[-3000:]
    rpms = glob.glob(str(tmp_path / "RPMS" / "noarch" / "cloudseed-*.noarch.rpm"))
    assert len(rpms) == 1
    return rpms[0]


def test_rpmbuild_builds_the_spec(package):
    rpm = package
    assert any(p.startswith("cloud-init") for p in _query(rpm, "--provides"))
    assert _query(rpm, "--conflicts") == ["cloud-init"]
    assert any(o.startswith("cloud-init") for o in _query(rpm, "--obsoletes"))
    requires = _query(rpm, "--requires")
    assert {"python3-pyyaml", "python3-jinja2"} <= set(requires)
    files = set(_query(rpm, "-l"))
    for path in ("/usr/bin/cloud-init", "/usr/bin/cloud-id", "/usr/bin/cloud-init-per", "/usr/bin/cloudseed",
                 "/usr/lib/systemd/system/cloudseed-local.service", "/usr/lib/systemd/system/cloudseed.target",
                 "/usr/lib/systemd/system/cloudseed-before-sshd.target",
                 "/usr/lib/systemd/system/cloudseed-hold-sshd.service",
                 "/usr/lib/systemd/system-generators/cloudseed-generator", "/usr/lib/cloudseed/cloudseed-stage",
                 "/usr/lib/udev/rules.d/66-cloudseed-azure-ephemeral.rules"):
        assert path in files, path
    assert any(f.endswith("/site-packages/cloudseed/cli.py") for f in files)
    # the launchers are the ones `cloudseed install --cloud-init-compat` writes
    from cloudseed.commands.cloud_init import LAUNCHERS, launcher

    for name in LAUNCHERS:
        with open(os.path.join(PROJECT, "packaging", "bin", name)) as f:
            assert f.read() == launcher(name), name


STAND_IN = """Name: cloud-init
Version: %{version_of_test}
Release: 1
Summary: a stand-in for the distribution's cloud-init
License: MIT
BuildArch: noarch
%description
A stand-in with cloud-init's name and version and one file.
%install
mkdir -p %{buildroot}/etc/cloud
echo 'datasource_list: [NoCloud, None]' > %{buildroot}/etc/cloud/cloud.cfg
%files
/etc/cloud/cloud.cfg
"""
EXIT_CODES = "/etc/cloudseed/cloud.cfg.d/05-status-exit-codes.cfg"


def _rpm(root, *argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["rpm", "--root", root.top, "--dbpath", "/var/lib/rpm", *argv], capture_output=True,
                          text=True, env={**os.environ, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert done.returncode == 0, done.stderr
    return done


def _stand_in(tmp_path, version: str) -> str:
    """The stand-in cloud-init of ``version``, built with rpmbuild: its path."""
    spec = tmp_path / "cloud-init.spec"
    spec.write_text(STAND_IN)
    subprocess.run(["rpmbuild", "--define", f"_topdir {tmp_path}", "--define", f"version_of_test {version}", "-bb",
                    str(spec)], check=True, capture_output=True)
    return glob.glob(str(tmp_path / "RPMS" / "noarch" / "cloud-init-*.rpm"))[0]


@pytest.fixture
def rpm_root(shell_target):
    """A temporary root with busybox's /bin/sh and /dev/null for the scriptlets, and an empty rpm database."""
    os.makedirs(shell_target.path("/dev"))
    os.mknod(shell_target.path("/dev/null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    _rpm(shell_target, "--initdb")
    return shell_target


@pytest.mark.parametrize(("replaced", "expected"), [("22.1", "22.4"), ("23.4", "23.4"), (None, "23.4")])
def test_the_rpm_writes_the_exit_codes_of_the_cloud_init_it_replaces(package, rpm_root, tmp_path, replaced, expected):
    root = rpm_root
    if replaced:
        _rpm(root, "--nodeps", "-i", _stand_in(tmp_path, replaced))
    _rpm(root, "--nodeps", "-U", package)
    assert _rpm(root, "-qa").stdout.split() == [os.path.basename(package)[:-len(".rpm")]]  # cloud-init obsoleted
    written = root.read_text(EXIT_CODES)
    assert written.startswith("# written by the cloudseed package") and f'status_exit_codes: "{expected}"' in written
    from cloudseed.commands._status_contract import rule

    assert rule(root, "") == expected  # what `status` reads
    _rpm(root, "--nodeps", "-e", "cloudseed")
    assert not root.exists(EXIT_CODES)  # the package's own file goes with it


def test_the_rpm_keeps_an_administrators_exit_codes(package, rpm_root, tmp_path):
    root = rpm_root
    root.write(EXIT_CODES, 'status_exit_codes: "23.4"  # our builds want 2 for degraded\n')
    _rpm(root, "--nodeps", "-i", _stand_in(tmp_path, "22.1"))
    _rpm(root, "--nodeps", "-U", package)
    assert root.read_text(EXIT_CODES) == 'status_exit_codes: "23.4"  # our builds want 2 for degraded\n'
    _rpm(root, "--nodeps", "-e", "cloudseed")
    assert root.exists(EXIT_CODES)
