"""A real, signed apt repository for tests: small .deb packages, indexed, signed, served on loopback.

``Repository(workdir)`` builds packages with ``dpkg-deb`` (``add(name, version, ...)``), indexes
them with ``apt-ftparchive`` (``publish()``: Packages, Packages.gz, Release, InRelease and
Release.gpg signed with a throw-away gpg key made for this repository) and exports the public key
armoured (``key_armoured``) and binary (``key_binary``). ``serve()`` runs a threaded HTTP server on
127.0.0.1 (random port, bounded lifetime) counting requests; apt in a chroot reaches it because a
chroot shares the host's network namespace. ``silent_server()`` accepts connections and never
answers (a repository that does not answer). ``chroot_mounts(root)`` mounts /proc, /dev and /dev/pts into a
chroot for apt and dpkg and always unmounts them.

Layout: ``<url> <suite> <component>`` with ``suite="stable"``, ``component="main"``; packages
are ``Architecture: all`` and indexed under the host's architecture (what apt asks for).
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Iterator

SUITE = "stable"
COMPONENT = "main"
REBOOT_FLAG = "/var/run/reboot-required"


def host_arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


@dataclass
class Package:
    """What one test package is: it installs ``/usr/share/<name>/version`` (and ``files``)."""

    name: str
    version: str
    depends: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path inside the system -> content
    reboot_required: bool = False  # postinst touches /var/run/reboot-required
    postinst: str = ""  # extra shell lines for postinst

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version}_all.deb"


def build_deb(package: Package, outdir: str) -> str:
    """Build ``package`` with dpkg-deb into ``outdir``; the .deb's path."""
    tree = tempfile.mkdtemp(prefix=f"deb-{package.name}-", dir=outdir)
    try:
        os.makedirs(os.path.join(tree, "DEBIAN"))
        files = {f"/usr/share/{package.name}/version": package.version + "\n", **package.files}
        for inner, content in files.items():
            host = os.path.join(tree, inner.lstrip("/"))
            os.makedirs(os.path.dirname(host), exist_ok=True)
            with open(host, "w") as handle:
                handle.write(content)
        control = [f"Package: {package.name}", f"Version: {package.version}", "Architecture: all",
                   "Maintainer: cloudseed tests <tests@example.invalid>", "Priority: optional",
                   "Section: misc"]
        if package.depends:
            control.append("Depends: " + ", ".join(package.depends))
        control.append(f"Description: cloudseed test package {package.name}\n test package built by the test suite")
        with open(os.path.join(tree, "DEBIAN", "control"), "w") as handle:
            handle.write("\n".join(control) + "\n")
        lines = []
        if package.reboot_required:
            lines.append(f"mkdir -p {os.path.dirname(REBOOT_FLAG)} && touch {REBOOT_FLAG}")
            lines.append(f"echo {package.name} >> {REBOOT_FLAG}.pkgs")
        if package.postinst:
            lines.append(package.postinst)
        if lines:
            script = os.path.join(tree, "DEBIAN", "postinst")
            with open(script, "w") as handle:
                handle.write("#!/bin/sh\nset -e\n" + "\n".join(lines) + "\nexit 0\n")
            os.chmod(script, 0o755)
        out = os.path.join(outdir, package.filename)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, out],
                       check=True, capture_output=True)
        return out
    finally:
        shutil.rmtree(tree, ignore_errors=True)


