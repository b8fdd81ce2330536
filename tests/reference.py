"""Debian's cloud-init as an oracle for differential tests: 22.4 (Debian 12) and a newer release.

Two oracles, each fetched once, unpacked with ``dpkg -x`` into the cache (``$CLOUDSEED_CACHE`` or
``~/.cache/cloudseed``) and run with Debian's ``/usr/bin/python3`` (3.11 on Debian 12, which both
releases support; their Python dependencies are Debian 12's packages that ``scripts/setup.sh``
installs):

- ``OLD``: 22.4, the machine's own suite (``apt-get download cloud-init``), in ``reference/``;
- ``NEW``: the newest release Debian's archive carries, from unstable (``NEW_VERSION``, pinned so
  the corpora compare with one known release; when unstable has moved on, its newest, then
  trixie's), fetched with apt from a private sources list and lists under the cache, so the
  machine's apt configuration is untouched; in ``reference-new/``. ``$CLOUDSEED_REFERENCE_NEW_DEB``
  may name a local ``.deb`` instead.

``reference_python(code)``, ``reference_cli(args)`` and ``reference_tree()`` are the 22.4 oracle,
as before; each takes ``oracle=NEW`` for the newer one. A test chooses per test with the
``oracle`` fixture (``tests/conftest.py``) and ``@pytest.mark.oracle("new")``.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import os
import subprocess
import tempfile
from dataclasses import dataclass

import pytest

CACHE = os.environ.get("CLOUDSEED_CACHE", os.path.expanduser("~/.cache/cloudseed"))
SYSTEM_PYTHON = "/usr/bin/python3"

# the newer oracle's Debian version, and where it is looked for (newest suite first)
NEW_VERSION = "26.2-1"
NEW_SUITES = ("sid", "trixie")
_ARCHIVE = "http://deb.debian.org/debian"
_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def _apt_download_from(suites: tuple[str, ...], version: str, into: str) -> str | None:
    """``apt-get download cloud-init`` from ``suites`` of the archive; the .deb's path or None.

    A sources list, lists and cache of its own under ``into`` (the package's signature is checked
    against Debian's keyring as for any apt download); the pinned ``version`` first, else the
    newest those suites carry.
    """
    state = os.path.join(into, "apt")
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(state, sub), exist_ok=True)
    sources = os.path.join(state, "sources.list")
    with open(sources, "w") as f:
        for suite in suites:
            f.write(f"deb [signed-by={_KEYRING}] {_ARCHIVE} {suite} main\n")
    options = ["-o", f"Dir::Etc::sourcelist={sources}", "-o", "Dir::Etc::sourceparts=-",
               "-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::Cache={state}/cache",
               "-o", "APT::Get::List-Cleanup=0", "-o", "Debug::NoLocking=1"]
    if subprocess.run(["apt-get", *options, "-q", "update"], capture_output=True,
                      timeout=600).returncode != 0:
        return None
    for wanted in (f"cloud-init={version}", "cloud-init"):
        subprocess.run(["apt-get", *options, "-q", "download", wanted], cwd=into, capture_output=True,
                       timeout=600)
        debs = glob.glob(os.path.join(into, "cloud-init_*.deb"))
        if debs:
            return debs[0]
    return None


def _apt_download_here(into: str) -> str | None:
    subprocess.run(["apt-get", "download", "cloud-init"], cwd=into, capture_output=True, timeout=600)
    debs = glob.glob(os.path.join(into, "cloud-init_*.deb"))
    return debs[0] if debs else None


@dataclass(frozen=True)
class Oracle:
    """One cloud-init release unpacked in the cache."""

    label: str          # "22.4" or "new": what tests and messages call it
    directory: str      # under CACHE
    newer: bool         # fetched from the newer suites (else from the machine's own)

    @property
    def path(self) -> str:
        return os.path.join(CACHE, self.directory)

    def tree(self) -> str | None:
        """Directory where the release is unpacked, fetching it on first use; None if unavailable."""
        return _tree(self)

    def version(self) -> str:
        """The release's own version string (``cloudinit.version.__VERSION__``), e.g. ``26.2``."""
        return _version(self)

    def skip_unless_available(self) -> str:
        tree = self.tree()
        if tree is None:
            pytest.skip(f"Debian's cloud-init ({self.label}) could not be fetched from the archive")
        return tree

    def env(self) -> dict[str, str]:
        tree = self.skip_unless_available()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["PYTHONPATH"] = os.path.join(tree, "usr", "lib", "python3", "dist-packages")
        env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
        return env

    def python(self, code: str, *args: str, input: str | bytes | None = None, check: bool = True,
               timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``code`` with Debian's python3 and this release importable."""
        proc = subprocess.run([SYSTEM_PYTHON, "-c", code, *args], env=self.env(), input=input,
                              capture_output=True, timeout=timeout, text=not isinstance(input, bytes))
        if check and proc.returncode != 0:
            raise AssertionError(f"reference {self.label} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def cli(self, *args: str, check: bool = True, timeout: float = 120,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Run this release's ``cloud-init`` command line."""
        env = self.env()
        tree = self.tree() or ""
        proc = subprocess.run([SYSTEM_PYTHON, os.path.join(tree, "usr", "bin", "cloud-init"), *args],
                              env=env, capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"reference {self.label} cloud-init {' '.join(args)} failed:\n{proc.stderr}")
        return proc


OLD = Oracle("22.4", "reference", newer=False)
NEW = Oracle("new", "reference-new", newer=True)
ORACLES = {"22.4": OLD, "old": OLD, "new": NEW}


@functools.cache
def _tree(oracle: Oracle) -> str | None:
    target = oracle.path
    if os.path.exists(os.path.join(target, "usr", "bin", "cloud-init")):
        return target
    if not os.path.exists(SYSTEM_PYTHON):
        return None
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, f".{oracle.directory}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be fetching the same release
        if os.path.exists(os.path.join(target, "usr", "bin", "cloud-init")):
            return target
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            os.chmod(tmp, 0o755)  # apt's sandbox user must be able to write here
            local = os.environ.get("CLOUDSEED_REFERENCE_NEW_DEB") if oracle.newer else None
            if local:
                deb = local
            elif oracle.newer:
                deb = _apt_download_from(NEW_SUITES, NEW_VERSION, tmp)
            else:
                deb = _apt_download_here(tmp)
            if deb is None:
                return None
            unpacked = os.path.join(tmp, "tree")
            subprocess.run(["dpkg", "-x", deb, unpacked], check=True)
            os.rename(unpacked, target)
    return target


@functools.cache
def _version(oracle: Oracle) -> str:
    tree = oracle.skip_unless_available()
    package = os.path.join(tree, "usr", "lib", "python3", "dist-packages", "cloudinit")
    for name, prefix in (("meson_versions.py", "UPSTREAM_VERSION"), ("version.py", "__VERSION__")):
        try:
            with open(os.path.join(package, name)) as f:
                for line in f:
                    if line.startswith(prefix) and "=" in line:
                        return line.split("=", 1)[1].split("#", 1)[0].strip().strip("\"'")
        except OSError:
            continue
    return "unknown"


def oracle_named(name: str) -> Oracle:
    """The oracle a test asked for by name (``22.4``/``old`` or ``new``)."""
    try:
        return ORACLES[name]
    except KeyError:
        raise ValueError(f"no oracle {name!r}; known: {', '.join(ORACLES)}") from None


# ---- the 22.4 oracle, as every existing test uses it (``oracle=NEW`` for the newer one) ----

def reference_tree(oracle: Oracle = OLD) -> str | None:
    """Directory where the reference is unpacked, fetching it on first use; None if unavailable."""
    return oracle.tree()


def _env(oracle: Oracle = OLD) -> dict[str, str]:
    return oracle.env()


def reference_python(code: str, *args: str, input: str | bytes | None = None,
                     check: bool = True, timeout: float = 120,
                     oracle: Oracle = OLD) -> subprocess.CompletedProcess:
    """Run ``code`` with Debian's python3 and the reference importable."""
    return oracle.python(code, *args, input=input, check=check, timeout=timeout)


def reference_cli(*args: str, check: bool = True, timeout: float = 120,
                  oracle: Oracle = OLD) -> subprocess.CompletedProcess:
    """Run the reference's ``cloud-init`` command line."""
    return oracle.cli(*args, check=check, timeout=timeout)
