"""The repository harness itself: real apt in a debootstrapped root accepts the signed loopback repository."""

from __future__ import annotations

import os
import time

import pytest

from tests.agent.packages import repo


def test_signed_repository_is_accepted_by_real_apt(apt_repo, debian_root):
    apt_repo.add("hello-cs", "1.0")
    apt_repo.add("needs-hello", "2.0", depends=["hello-cs (>= 1.0)"], reboot_required=True)
    apt_repo.publish()
    dist = os.path.join(apt_repo.www, "dists", "stable")
    assert {"InRelease", "Release", "Release.gpg"} <= set(os.listdir(dist))
    assert apt_repo.key_armoured.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert apt_repo.key_binary[:1] != b"-"
    with repo.serve_repository(apt_repo) as served, repo.chroot_mounts(debian_root.top):
        apt_repo.configure_root(debian_root, served.url)
        update = debian_root.run(["apt-get", "update"], check=False)
        assert update.returncode == 0, update.stdout + update.stderr
        assert "NO_PUBKEY" not in update.stderr
        assert any(path.endswith("InRelease") for path in served.requests)
        install = debian_root.run(["apt-get", "install", "-y", "needs-hello"], check=False,
                                  env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        assert install.returncode == 0, install.stdout + install.stderr
    assert debian_root.read_text("/usr/share/hello-cs/version") == "1.0\n"
    assert debian_root.exists("/var/run/reboot-required")
    assert not os.path.ismount(os.path.join(debian_root.top, "proc"))


def test_unsigned_key_is_refused(apt_repo, debian_root, tmp_path):
    """A repository signed by another key: apt refuses it (the signature really is checked)."""
    apt_repo.add("hello-cs", "1.0")
    apt_repo.publish()
    other = repo.GpgKey(str(tmp_path / "other"))
    try:
        with repo.serve_repository(apt_repo) as served, repo.chroot_mounts(debian_root.top):
            apt_repo.configure_root(debian_root, served.url)
            debian_root.write("/etc/apt/keyrings/cloudseed-test.gpg", other.binary)
            update = debian_root.run(["apt-get", "update"], check=False)
    finally:
        other.close()
    assert "NO_PUBKEY" in update.stdout + update.stderr


def test_lock_holder_and_silent_server(tmp_path):
    import fcntl

    os.makedirs(tmp_path / "var/lib/dpkg")
    with repo.hold_dpkg_lock(str(tmp_path)):
        fd = os.open(tmp_path / "var/lib/dpkg/lock-frontend", os.O_RDWR)
        try:
            with pytest.raises(OSError):
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    import socket

    with repo.silent_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.settimeout(0.5)
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            started = time.monotonic()
            try:
                data = conn.recv(10)
            except socket.timeout:
                data = None
            assert data is None and time.monotonic() - started >= 0.4