class GpgKey:
    """A throw-away signing key in its own GNUPGHOME (no passphrase, no agent left behind)."""

    def __init__(self, home: str, uid: str = "cloudseed test repository <repo@example.invalid>"):
        self.home = home
        os.makedirs(home, mode=0o700, exist_ok=True)
        self.uid = uid
        self._gpg("--quick-generate-key", "--passphrase", "", uid, "ed25519", "sign", "never")
        listing = self._gpg("--with-colons", "--list-secret-keys", capture=True)
        self.fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))

    def _gpg(self, *args: str, capture: bool = False, input: bytes | None = None) -> str:
        proc = subprocess.run(["gpg", "--homedir", self.home, "--batch", "--yes", "--pinentry-mode",
                               "loopback", *args], capture_output=True, input=input)
        if proc.returncode != 0:
            raise RuntimeError(f"gpg {' '.join(args[:2])} failed: {proc.stderr.decode(errors='replace')}")
        return proc.stdout.decode(errors="replace") if capture else ""

    @property
    def armoured(self) -> str:
        return self._gpg("--armor", "--export", self.fingerprint, capture=True)

    @property
    def binary(self) -> bytes:
        proc = subprocess.run(["gpg", "--homedir", self.home, "--batch", "--export", self.fingerprint],
                              capture_output=True, check=True)
        return proc.stdout

    def sign(self, release: str) -> None:
        directory = os.path.dirname(release)
        self._gpg("--local-user", self.fingerprint, "--clearsign", "--output",
                  os.path.join(directory, "InRelease"), release)
        self._gpg("--local-user", self.fingerprint, "--armor", "--detach-sign", "--output",
                  release + ".gpg", release)

    def close(self) -> None:
        subprocess.run(["gpgconf", "--homedir", self.home, "--kill", "all"], capture_output=True)


class Repository:
    """A signed apt repository under ``workdir`` (``workdir/www`` is what is served)."""

    def __init__(self, workdir: str, suite: str = SUITE, component: str = COMPONENT):
        self.workdir = workdir
        self.www = os.path.join(workdir, "www")
        self.suite = suite
        self.component = component
        self.arch = host_arch()
        self.pool = os.path.join(self.www, "pool", component)
        os.makedirs(self.pool, exist_ok=True)
        self.key = GpgKey(os.path.join(workdir, "gnupg"))
        self.packages: list[Package] = []

    # ------------------------------------------------------------------ content
    def add(self, name: str, version: str, depends: list[str] | None = None, reboot_required: bool = False,
            files: dict[str, str] | None = None, postinst: str = "") -> Package:
        """Build one package into the pool (published at the next ``publish()``)."""
        package = Package(name, version, list(depends or []), dict(files or {}), reboot_required, postinst)
        build_deb(package, self.pool)
        self.packages.append(package)
        return package

    def publish(self) -> None:
        """(Re)write the indexes and the signed Release of everything in the pool."""
        dist = os.path.join(self.www, "dists", self.suite)
        binary = os.path.join(dist, self.component, f"binary-{self.arch}")
        os.makedirs(binary, exist_ok=True)
        packages = subprocess.run(["apt-ftparchive", "packages", os.path.relpath(self.pool, self.www)],
                                  cwd=self.www, capture_output=True, text=True, check=True).stdout
        with open(os.path.join(binary, "Packages"), "w") as handle:
            handle.write(packages)
        subprocess.run(["gzip", "-9kf", os.path.join(binary, "Packages")], check=True)
        for name in ("Release", "InRelease", "Release.gpg"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(dist, name))
        release = subprocess.run(
            ["apt-ftparchive", "-o", f"APT::FTPArchive::Release::Suite={self.suite}",
             "-o", f"APT::FTPArchive::Release::Codename={self.suite}",
             "-o", "APT::FTPArchive::Release::Origin=cloudseed-tests",
             "-o", "APT::FTPArchive::Release::Label=cloudseed-tests",
             "-o", f"APT::FTPArchive::Release::Architectures={self.arch}",
             "-o", f"APT::FTPArchive::Release::Components={self.component}",
             "release", "."], cwd=dist, capture_output=True, text=True, check=True).stdout
        with open(os.path.join(dist, "Release"), "w") as handle:
            handle.write(release)
        self.key.sign(os.path.join(dist, "Release"))

    @property
    def key_armoured(self) -> str:
        return self.key.armoured

    @property
    def key_binary(self) -> bytes:
        return self.key.binary

    # ------------------------------------------------------------------ using it from a root
    def source_line(self, url: str, signed_by: str | None = None) -> str:
        option = f"[signed-by={signed_by}] " if signed_by else ""
        return f"deb {option}{url} {self.suite} {self.component}"

    def configure_root(self, root, url: str, name: str = "cloudseed-test") -> None:
        """Point the chroot ``root`` (a TargetRoot) at this repository only: keyring + one .list."""
        keyring = f"/etc/apt/keyrings/{name}.gpg"
        root.write(keyring, self.key_binary, mode=0o644)
        root.write(f"/etc/apt/sources.list.d/{name}.list", self.source_line(url, keyring) + "\n", mode=0o644)
        # the debootstrapped root points at deb.debian.org: tests talk to loopback only
        root.write("/etc/apt/sources.list", "", mode=0o644)

    def close(self) -> None:
        self.key.close()


