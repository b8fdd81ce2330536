"""``cloudseed userdata show``: JSON and text output, stdin, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys


def show(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudseed", "userdata", "show", *args], input=input,
                          capture_output=True, timeout=60)


def test_json_from_file(tmp_path):
    path = tmp_path / "ud"
    path.write_text("#cloud-config\nhostname: h\n")
    proc = show(str(path), "--json")
    assert proc.returncode == 0
    out = json.loads(proc.stdout)
    assert out["cloud_config"] == {"hostname": "h"} and out["errors"] == []
    assert set(out) == {"cloud_config", "scripts", "boothooks", "scripts_per_freq", "handlers", "errors"}


def test_stdin_and_text_summary():
    proc = show("-", input=b"#!/bin/sh\necho hi\n")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "# no cloud-config" in text and "# script: part-001" in text and "echo hi" in text


def test_errors_exit_1_and_still_print_everything():
    blob = (b'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n'
            b"--B\nContent-Type: text/cloud-config\n\n#cloud-config\nbad: [\n"
            b"--B\nContent-Type: text/cloud-config\n\n#cloud-config\ngood: 1\n--B--\n")
    proc = show("-", "--json", input=blob)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["cloud_config"] == {"good": 1}
    assert len(out["errors"]) == 1 and "part-001" in out["errors"][0]
    text = show("-", input=blob)
    assert text.returncode == 1 and b"good: 1" in text.stdout and b"1 error(s)" in text.stdout


def test_instance_data_for_templates(tmp_path):
    data = tmp_path / "instance-data.json"
    data.write_text(json.dumps({"v1": {"local_hostname": "tpl"}}))
    proc = show("-", "--json", "--instance-data", str(data),
                input=b"## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n")
    assert json.loads(proc.stdout)["cloud_config"] == {"hostname": "tpl"}


def test_missing_file_exit_2(tmp_path):
    proc = show(str(tmp_path / "nope"))
    assert proc.returncode == 2 and b"cannot read" in proc.stderr
