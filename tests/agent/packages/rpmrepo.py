"""A real rpm repository for the RHEL-family tests, and a root where the real dnf runs.

``RpmRepository(workdir)`` builds small noarch rpms with ``rpmbuild`` (``add(name, version)``:
installs ``/usr/share/<name>/version``) and indexes them with ``createrepo_c``
(``publish()``); serve ``www`` with ``repo.serve``. ``dnf_root(destination)`` gives a private copy
of the debootstrapped bookworm tree with Debian's ``dnf`` and ``rpm`` installed inside (from
Debian's archive, once, cached as a tarball beside the identity tree) and an os-release saying
Rocky Linux 9: dnf runs chrooted in it as it would in a RHEL image; the packages go into that
root's own rpm database.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile

ROCKY_OS_RELEASE = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'
DNF_PACKAGES = ("dnf", "rpm")


class RpmRepository:
    def __init__(self, workdir: str):
        self.workdir = workdir
        self.www = os.path.join(workdir, "www")
        self.top = os.path.join(workdir, "rpmbuild")
        os.makedirs(self.www, exist_ok=True)

    def add(self, name: str, version: str, release: str = "1") -> str:
        spec = os.path.join(self.workdir, f"{name}-{version}.spec")
        with open(spec, "w") as handle:
            handle.write(f"Name: {name}\nVersion: {version}\nRelease: {release}\nSummary: cloudseed test package\n"
                         "License: MIT\nBuildArch: noarch\n%description\ntest package built by the test suite\n"
                         f"%install\nmkdir -p %{{buildroot}}/usr/share/{name}\n"
                         f"echo {version} > %{{buildroot}}/usr/share/{name}/version\n"
                         f"%files\n/usr/share/{name}/version\n")
        proc = subprocess.run(["rpmbuild", "--define", f"_topdir {self.top}", "-bb", spec],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"rpmbuild {name}-{version} failed: {proc.stderr[-2000:]}")
        built = os.path.join(self.top, "RPMS", "noarch", f"{name}-{version}-{release}.noarch.rpm")
        shutil.copy2(built, self.www)
        return built

    def publish(self) -> None:
        subprocess.run(["createrepo_c", "-q", "--update", self.www], check=True, capture_output=True)

    def repo_file(self, url: str, name: str = "cloudseed-test") -> str:
        return f"[{name}]\nname={name}\nbaseurl={url}/\nenabled=1\ngpgcheck=0\nmetadata_expire=0\n"


def _tarball() -> str:
    from tests.agent.identity import debian_chroot

    base = os.path.basename(debian_chroot.tarball_path())
    return os.path.join(debian_chroot.cache_dir(), f"dnf-{'-'.join(DNF_PACKAGES)}-{base}")


def build_dnf_tarball() -> str:
    """The cached tree with dnf inside, built from the identity tree when missing (~15 s, once)."""
    from tests.agent.identity import debian_chroot
    from tests.agent.packages import repo

    tarball = _tarball()
    if os.path.exists(tarball):
        return tarball
    with open(tarball + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(tarball):
            return tarball
        tree = tarball + ".tree"
        shutil.rmtree(tree, ignore_errors=True)
        debian_chroot.unpack(tree)
        try:
            shutil.copy2("/etc/resolv.conf", os.path.join(tree, "etc/resolv.conf"))
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", PATH="/usr/sbin:/usr/bin:/sbin:/bin")
            with repo.chroot_mounts(tree):
                proc = subprocess.run(["chroot", tree, "sh", "-c", "apt-get update -qq && apt-get install -y -qq "
                                       f"--no-install-recommends {' '.join(DNF_PACKAGES)} && apt-get clean"],
                                      capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"installing dnf into the tree failed: {(proc.stdout + proc.stderr)[-2000:]}")
            shutil.rmtree(os.path.join(tree, "var/lib/apt/lists"), ignore_errors=True)
            partial = tarball + ".partial"
            with tarfile.open(partial, "w") as tar:
                tar.add(tree, arcname=".")
            os.rename(partial, tarball)
        finally:
            shutil.rmtree(tree, ignore_errors=True)
    return tarball


def dnf_root(destination: str) -> str:
    """A fresh copy of the dnf tree in ``destination``, made into Rocky Linux 9."""
    tarball = build_dnf_tarball()
    os.makedirs(destination, exist_ok=True)
    subprocess.run(["tar", "-xpf", tarball, "-C", destination, "--numeric-owner"], check=True)
    with open(os.path.join(destination, "etc/os-release"), "w") as handle:
        handle.write(ROCKY_OS_RELEASE)
    os.makedirs(os.path.join(destination, "etc/yum.repos.d"), exist_ok=True)
    return destination
