"""The RPM spec builds with ``rpmbuild -bb`` (Debian's rpm; ``--nodeps``: its rpm database is empty)
into a noarch package that swaps cloud-init and holds the agent, units, generator and commands."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tarfile

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(PROJECT, "packaging", "rpm", "cloudseed.spec")


def _query(rpm: str, *what: str) -> list[str]:
    return subprocess.run(["rpm", "-qp", *what, rpm], capture_output=True, text=True, check=True).stdout.splitlines()


def test_rpmbuild_builds_the_spec(tmp_path):
    if not shutil.which("rpmbuild"):
        pytest.skip("needs rpm (scripts/setup.sh)")
    from cloudseed import __version__

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
    rpm = rpms[0]
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
