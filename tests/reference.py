"""Debian's cloud-init 22.4 as an oracle for differential tests.

The package is fetched once with ``apt-get download``, unpacked with ``dpkg -x`` into the cache
(``$CLOUDSEED_CACHE`` or ``~/.cache/cloudseed``) and run with Debian's ``/usr/bin/python3``.
``reference_python(code)`` runs Python code with the reference importable; ``reference_cli(args)``
runs its ``cloud-init`` command.
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import tempfile

import pytest

CACHE = os.environ.get("CLOUDSEED_CACHE", os.path.expanduser("~/.cache/cloudseed"))
SYSTEM_PYTHON = "/usr/bin/python3"


@functools.cache
def reference_tree() -> str | None:
    """Directory where the reference is unpacked, fetching it on first use; None if unavailable."""
    target = os.path.join(CACHE, "reference")
    marker = os.path.join(target, "usr", "bin", "cloud-init")
    if os.path.exists(marker):
        return target
    if not os.path.exists(SYSTEM_PYTHON):
        return None
    os.makedirs(CACHE, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        os.chmod(tmp, 0o755)  # apt's sandbox user must be able to write here
        fetched = subprocess.run(["apt-get", "download", "cloud-init"], cwd=tmp,
                                 capture_output=True, text=True)
        debs = glob.glob(os.path.join(tmp, "cloud-init_*.deb"))
        if fetched.returncode != 0 or not debs:
            return None
        subprocess.run(["dpkg", "-x", debs[0], target], check=True)
    return target


def _env() -> dict[str, str]:
    tree = reference_tree()
    if tree is None:
        pytest.skip("Debian's cloud-init could not be fetched (apt-get download cloud-init)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = os.path.join(tree, "usr", "lib", "python3", "dist-packages")
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def reference_python(code: str, *args: str, input: str | bytes | None = None,
                     check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` with Debian's python3 and the reference importable."""
    proc = subprocess.run([SYSTEM_PYTHON, "-c", code, *args], env=_env(), input=input,
                          capture_output=True, timeout=timeout,
                          text=not isinstance(input, bytes))
    if check and proc.returncode != 0:
        raise AssertionError(f"reference failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def reference_cli(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the reference's ``cloud-init`` command line."""
    tree = reference_tree() or ""
    proc = subprocess.run([SYSTEM_PYTHON, os.path.join(tree, "usr", "bin", "cloud-init"), *args],
                          env=_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"reference cloud-init {' '.join(args)} failed:\n{proc.stderr}")
    return proc