# ---------------------------------------------------------------------- HTTP
class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, directory: str):
        self.requests: list[str] = []
        self.lock = threading.Lock()
        parent = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=directory, **kwargs)

            def do_GET(self):  # noqa: N802 (the http.server spelling)
                self._count()
                super().do_GET()

            def do_HEAD(self):  # noqa: N802
                self._count()
                super().do_HEAD()

            def _count(self) -> None:
                with parent.lock:
                    parent.requests.append(self.path)
                # always the whole file: a republish within the same second must not look unmodified
                del self.headers["If-Modified-Since"]

            def log_message(self, *args):  # quiet
                pass

        super().__init__(("127.0.0.1", 0), Handler)


class Served:
    """A running server: ``url``, ``port``, ``requests`` (paths asked for, in order)."""

    def __init__(self, server: _Server):
        self._server = server
        self.port = server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[str]:
        with self._server.lock:
            return list(self._server.requests)

    @property
    def count(self) -> int:
        return len(self.requests)


@contextlib.contextmanager
def serve(directory: str, lifetime: float = 600.0) -> Iterator[Served]:
    """Serve ``directory`` on 127.0.0.1 (random port) until the block ends or ``lifetime`` passes."""
    server = _Server(directory)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    timer = threading.Timer(lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        yield Served(server)
    finally:
        timer.cancel()
        server.shutdown()
        server.server_close()
        thread.join(5)


def serve_repository(repo: Repository, lifetime: float = 600.0):
    return serve(repo.www, lifetime)


@contextlib.contextmanager
def silent_server(lifetime: float = 120.0) -> Iterator[str]:
    """A loopback URL whose server accepts connections and never answers (closed at block end)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)  # read nothing, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    timer = threading.Timer(lifetime, stop.set)
    timer.daemon = True
    timer.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        timer.cancel()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()


# ---------------------------------------------------------------------- chroot mounts
@contextlib.contextmanager
def chroot_mounts(top: str) -> Iterator[None]:
    """/proc, /dev and /dev/pts mounted into the chroot at ``top`` for apt/dpkg; unmounted whatever happens."""
    mounted: list[str] = []
    try:
        for fstype, source, inner, options in (("proc", "proc", "proc", []),
                                               (None, "/dev", "dev", ["--bind"]),
                                               (None, "/dev/pts", "dev/pts", ["--bind"])):
            target = os.path.join(top, inner)
            os.makedirs(target, exist_ok=True)
            argv = ["mount", *options, source, target] if fstype is None else ["mount", "-t", fstype, source, target]
            subprocess.run(argv, check=True, capture_output=True)
            mounted.append(target)
        yield
    finally:
        for target in reversed(mounted):
            proc = subprocess.run(["umount", target], capture_output=True)
            if proc.returncode != 0:
                subprocess.run(["umount", "-l", target], capture_output=True)


# ---------------------------------------------------------------------- a held dpkg lock
@contextlib.contextmanager
def hold_dpkg_lock(top: str, name: str = "var/lib/dpkg/lock-frontend") -> Iterator[int]:
    """Hold the fcntl write lock apt/dpkg take on ``lock-frontend`` in a separate process; its pid."""
    path = os.path.join(top, name)
    ready_r, ready_w = os.pipe()
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({path!r}, os.O_RDWR | os.O_CREAT, 0o640)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            f"os.write({ready_w}, b'1')\n"
            "time.sleep(3600)\n")
    proc = subprocess.Popen(["python3", "-c", code], pass_fds=(ready_w,))
    os.close(ready_w)
    try:
        if os.read(ready_r, 1) != b"1":
            raise RuntimeError("the lock holder could not take the lock")
        yield proc.pid
    finally:
        os.close(ready_r)
        proc.kill()
        proc.wait(5)
