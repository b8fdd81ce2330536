"""Bad user-data never raises: each problem is an error naming the part, the rest still works."""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
import time

from cloudseed.agent.userdata import process_userdata


def mime(*parts: tuple[str, str]) -> bytes:
    out = 'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n'
    for headers, body in parts:
        out += f"--B\n{headers}\n\n{body}\n"
    return (out + "--B--\n").encode()


def test_invalid_yaml_names_part_and_line():
    r = process_userdata("#cloud-config\nhostname: ok\nusers:\n  - name: a\n   bad: indent\n")
    assert r.cloud_config == {}
    assert len(r.errors) == 1
    assert r.errors[0].startswith("part-001 (text/cloud-config)")
    assert "line 5" in r.errors[0]


def test_invalid_yaml_in_one_mime_part_does_not_stop_the_others():
    r = process_userdata(mime(
        ('Content-Type: text/cloud-config\nContent-Disposition: attachment; filename="broken.yaml"',
         "#cloud-config\na: [1, 2\nb: 3"),
        ("Content-Type: text/cloud-config", "#cloud-config\nc: 4"),
        ("Content-Type: text/x-shellscript", "#!/bin/sh\ntrue")))
    assert r.cloud_config == {"c": 4}
    assert [p.name for p in r.scripts] == ["part-003"]
    assert len(r.errors) == 1 and "'broken.yaml' (part 1" in r.errors[0] and "line 3" in r.errors[0]


def test_cloud_config_that_is_not_a_mapping():
    r = process_userdata("#cloud-config\n- a\n- b\n")
    assert "mapping" in r.errors[0] and "list" in r.errors[0]


def test_binary_blob():
    r = process_userdata(bytes(range(256)) * 100)
    assert r.cloud_config is None and r.scripts == []
    assert len(r.errors) == 1 and "binary data" in r.errors[0] and "part-001" in r.errors[0]


def test_empty_user_data_is_fine():
    for blob in (None, b"", ""):
        r = process_userdata(blob)
        assert r.errors == [] and r.cloud_config is None and r.scripts == []


def test_empty_cloud_config_is_an_empty_config_not_an_error():
    r = process_userdata("#cloud-config\n")
    assert r.cloud_config == {} and r.errors == []


def test_unknown_text_format_never_quotes_the_users_text():
    # the message reaches the world-readable status: user data may be a secret (issue 16.8)
    r = process_userdata("password: hunter2\n")
    assert "not a known user-data format (its first line is no format marker)" in r.errors[0]
    assert "hunter2" not in r.errors[0]


def test_a_mistyped_format_marker_is_shown():
    r = process_userdata("#cloud-confg\npassword: hunter2\n")
    assert "it starts with '#cloud-confg'" in r.errors[0] and "hunter2" not in r.errors[0]


def test_broken_gzip_is_reported():
    r = process_userdata(gzip.compress(b"#cloud-config\na: 1\n")[:20])
    assert any("gzip" in e for e in r.errors)


def test_gzip_bomb_is_refused():
    r = process_userdata(gzip.compress(b"\0" * (80 * 1024 * 1024)))
    assert any("expands beyond" in e for e in r.errors)


def test_bad_archive_entries():
    r = process_userdata("#cloud-config-archive\n- 42\n- content: {a: 1}\n- type: nonsense\n  content: x\n"
                         "- content: '#cloud-config\n\n    ok: 1'\n")
    assert r.cloud_config == {"ok": 1}
    assert len(r.errors) == 3
    assert all("archive entry" in e for e in r.errors)


def test_mime_with_invalid_utf8_does_not_raise():
    blob = b'MIME-Version: 1.0\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho \xff\xfe\n'
    r = process_userdata(blob)
    assert r.scripts[0].content == b"#!/bin/sh\necho \xff\xfe\n"


def test_duplicate_script_names_are_reported():
    part = ('Content-Type: text/x-shellscript\nContent-Disposition: attachment; filename="s.sh"',
            "#!/bin/sh\necho {}")
    r = process_userdata(mime((part[0], part[1].format(1)), (part[0], part[1].format(2))))
    assert [p.content for p in r.scripts] == [b"#!/bin/sh\necho 2"]
    assert "same name" in r.errors[0]


def test_ten_megabyte_user_data_bounded_time_and_memory():
    # In a child process, so its peak memory is its own.
    code = (
        "import time\n"
        "from cloudseed.agent.userdata import process_userdata\n"
        "line = '  - echo a fairly long command line to make the document big 0123456789\\n'\n"
        "blob = '#cloud-config\\nruncmd:\\n' + line * (10 * 1024 * 1024 // len(line))\n"
        "t = time.monotonic(); r = process_userdata(blob); t = time.monotonic() - t\n"
        "assert not r.errors and len(r.cloud_config['runcmd']) > 100000\n"
        # VmHWM, not ru_maxrss: the latter survives exec and so counts the parent's memory
        "print(t, [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    seconds, peak_kib = proc.stdout.split()
    assert float(seconds) < 20
    assert int(peak_kib) < 600 * 1024


def test_ten_megabyte_binary_is_quick():
    start = time.monotonic()
    r = process_userdata(os.urandom(10 * 1024 * 1024))
    assert time.monotonic() - start < 10 and len(r.errors) == 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 * 1024 * 1024


def test_cloud_config_with_bytes_that_are_not_utf8_names_the_byte_line_and_column():
    """A file saved as Latin-1: that part is ignored with an error naming the byte and where it is
    (it used to stop all user-data processing on an encode error), the next part still applies."""
    latin1 = '#cloud-config\nwrite_files:\n  - path: /etc/x\n    content: "caf\xe9"\n'.encode("latin-1")
    blob = mime(("Content-Type: text/cloud-config", "LATIN1"),
                ("Content-Type: text/cloud-config", "#cloud-config\nhostname: ok"))
    r = process_userdata(blob.replace(b"LATIN1", latin1))
    assert r.cloud_config == {"hostname": "ok"} and "byte 0xe9 is not UTF-8" in r.errors[0]
    r = process_userdata(latin1)
    assert r.cloud_config == {}
    assert r.errors == ["part-001 (text/cloud-config): invalid YAML, part ignored: line 4, column 18: "
                        "byte 0xe9 is not UTF-8 (YAML must be UTF-8; re-save the file as UTF-8)"]


def test_a_utf8_byte_order_mark_before_the_format_marker_is_read_past():
    """Deliberately unlike cloud-init, which sees no '#cloud-config' behind a BOM and ignores the whole
    blob: Notepad and PowerShell's UTF8 encoding write one."""
    r = process_userdata(b"\xef\xbb\xbf#cloud-config\nhostname: bom\n")
    assert r.errors == [] and r.cloud_config == {"hostname": "bom"}
    r = process_userdata(gzip.compress(b"\xef\xbb\xbf#!/bin/sh\necho hi\n"))
    assert r.errors == [] and [p.content for p in r.scripts] == [b"#!/bin/sh\necho hi\n"]
