"""PostgreSQL's driver is the one optional dependency: without it, ``--db postgresql://...`` is one
clear line naming what to install, from every command that opens a registry, never a traceback.

The driver is hidden from a real ``cloudseed`` process by an import hook (it is installed here).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
URL = "postgresql://cloudseed@/cloudseed?host=/nonexistent"
HIDE_PSYCOPG = """
import runpy, sys
class HidePsycopg:
    def find_spec(self, name, path=None, target=None):
        if name == "psycopg" or name.startswith(("psycopg.", "psycopg_")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, HidePsycopg())
sys.argv = ["cloudseed", *sys.argv[1:]]
runpy.run_module("cloudseed", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("args", [
    ["instances", "--db", URL, "list"],
    ["instances", "--db", URL, "add", "--id", "i-1", "--address", "10.0.0.5"],
    ["seed", "build", "--db", URL, "--instance", "i-1", "-o", "/tmp/cloudseed-never-written.iso"],
    ["serve", "--db", URL, "--listen", "127.0.0.1:0", "--access-log", ""],
], ids=["instances-list", "instances-add", "seed-build", "serve"])
def test_missing_driver_is_one_clear_line(args):
    proc = subprocess.run([sys.executable, "-c", HIDE_PSYCOPG, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "pip install 'cloudseed[postgres]'" in lines[0]
    assert not os.path.exists("/tmp/cloudseed-never-written.iso")
