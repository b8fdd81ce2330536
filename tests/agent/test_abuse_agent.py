"""The agent under hostile user-data: each finding of the adversarial review, replayed.

Bounded in time and memory: bombs are small on disk and must be stopped early, not survived.
"""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "modules"))

from module_support import run  # noqa: E402  (after the sys.path line)


def _gzip_bomb(expanded: int) -> bytes:
    """A gzip member of ``expanded`` zero bytes, written in chunks (a few KiB per 10 MiB)."""
    import zlib

    stream = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = bytearray()
    block = bytes(1024 * 1024)
    for _ in range(expanded // len(block)):
        out += stream.compress(block)
    return bytes(out + stream.flush())


def test_one_bad_write_files_entry_never_costs_the_others(target):
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    bomb = base64.b64encode(_gzip_bomb(200 * 1024 * 1024)).decode()
    entries = [
        {"path": "/etc/first", "content": "one\n"},
        {"path": "/etc/bad\0name", "content": "x"},
        {"path": "/etc/bomb", "encoding": "gz+b64", "content": bomb},
        {"path": "/etc/mode", "content": "x", "permissions": "hunter2-secret"},
        {"path": "/root/.ssh/id_ed25519", "content": key, "permissions": "0600"},
    ]
    result, _ = run(target, "write_files", {"write_files": entries}, stage="init")
    assert result.status == "failed"
    assert target.read_text("/etc/first") == "one\n"
    assert target.read_text("/root/.ssh/id_ed25519") == key          # the entry after every bad one
    assert not target.exists("/etc/bomb") and not target.exists("/etc/mode")
    assert "write_files[1].path: contains a NUL byte" in result.reason
    assert "write_files[2] (/etc/bomb).content: expands to more than 64 MiB" in result.reason
    assert "write_files[3] (/etc/mode).permissions: not an octal mode" in result.reason
    assert "hunter2" not in result.reason                             # messages name keys, never values


def test_gzip_bomb_in_write_files_is_stopped_with_little_memory(target, tmp_path):
    """The decompression stops at the limit: peak memory stays far below the bomb's size."""
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(_gzip_bomb(1024 * 1024 * 1024))    # 1 GiB of zeros, about 1 MiB on disk
    code = f"""
from cloudseed.agent.modules.write_files import EntryError, decode_content
data = open({str(bomb)!r}, 'rb').read()
try:
    decode_content(data, 'gzip', 'write_files[0]')
except EntryError as e:
    print(e)
print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    message, peak_kib = proc.stdout.splitlines()
    assert message == "write_files[0].content: expands to more than 64 MiB"
    assert int(peak_kib) < 300 * 1024, f"peak {int(peak_kib) // 1024} MiB (VmHWM of the decoding process)"


def test_multi_member_gzip_is_read_whole(target):
    data = gzip.compress(b"first\n") + gzip.compress(b"second\n")
    result, _ = run(target, "write_files", {"write_files": [
        {"path": "/etc/two", "encoding": "gz+b64", "content": base64.b64encode(data).decode()}]}, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/two") == "first\nsecond\n"
