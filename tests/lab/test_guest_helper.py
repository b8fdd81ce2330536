"""The lab's guest side without a VM: the exec loop's protocol, the gate's generator, padded seeds.

``labguest.serve`` runs here on one end of a socket pair (in the guest it is a virtio-serial
port) and the host's ``Channel`` protocol talks to it: facts and commands answered by the real
``labstate`` code. The generator that puts the gate before the agent's local stage runs as the
shell script the image gets, with a kernel command line of our choosing (a private mount
namespace hides the real ``/proc/cmdline``). Seeds padded for a snapshot's tries are still read
by the tools that read seeds (blkid, isoinfo, mtools).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from cloudseed.lab.images.agent_install import _GATE_GENERATOR, HELPER, NETWORKING_DROPIN, SSH_DROPIN
from cloudseed.lab.machine.snapshot import SEED_BYTES, pad_seed
from cloudseed.lab.machine.vm import LabError
from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.spec import InstanceSpec
from tests.lab.guest_helper import labguest


class Host:
    """The host's end: JSON lines, as ``cloudseed.lab.machine.channel.Channel`` speaks them."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""

    def ask(self, message: dict) -> dict:
        self.sock.sendall(json.dumps(message).encode() + b"\n")
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, "the exec loop went away"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


@pytest.fixture
def exec_loop():
    host, guest = socket.socketpair()
    thread = threading.Thread(target=labguest.serve, args=(guest.fileno(),), daemon=True)
    thread.start()
    yield Host(host)
    host.close()
    thread.join(5)
    guest.close()
    assert not thread.is_alive(), "the exec loop did not end with its input"


def test_exec_loop_answers_each_request_with_its_id(exec_loop, tmp_path):
    target = tmp_path / "f"
    target.write_text("content\n")
    assert exec_loop.ask({"op": "ping", "id": 1})["pong"] is True
    reply = exec_loop.ask({"op": "exec", "id": 2, "shell": "echo out; echo err >&2; exit 4"})
    assert (reply["id"], reply["rc"], reply["stdout"], reply["stderr"]) == (2, 4, "out\n", "err\n")
    reply = exec_loop.ask({"op": "facts", "id": 3, "queries": [{"kind": "file", "name": str(target)},
                                                                 {"kind": "user", "name": "root"},
                                                                 {"kind": "command", "name": "exit 7"}]})
    file_fact, user_fact, command_fact = reply["facts"]
    assert (file_fact["content"], file_fact["owner"], file_fact["kind"]) == ("content\n", "root", "file")
    assert (user_fact["uid"], user_fact["home"]) == (0, "/root")
    assert command_fact["exit"] == 7
    assert exec_loop.ask({"op": "nonsense", "id": 4}) == {"error": "unknown op 'nonsense'", "id": 4}


def test_exec_loop_reports_a_command_that_cannot_start(exec_loop):
    reply = exec_loop.ask({"op": "exec", "id": 1, "argv": ["/no/such/program"]})
    assert reply["rc"] is None and "No such file" in reply["error"]


def test_the_agents_records_come_with_the_facts_once_the_agent_is_done(exec_loop, tmp_path, monkeypatch):
    """One round trip per try: the ``agent`` request with the checks' queries is answered when the
    agent's status says the final stage is over (the status changing while the loop waits), with
    the facts read after that; without queries the records come alone."""
    status, note = tmp_path / "status.json", tmp_path / "note"
    monkeypatch.setattr(labguest, "CLOUDSEED_STATUS", str(status))
    monkeypatch.setattr(labguest, "CLOUD_INIT_RESULT", str(tmp_path / "none.json"))
    monkeypatch.setattr(labguest, "CLOUD_INIT_DISABLED", str(tmp_path / "none"))
    status.write_text(json.dumps({"v1": {"stage": "modules-final", "modules-final": {"finished": None}}}))

    def finish() -> None:
        time.sleep(0.4)
        note.write_text("written by the final stage\n")
        status.write_text(json.dumps({"v1": {"stage": None, "modules-final": {"finished": 1.0, "errors": []}}}))

    threading.Thread(target=finish, daemon=True).start()
    reply = exec_loop.ask({"op": "agent", "id": 1, "timeout": 30, "queries": [{"kind": "file", "name": str(note)}]})
    assert reply["agent"] == "cloudseed" and reply["status"]["v1"]["modules-final"]["finished"] == 1.0
    assert reply["facts"][0]["content"] == "written by the final stage\n"
    assert reply["facts_seconds"] >= 0
    alone = exec_loop.ask({"op": "agent", "id": 2, "timeout": 30})
    assert alone["agent"] == "cloudseed" and "facts" not in alone


