"""metadata_access: in a network namespace of our own, with a metadata server really listening at
169.254.169.254, ``root-only`` makes a non-root process's connection fail while root still reads,
and ``open`` undoes it; nothing changes on an offline root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from cloudseed.agent.modules.metadata_access import METADATA_ADDRESSES, nft_script
from tests.agent.modules.module_support import run

GUEST_CODE = """
import sys
from cloudseed.agent.modules import ModuleContext
from cloudseed.agent.modules.metadata_access import handle
from cloudseed.agent.state import Paths
from cloudseed.core.root import TargetRoot
root = TargetRoot("/")
for _ in range(2):   # every boot runs it; twice in one boot is harmless
    handle(ModuleContext(root, Paths(root), {"metadata_access": sys.argv[1]}, "i-test", "final"))
"""
SERVER = ("import http.server as h\n"
          "class H(h.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        self.send_response(200); self.end_headers(); self.wfile.write(b'user-data secrets')\n"
          "    def log_message(self, *a): pass\n"
          "s = h.HTTPServer(('169.254.169.254', 80), H); print('ready', flush=True); s.serve_forever()\n")
PROBE = ("import urllib.request\n"
         "try:\n"
         "    print(urllib.request.urlopen('http://169.254.169.254/latest/user-data', timeout=3).read().decode())\n"
         "except Exception as e:\n"
         "    print('refused:', e)\n")


@pytest.fixture
def netns():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft") or not shutil.which("setpriv"):
        pytest.skip("needs root, iproute2, nftables and setpriv for a network namespace")
    name = f"cs-mdacc-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    server = None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", name, "addr", "add", "169.254.169.254/32", "dev", "lo"], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", SERVER],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"
        yield name
    finally:
        if server is not None:
            server.kill()
            server.wait()
            server.stdout.close()
        subprocess.run(["ip", "netns", "delete", name], check=False)


def _read(netns: str, as_root: bool) -> str:
    user = [] if as_root else ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    proc = subprocess.run(["ip", "netns", "exec", netns, *user, "/usr/bin/python3", "-c", PROBE],
                          capture_output=True, text=True, timeout=30, cwd="/")
    return proc.stdout.strip()


def _set(netns: str, mode: str) -> None:
    proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", GUEST_CODE, mode],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_root_only_refuses_other_users_and_root_still_reads(netns):
    assert _read(netns, as_root=False) == "user-data secrets"       # the hole: anyone reads it
    _set(netns, "root-only")
    started = time.monotonic()
    assert _read(netns, as_root=False).startswith("refused:")
    assert time.monotonic() - started < 3                           # rejected at once, not a timeout
    assert _read(netns, as_root=True) == "user-data secrets"
    listed = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "table", "inet", "cloudseed_metadata"],
                            capture_output=True, text=True, timeout=30)
    assert "meta skuid != 0" in listed.stdout or "skuid != 0" in listed.stdout, listed.stdout
    _set(netns, "open")
    assert _read(netns, as_root=False) == "user-data secrets"


def test_the_rule_names_every_clouds_address():
    script = nft_script(True, list(METADATA_ADDRESSES))
    for address in METADATA_ADDRESSES:
        assert address in script
    assert "meta skuid != 0 reject" in script
    assert nft_script(False, list(METADATA_ADDRESSES)).splitlines() == ["table inet cloudseed_metadata",
                                                                        "delete table inet cloudseed_metadata"]


def test_offline_root_changes_no_packet_filter(target):
    target.makedirs("/usr/sbin")
    target.write("/usr/sbin/nft", "#!/bin/sh\nexit 1\n", mode=0o755)   # it must not even be run
    result, _ = run(target, "metadata_access", {"metadata_access": "root-only"}, stage="final")
    assert result.status == "ok", result.reason


def test_a_bad_value_is_named(target):
    result, _ = run(target, "metadata_access", {"metadata_access": "nobody"}, stage="final")
    assert result.status == "failed" and "'nobody' is not one of open, root-only" in result.reason
