"""write_files: content, encodings, modes, owners and append, in a temporary root; bad entries named."""

from __future__ import annotations

import base64
import gzip
import os
import stat

from tests.agent.modules.module_support import run


def mode_of(root, inner: str) -> int:
    return stat.S_IMODE(os.stat(root.path(inner)).st_mode)


def test_files_are_written_with_their_mode_and_owner(target):
    payload = b"\x00\x01binary\xff"
    cfg = {"write_files": [
        {"path": "/etc/app/app.conf", "content": "listen = 8080\n", "permissions": "0640", "owner": "nobody:nogroup"},
        {"path": "/usr/local/bin/blob", "encoding": "b64", "content": base64.b64encode(payload).decode(),
         "permissions": 0o755},
        {"path": "/etc/app/zipped", "encoding": "gz+b64",
         "content": base64.b64encode(gzip.compress(b"unzipped\n")).decode()},
        {"path": "/etc/app/later", "content": "deferred", "defer": True},
    ]}
    result, _ = run(target, "write_files", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/app/app.conf") == "listen = 8080\n"
    assert mode_of(target, "/etc/app/app.conf") == 0o640
    info = os.stat(target.path("/etc/app/app.conf"))
    assert (info.st_uid, info.st_gid) == (65534, 65534)
    assert target.read_bytes("/usr/local/bin/blob") == payload and mode_of(target, "/usr/local/bin/blob") == 0o755
    assert target.read_text("/etc/app/zipped") == "unzipped\n" and mode_of(target, "/etc/app/zipped") == 0o644
    assert not target.exists("/etc/app/later")  # written by write_files_deferred in the final stage


def test_append_keeps_what_is_there(target):
    target.write("/etc/motd", "Welcome\n", mode=0o644)
    result, _ = run(target, "write_files", {"write_files": [{"path": "/etc/motd", "content": "Managed\n",
                                                               "append": True}]}, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/motd") == "Welcome\nManaged\n"


def test_bad_entries_are_named_and_the_good_ones_written(target):
    cfg = {"write_files": [
        {"path": "relative/path", "content": "x"},
        {"path": "/etc/ok", "content": "fine\n"},
        {"path": "/etc/bad-b64", "encoding": "b64", "content": "abc"},  # bad padding
        {"path": "/etc/bad-mode", "content": "x", "permissions": "rw-r--r--"},
        {"path": "/etc/bad-owner", "content": "x", "owner": "nosuchuser"},
        "not a mapping",
    ]}
    result, _ = run(target, "write_files", cfg, stage="init")
    assert result.status == "failed"
    assert target.read_text("/etc/ok") == "fine\n"
    reason = result.reason
    assert "write_files[0] (relative/path).path: must be absolute" in reason
    assert "write_files[2] (/etc/bad-b64).content: not valid base64" in reason
    assert "write_files[3] (/etc/bad-mode).permissions: not an octal mode" in reason
    assert "write_files[4] (/etc/bad-owner)" in reason and "defer: true" in reason
    assert "write_files[5]: expected a mapping with a path" in reason
    for name in ("/etc/bad-b64", "/etc/bad-mode", "/etc/bad-owner"):
        assert not target.exists(name)