def _generate(tmp_path, cmdline: str) -> dict[str, str]:
    """Run the gate generator with ``cmdline`` as the kernel's; the drop-ins it wrote."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (a private /proc/cmdline)")
    script, fake, out = tmp_path / "generator", tmp_path / "cmdline", tmp_path / "out"
    script.write_text(_GATE_GENERATOR)
    fake.write_text(cmdline + "\n")
    out.mkdir()
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f'mount --bind "{fake}" /proc/cmdline && sh "{script}" "{out}" /early /late'],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}


def test_gate_generator_puts_the_helper_in_front_of_each_agents_local_stage(tmp_path):
    written = _generate(tmp_path, "root=/dev/vda1 ro console=ttyS0,115200 cloudseed.lab.gate")
    start = f"[Service]\nExecStart=\nExecStart=/usr/bin/python3 {HELPER} agent-gate"
    assert written == {
        "cloudseed-local.service.d/cloudseed-lab-gate.conf": f"{start} /usr/bin/cloudseed boot --hand-off\n",
        "cloud-init-local.service.d/cloudseed-lab-gate.conf": f"{start} /usr/bin/cloud-init init --local\n",
        "ssh.service.d/cloudseed-lab-try.conf": "[Service]\nExecStartPre=\n",  # no `sshd -t` in a try
    }
    assert written["ssh.service.d/cloudseed-lab-try.conf"] == SSH_DROPIN


def test_with_the_network_word_networking_first_takes_down_what_a_try_changed(tmp_path):
    written = _generate(tmp_path, "root=/dev/vda1 ro cloudseed.lab.gate cloudseed.lab.net")
    dropin = written["networking.service.d/cloudseed-lab-net.conf"]
    assert dropin == NETWORKING_DROPIN and dropin.startswith("[Service]\nExecStart=\nExecStart=/bin/sh -c '")
    assert "$$verdict" in dropin  # written as is: systemd, not the generator's shell, reads the `$$`
    assert len(written) == 4  # and the two gates and sshd's


@pytest.mark.parametrize("cmdline", ["root=/dev/vda1 ro", "root=/dev/vda1 cloudseed.lab.gated", "cloudseed.lab.exec",
                                     "cloudseed.lab.net"])
def test_gate_generator_writes_nothing_on_other_boots(tmp_path, cmdline):
    assert _generate(tmp_path, cmdline) == {}


def _seed(tmp_path, kind: str, fs: str) -> str:
    path = str(tmp_path / f"seed.{fs}")
    build_seed(kind, fs, InstanceSpec(instance_id="iid-pad", hostname="pad", user_data=b"#cloud-config\n{}\n"), path)
    return path


@pytest.mark.parametrize("kind, fs, label", [("nocloud", "iso9660", "cidata"), ("nocloud", "vfat", "cidata"),
                                             ("configdrive", "iso9660", "config-2")])
def test_padded_seeds_keep_their_label_and_files(tmp_path, kind, fs, label):
    path = _seed(tmp_path, kind, fs)
    pad_seed(path)
    assert os.path.getsize(path) == SEED_BYTES
    probe = subprocess.run(["blkid", "-p", "-o", "export", path], capture_output=True, text=True)
    found = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
    assert (found.get("LABEL", "").lower(), found.get("TYPE")) == (label, fs), probe.stdout
    if fs == "vfat":
        listing = subprocess.run(["mdir", "-b", "-i", path, "::/"], capture_output=True, text=True).stdout
        assert "::/user-data" in listing or "::/USER-DATA" in listing.upper(), listing
    elif kind == "nocloud":
        listing = subprocess.run(["isoinfo", "-R", "-f", "-i", path], capture_output=True, text=True).stdout
        assert "/user-data" in listing.split(), listing


def test_a_seed_larger_than_a_snapshots_seed_disk_is_refused(tmp_path):
    path = tmp_path / "big.iso"
    with open(path, "wb") as handle:
        handle.truncate(SEED_BYTES + 1)
    with pytest.raises(LabError, match="17 MiB|16 MiB"):
        pad_seed(str(path))


def test_the_state_waits_for_host_keys_the_agent_still_makes(tmp_path, monkeypatch):
    """cloudseed finishes RSA in the background after its stages: the state is taken once it is in
    place; a key whose ssh-keygen ended but which nobody installed is named, without waiting longer."""
    from tests.lab.guest_helper import labstate

    monkeypatch.setattr(labstate, "BACKGROUND_KEYS", str(tmp_path))
    keygen = subprocess.Popen(["sleep", "1"])
    (tmp_path / "rsa.pid").write_text(f"{keygen.pid}\n")
    threading.Timer(1.5, (tmp_path / "rsa.pid").unlink).start()
    assert labstate._wait_for_background_keys(limit=30) == []
    keygen.wait()
    (tmp_path / "rsa.pid").write_text(f"{keygen.pid}\n")  # ended, and no helper removes the file
    started = time.monotonic()
    assert labstate._wait_for_background_keys(limit=30, stalled=1) == ["rsa"]
    assert time.monotonic() - started < 5


def test_a_new_image_prunes_older_snapshots_of_its_agent_but_not_one_a_try_is_using(tmp_path):
    """Sessions of several trees share the cache: a snapshot a try used within the hour stays."""
    from cloudseed.lab.images.image import Image
    from cloudseed.lab.machine.snapshot import SNAPSHOT_VERSION, USED, Shape, Snapshot

    def made(name: str, image: str, used_ago: float | None) -> str:
        directory = tmp_path / name
        directory.mkdir()
        (directory / "ready.json").write_text(json.dumps({"version": SNAPSHOT_VERSION, "agent": "cloudseed",
                                                          "image": image}))
        if used_ago is not None:
            (directory / USED).write_text("")
            os.utime(directory / USED, (time.time() - used_ago,) * 2)
        return str(directory)

    current = made("current", "cloudseed-new", None)
    idle, in_use, other_agent = made("idle", "cloudseed-old", 7200), made("busy", "cloudseed-old2", 60), \
        made("ref", "reference-x", None)
    (tmp_path / "ref" / "ready.json").write_text(json.dumps({"version": SNAPSHOT_VERSION, "agent": "reference",
                                                             "image": "reference-x"}))
    snapshot = Snapshot(Image("d", "k", "i", "cloudseed", "cloudseed-new"), Shape(), directory=current)
    snapshot._prune()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "current", "ref"]
    assert not os.path.exists(idle) and os.path.exists(in_use) and os.path.exists(other_agent)
