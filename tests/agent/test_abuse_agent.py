"""The agent under hostile user-data: each finding of the adversarial review, replayed.

Bounded in time and memory: bombs are small on disk and must be stopped early, not survived.
"""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
import sys

from tests.agent.modules.module_support import run


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


# ---------------------------------------------------------------- user-data expansion limits (16.10)
BILLION_LAUGHS = "#cloud-config\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


def test_yaml_alias_bomb_is_refused_before_it_is_built():
    from cloudseed.agent.userdata import process_userdata

    processed = process_userdata(BILLION_LAUGHS.encode())
    assert any("alias bomb" in e for e in processed.errors), processed.errors
    assert processed.cloud_config in ({}, None) or "i" not in processed.cloud_config


def test_yaml_alias_bomb_in_nocloud_meta_data_is_a_clear_error():
    import pytest

    from cloudseed.agent.config import ConfigFileError, load_yaml_mapping

    meta = "instance-id: i-1\n" + BILLION_LAUGHS.split("\n", 1)[1]
    with pytest.raises(ConfigFileError, match=r"meta-data: invalid YAML: aliases expand .* \(an alias bomb\?\)"):
        load_yaml_mapping(meta, "meta-data")


def test_reusing_anchors_normally_is_fine():
    from cloudseed.core.yaml_loading import load_yaml

    doc = "base: &base {shell: /bin/bash, groups: [adm]}\nusers:\n" + "".join(
        f"  - {{<<: *base, name: u{i}}}\n" for i in range(200))
    assert len(load_yaml(doc)["users"]) == 200


def test_total_size_of_all_parts_is_bounded():
    """Ten gzip parts of 10 MiB each (tiny on the wire): the parts past 64 MiB are skipped, named."""
    from email.mime.application import MIMEApplication
    from email.mime.multipart import MIMEMultipart

    from cloudseed.agent.userdata import process_userdata

    message = MIMEMultipart()
    for _ in range(10):
        message.attach(MIMEApplication(gzip.compress(b"#!/bin/sh\n" + b"#" * (10 * 1024 * 1024)), "x-gzip"))
    processed = process_userdata(message.as_bytes())
    assert len(processed.scripts) == 6
    assert sum(len(p.content) for p in processed.scripts) <= 64 * 1024 * 1024
    assert any("hold more than 64 MiB together; part 7 and every later part skipped" in e
               for e in processed.errors), processed.errors


def test_include_fan_out_is_bounded():
    """Each included document includes four more: at most 64 fetches happen, the rest are named."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cloudseed.agent.userdata import process_userdata

    hits = []

    class FanOut(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            port = self.server.server_address[1]
            body = "#include\n" + "".join(f"http://127.0.0.1:{port}{self.path}/{i}\n" for i in range(4))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), FanOut)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        processed = process_userdata(f"#include\nhttp://127.0.0.1:{server.server_address[1]}/r\n".encode(),
                                     fetch_timeout=5, fetch_retries=0)
    finally:
        server.shutdown()
    assert len(hits) == 64
    assert any("more than 64 includes in one user-data" in e for e in processed.errors)


# ---------------------------------------------------------------- secrets and the target root (16.8)
def test_file_include_stays_inside_the_target_root(target, tmp_path):
    """``#include /etc/shadow`` with --root reads the root's file, never the host's (CVE-2022-2084 class)."""
    from cloudseed.agent.userdata import process_userdata

    target.write("/etc/shadow", "#cloud-config\nhostname: from-the-root\n", mode=0o600)
    processed = process_userdata(b"#include\n/etc/shadow\nfile:///etc/passwd\n", root=target)
    assert processed.cloud_config == {"hostname": "from-the-root"}
    with open("/etc/shadow") as host_shadow:
        host_first_line = host_shadow.readline().split(":")[0]
    assert not any(host_first_line in e for e in processed.errors)
    # a symlink pointing out of the root is resolved inside it
    os.symlink("/etc/hostname", target.path("/etc/escape"))
    processed = process_userdata(b"#include\nfile:///etc/escape\n", root=target)
    assert processed.errors and "cannot read file:///etc/escape" in processed.errors[0]
    assert "inside" in processed.errors[0]


def test_boot_schema_warnings_name_keys_and_types_never_values():
    from cloudseed.agent.config.schema import validate_config

    cfg = {"chpasswd": {"expire": "hunter2-secret"}, "users": [{"name": "u", "passwd": 123456}],
           "ssh_pwauth": "hunter3", "timezone": 7}
    shown = " | ".join(str(p) for p in validate_config(cfg))
    hidden = " | ".join(str(p) for p in validate_config(cfg, show_values=False))
    assert "hunter2-secret" in shown                      # the user's own terminal sees what is wrong
    for secret in ("hunter2", "hunter3", "123456"):
        assert secret not in hidden, hidden
    assert "chpasswd.expire" in hidden and "a string value" in hidden


# ---------------------------------------------------------------- after a kill (16.11)
def test_temporaries_left_by_a_killed_writer_are_removed_and_never_block_a_write(target):
    import subprocess as sp

    dead = sp.Popen(["true"])
    dead.wait()                                    # a PID that no longer exists
    live = sp.Popen(["sleep", "30"])
    try:
        target.makedirs("/etc")
        leftovers = {
            f".hostname.cloudseed-{dead.pid}.tmp": False,   # a killed writer's: removed
            f".hostname.cloudseed-{os.getpid()}.tmp": False,  # this PID's from an earlier boot: removed
            f".hostname.cloudseed-{live.pid}.tmp": True,    # a live writer's: kept
        }
        for name in leftovers:
            with open(target.path(f"/etc/{name}"), "w") as handle:
                handle.write("half")
        target.write("/etc/hostname", "web1\n")
        assert target.read_text("/etc/hostname") == "web1\n"
        for name, kept in leftovers.items():
            assert os.path.exists(target.path(f"/etc/{name}")) == kept, name
    finally:
        live.kill()
        live.wait()


