"""``cloudseed serve`` after a plain install: its HTTP parser (httptools) is a main dependency, and
an install without it fails with one line naming what to install, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

PROJECT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HIDE = r"""
import sys


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "httptools":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Refuse())
from cloudseed.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_serve_without_httptools_says_what_to_install_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-c", HIDE, "serve", "--db", str(tmp_path / "server.db"),
                           "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=PROJECT))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text, text
    assert [line for line in text.splitlines() if "pip install httptools" in line], text