def test_a_temporary_whose_pid_is_now_someone_else_or_a_zombie_is_removed(target):
    """Seen in CI once: a kill's temporary outlived the next boot's write of the same host key,
    because its PID still answered. A PID started after the temporary, or a zombie, is not its writer."""
    import subprocess as sp
    import time
    from pathlib import Path

    zombie = sp.Popen(["true"])                     # exits, and stays unreaped until wait()
    reused = sp.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(") ")[2][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        target.makedirs("/etc/ssh")
        names = [f".ssh_host_ed25519_key.cloudseed-{pid}.tmp" for pid in (zombie.pid, reused.pid)]
        for name in names:
            with open(target.path(f"/etc/ssh/{name}"), "w") as handle:
                handle.write("half")
        old = time.time() - 120                    # written before the "reused" PID's process began
        os.utime(target.path(f"/etc/ssh/{names[1]}"), (old, old))
        target.write("/etc/ssh/ssh_host_ed25519_key", "key\n", mode=0o600)
        assert [n for n in names if os.path.exists(target.path(f"/etc/ssh/{n}"))] == []
    finally:
        reused.kill()
        reused.wait()
        zombie.wait()


def test_another_pid_namespaces_temporary_is_kept_while_its_writer_holds_it(target):
    """Its PID means nothing here: a temporary is another writer's while locked (or brand new), else stale."""
    import fcntl
    import time

    from cloudseed.core.root import writer_tag

    target.makedirs("/etc")
    ns = int(writer_tag().partition("-")[2] or 0) + 1          # a namespace that is not this one
    names = {"held": f".hostname.cloudseed-1-{ns}.tmp", "fresh": f".hostname.cloudseed-2-{ns}.tmp",
             "left": f".hostname.cloudseed-3-{ns}.tmp"}
    for key, name in names.items():
        with open(target.path(f"/etc/{name}"), "w") as handle:
            handle.write("half")
        if key != "fresh":
            old = time.time() - 60
            os.utime(target.path(f"/etc/{name}"), (old, old))
    with open(target.path(f"/etc/{names['held']}")) as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)                      # a live writer in its own namespace
        target.write("/etc/hostname", "web1\n")
        assert os.path.exists(target.path(f"/etc/{names['held']}"))
        assert os.path.exists(target.path(f"/etc/{names['fresh']}"))
        assert not os.path.exists(target.path(f"/etc/{names['left']}"))    # killed: nobody holds it
    target.write("/etc/hostname", "web2\n")
    assert not os.path.exists(target.path(f"/etc/{names['held']}"))      # its writer is gone now


def test_different_instance_ids_never_share_a_state_directory():
    from cloudseed.agent.state import safe_instance_id

    ids = ["i-123", "a/b", "a_b", "a%2Fb", ".x", "_x", "%2Ex", "..", ".", "", "/", "_", "a b", "a\0b",
           "x" * 300, "x" * 301, "iid-datasource-none", "i-0abc:eu-west-1"]
    names = [safe_instance_id(i) for i in ids]
    assert len(set(names)) == len(ids)
    for name in names:
        assert "/" not in name and "\0" not in name and not name.startswith(".") and 0 < len(name) <= 255
    assert safe_instance_id("i-0123456789abcdef0") == "i-0123456789abcdef0"   # plain ids as cloud-init names them


def test_a_killed_stage_is_an_error_in_the_final_status_not_a_silent_done(target):
    from cloudseed.agent.state import Paths
    from cloudseed.agent.state.status import StatusRecorder

    paths = Paths(target)
    StatusRecorder(paths).start("network")            # ... and the process is killed here
    later = StatusRecorder(paths)                      # the config stage, a new process
    later.start("config")
    later.finish("config", [], [], [], "NoCloud")
    final = StatusRecorder(paths)
    final.start("final")
    final.finish("final", [], [], [], "NoCloud")
    import json

    result = json.loads(target.read_text(paths.result_file))
    assert result["v1"]["errors"] == ["the network stage did not finish: its process ended before recording a "
                                      "result (killed, or the machine lost power?)"]


def test_dhcp_reply_with_an_empty_message_type_is_ignored_not_a_crash():
    """Found by fuzzing (tests/fuzz/fuzz_agent.py dhcp): option 53 of length 0 raised IndexError."""
    import socket
    import struct

    from cloudseed.agent import ephemeral

    xid = 7
    dhcp = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 2, 1, 6, 0, xid, 0, 0, bytes(4), socket.inet_aton("10.0.0.5"),
                       bytes(4), bytes(4), bytes(16), b"", b"") + b"\x63\x82\x53\x63" + bytes([53, 0, 255])
    udp = struct.pack("!HHHH", 67, 68, 8 + len(dhcp), 0) + dhcp
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, bytes(4), bytes(4))
    kind, _address, _options = ephemeral._reply(ip + udp, xid)
    assert kind == 0          # no message type: neither an offer nor an ack, so the client waits on
