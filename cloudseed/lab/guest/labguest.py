"""The lab's helper inside the guest (lab images only; never part of the agent's package).

Installed as ``/usr/local/lib/cloudseed-lab/labguest.py`` and run by the guest's own python3
(standard library only, Python 3.9+). Two jobs, each over a virtio-serial port the lab adds:

``agent-gate COMMAND...``: the snapshot point. With ``cloudseed.lab.gate`` on the kernel command
line, the lab's generator makes this the agent's local unit's command (``cloudseed boot
--hand-off``, or ``cloud-init init --local``). It imports the agent's entry modules, waits until
the rest of the early boot is quiet, says ``ready`` and blocks: the agent has not read anything
yet. The lab saves the VM there; each try restores it and sends the release: the host's clock
and fresh entropy, which are applied (wall clock set, entropy credited and the kernel's generator
reseeded, Python's ``random`` reseeded, so no two tries share keys or names); the seed disks'
cached blocks are dropped (each try attaches a new seed at the same place). Then the agent runs
in this process, as its own command would (systemd's notifications come from the unit's main
process, as before). A child stays behind as the ``serve`` loop.

``serve``: answers the host's questions after the agent has finished, one JSON line each way:
the agent's records, facts for ``--expect`` checks and the system state for ``--compare``
(``labstate.py``).
"""

from __future__ import annotations

import base64
import fcntl
import glob
import json
import os
import stat
import struct
import subprocess
import sys
import time

GATE_PORT = "org.cloudseed.lab.gate"
EXEC_PORT = "org.cloudseed.lab.exec"
RUN_DIR = "/run/cloudseed-lab"
NETWORK_VERDICT = RUN_DIR + "/network.json"  # labnet.VERDICT
CLOUDSEED_STATUS = "/run/cloudseed/status.json"  # the agents' records of a finished boot
CLOUD_INIT_RESULT = "/run/cloud-init/result.json"
CLOUD_INIT_DISABLED = "/run/cloud-init/disabled"
RNDADDENTROPY = 0x40085203
RNDRESEEDCRNG = 0x5207
BLKFLSBUF = 0x1261


def console(message: str) -> None:
    """A line on the serial console (the lab's timeline reads it)."""
    try:
        with open("/dev/ttyS0", "w") as tty:
            tty.write(f"cloudseed-lab: {message}\n")
    except OSError:
        print(f"cloudseed-lab: {message}", flush=True)


def find_port(name: str, timeout: float) -> str | None:
    """The character device of the virtio-serial port called ``name`` (the module loaded if needed)."""
    deadline = time.monotonic() + timeout
    if not os.path.isdir("/sys/class/virtio-ports"):  # a process costs under emulation: only when needed
        subprocess.run(["modprobe", "-q", "virtio_console"], check=False)
    while True:
        for entry in glob.glob("/sys/class/virtio-ports/*/name"):
            try:
                with open(entry) as handle:
                    if handle.read().strip() == name:
                        device = "/dev/" + entry.split("/")[-2]
                        if os.path.exists(device):
                            return device
            except OSError:
                pass
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


class Port:
    """A virtio-serial port as a line channel (JSON messages, one per line)."""

    def __init__(self, device: str | int):
        self.fd = device if isinstance(device, int) else os.open(device, os.O_RDWR)
        self.buffer = b""
        # a virtio port reads as empty while no host is connected; anything else ends there
        self.wait_at_end = stat.S_ISCHR(os.fstat(self.fd).st_mode)

    def send(self, message: dict) -> None:
        data = json.dumps(message).encode() + b"\n"
        while data:
            try:
                data = data[os.write(self.fd, data):]
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:  # the host is not connected yet (EAGAIN on some kernels)
                time.sleep(0.05)

    def receive(self) -> dict:
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 65536)
            if not chunk:  # no host connected: reads return 0 until one is
                if not self.wait_at_end:
                    raise EOFError
                time.sleep(0.01)  # a restored try's gate waits here for the release
                continue
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return {"op": "invalid", "line": line[:200].decode("utf-8", "replace")}


def _cpu_idle_fraction(interval: float) -> float:
    def sample() -> tuple[int, int]:
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]

    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    return (idle1 - idle0) / max(1, total1 - total0)


def _jobs_settled(own: str) -> bool:
    """Every queued systemd job is waiting (for this gate), none running but this unit's own."""
    proc = subprocess.run(["systemctl", "list-jobs", "--no-legend", "--no-pager"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return False
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3] == "running" and fields[1] != own:
            return False
    return True


def wait_quiet(own: str, limit: float = 90.0) -> None:
    """Until udev's queue is empty, systemd's jobs all wait and the CPUs idle (or ``limit``)."""
    deadline = time.monotonic() + limit
    subprocess.run(["udevadm", "settle", f"--timeout={int(limit)}"], check=False)
    quiet = 0
    while time.monotonic() < deadline and quiet < 3:
        quiet = quiet + 1 if _jobs_settled(own) and _cpu_idle_fraction(0.3) > 0.85 else 0


def _unmounted_disks() -> list[str]:
    """Whole virtio disks with nothing mounted from them: where the lab attaches seeds (every drive
    it gives is virtio; the machine's own empty CD-ROM drive, sr0, is left alone: opening and
    closing it asks the emulated drive, 0.09 s under TCG)."""
    with open("/proc/mounts") as handle:
        mounted = " ".join(line.split()[0] for line in handle)
    disks = []
    for path in sorted(glob.glob("/sys/block/*")):
        name = os.path.basename(path)
        if name.startswith("vd") and f"/dev/{name}" not in mounted:
            disks.append(f"/dev/{name}")
    return disks


def release(message: dict) -> dict:
    """Apply the host's clock and entropy, forget cached seed blocks; what was done."""
    done: dict = {}
    if isinstance(message.get("time"), (int, float)):
        before = time.time()
        time.clock_settime(time.CLOCK_REALTIME, float(message["time"]))
        done["clock_step"] = round(message["time"] - before, 3)
    entropy = base64.b64decode(message.get("entropy") or "")
    if entropy:
        with open("/dev/random", "wb") as rng:
            request = struct.pack("ii", len(entropy) * 8, len(entropy)) + entropy
            fcntl.ioctl(rng, RNDADDENTROPY, request)
            fcntl.ioctl(rng, RNDRESEEDCRNG)
        done["entropy_bytes"] = len(entropy)
    flushed = []
    for disk in _unmounted_disks():
        try:
            fd = os.open(disk, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue  # an empty drive
        try:
            fcntl.ioctl(fd, BLKFLSBUF)
            flushed.append(disk)
        except OSError:
            pass
        finally:
            os.close(fd)
    done["flushed"] = flushed
    os.makedirs(RUN_DIR, exist_ok=True)
    with open(os.path.join(RUN_DIR, "released"), "w") as handle:
        json.dump({"at": time.time(), **done}, handle)
    return done


def _own_unit() -> str:
    """The systemd unit this process runs in (from its cgroup)."""
    try:
        with open("/proc/self/cgroup") as handle:
            return handle.read().strip().rsplit("/", 1)[-1]
    except OSError:
        return ""


# The parts of an agent a boot imports from its local stage on (datasources, network, modules,
# user-data, distros): imported in the snapshot, so a try pays none of it (all, not only those
# this try will use: a module imported without running does nothing).
_IMPORTED_WHOLE = {"cloudseed.cli": ("cloudseed", ("agent", "network", "core"))}


def _package_modules(package: str, parts: tuple) -> list[str]:
    """The dotted names of every module under ``package``'s ``parts`` (found without importing)."""
    import importlib.util

    spec = importlib.util.find_spec(package) if package else None
    if spec is None or not spec.submodule_search_locations:
        return []
    top = list(spec.submodule_search_locations)[0]
    names = []
    for part in parts:
        for dirpath, _, filenames in os.walk(os.path.join(top, part)):
            prefix = package + "." + os.path.relpath(dirpath, top).replace(os.sep, ".")
            for filename in sorted(filenames):
                if filename.endswith(".py") and filename != "__main__.py":
                    stem = filename[:-3]
                    names.append(prefix if stem == "__init__" else f"{prefix}.{stem}")
    return names


def _warm(argv: list[str]) -> None:
    """Import what the agent's command imports first, and read its package into the page cache."""
    import importlib

    modules = []
    try:
        with open(argv[0]) as handle:
            for line in handle:
                words = line.split()
                if len(words) >= 4 and words[0] == "from" and words[2] == "import":
                    modules.append(words[1])
    except OSError:
        return
    entry = modules[0] if modules else ""
    modules += {"cloudseed.cli": ["cloudseed.commands.boot", "cloudseed.agent.boot.stages", "cloudseed.core.root"],
                "cloudinit.cmd.main": []}.get(entry, [])
    modules += _package_modules(*_IMPORTED_WHOLE.get(entry, ("", ())))
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - warming is best effort: the agent reports its own failures
            continue
        package = os.path.dirname(getattr(module, "__file__", "") or "")
        if name.count(".") == 1 and package:
            for dirpath, _, filenames in os.walk(package):
                for filename in filenames:
                    if filename.endswith(".pyc"):
                        with open(os.path.join(dirpath, filename), "rb") as handle:
                            handle.read()


def _leave_unit() -> None:
    """Move this process out of the agent unit's control group, so that systemd does not stop it
    with the unit (the agent's unit fails when the agent reports errors: its processes are killed)."""
    try:
        with open("/sys/fs/cgroup/cgroup.procs", "w") as handle:
            handle.write(str(os.getpid()))
    except OSError as e:
        console(f"exec loop: stays in the agent's unit ({e.strerror})")


def _sibling(name: str):
    """A guest helper module installed beside this one (``labstate``, ``labnet``)."""
    import importlib

    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module(name)


def agent_gate(argv: list[str]) -> int:
    """Hold the agent's command at the snapshot point, then run it in this process."""
    with open("/proc/cmdline") as handle:
        words = handle.read().split()
    gated = "cloudseed.lab.gate" in words
    device = find_port(GATE_PORT, 60) if gated else None
    if device is None:
        if gated:
            console("gate: no gate port; the agent starts at once")
        os.execv(argv[0], argv)
    _warm(argv)
    _sibling("labstate")  # the exec loop's facts and state, imported before the save as well
    port = Port(device)
    network = None
    if "cloudseed.lab.net" in words:  # the image's network up in the snapshot (labnet.py)
        subprocess.run(["udevadm", "settle", "--timeout=60"], check=False)
        network = _sibling("labnet").bring_up(console)
    console("gate: waiting for the boot to settle")
    wait_quiet(_own_unit())
    port.send({"event": "ready", "uptime": _uptime(), "network": network})
    console("gate: ready")
    while True:
        message = port.receive()
        if message.get("op") == "release":
            break
    done = release(message)
    port.send({"event": "released", **done})
    console(f"gate: released ({done.get('clock_step', 0)}s clock step)")
    os.close(port.fd)
    exec_device = find_port(EXEC_PORT, 0)
    if exec_device and os.fork() == 0:  # the exec loop, a child already started
        os.setsid()
        _leave_unit()
        if network and network.get("up"):  # networking.service's first step asks it (labnet.py)
            import threading

            threading.Thread(target=_sibling("labnet").answer_check, args=(console,), daemon=True).start()
        serve(exec_device)
        os._exit(0)
    if not exec_device and network and network.get("up"):  # nobody to answer networking: it runs as it is
        _sibling("labnet").no_check()
    if "random" in sys.modules:
        sys.modules["random"].seed()
    import runpy

    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(argv[0])
    runpy.run_path(argv[0], run_name="__main__")
    return 0


def _uptime() -> float:
    with open("/proc/uptime") as handle:
        return float(handle.read().split()[0])


def _run(request: dict) -> dict:
    argv = request.get("argv")
    shell = request.get("shell")
    try:
        proc = subprocess.run(argv if argv else ["/bin/sh", "-c", shell], capture_output=True,
                              timeout=float(request.get("timeout") or 60),
                              input=(request.get("input") or "").encode())
    except subprocess.TimeoutExpired:
        return {"rc": None, "error": "timed out"}
    except OSError as e:
        return {"rc": None, "error": str(e)}
    return {"rc": proc.returncode, "stdout": proc.stdout.decode("utf-8", "replace"),
            "stderr": proc.stderr.decode("utf-8", "replace")}


def _json_file(path: str):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _agent_finished() -> dict | None:
    """The agent's records once it is done with this boot (None while it still runs)."""
    status = _json_file(CLOUDSEED_STATUS)
    if isinstance(status, dict):
        v1 = status.get("v1") or {}
        final = v1.get("modules-final") or {}
        crashed = any(isinstance(r, dict) and r.get("crashed") for r in v1.values())
        if v1.get("disabled") or (v1.get("stage") is None and (final.get("finished") or crashed)):
            return {"agent": "cloudseed", "status": status, "result": _json_file("/run/cloudseed/result.json")}
        return None
    result = _json_file(CLOUD_INIT_RESULT)
    if result is not None or os.path.exists(CLOUD_INIT_DISABLED):
        log = None
        try:
            with open("/var/log/cloud-init.log", errors="replace") as handle:
                log = handle.read()
        except OSError:
            pass
        return {"agent": "cloud-init", "status": _json_file("/run/cloud-init/status.json"), "result": result,
                "log": log}
    return None


def _records_changed_at() -> tuple:
    """When each file that says the agent is done last changed (a few stat calls: the status is read
    and parsed only after one changed, so looking every 50 ms costs the guest next to nothing)."""
    marks = []
    for path in (CLOUDSEED_STATUS, CLOUD_INIT_RESULT, CLOUD_INIT_DISABLED):
        try:
            info = os.stat(path)
            marks.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            marks.append(None)
    return tuple(marks)


def wait_agent(timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    seen = None
    while True:
        marks = _records_changed_at()
        found = _agent_finished() if marks != seen else None
        seen = marks
        if found is not None:  # and what became of the snapshot's network (labnet.py)
            return {**found, "uptime": _uptime(), "time": time.time(), "network": _json_file(NETWORK_VERDICT)}
        if time.monotonic() > deadline:
            return {"error": f"the agent did not finish within {timeout:.0f}s"}
        time.sleep(0.05)


def handle(request: dict) -> dict:
    op = request.get("op")
    if op == "ping":
        return {"pong": True, "uptime": _uptime()}
    if op == "agent":  # with ``queries``: the facts too, once the agent is done (one round trip)
        records = wait_agent(float(request.get("timeout") or 600))
        if "error" not in records and request.get("queries") is not None:
            started = time.monotonic()
            labstate = _sibling("labstate")
            records["facts"] = [labstate.fact(query) for query in request["queries"]]
            records["facts_seconds"] = round(time.monotonic() - started, 3)
        return records
    if op == "exec":
        return _run(request)
    if op in ("facts", "state"):
        labstate = _sibling("labstate")
        if op == "facts":
            return {"facts": [labstate.fact(query) for query in request.get("queries") or []]}
        return {"state": labstate.collect(request.get("since"))}
    return {"error": f"unknown op {op!r}"}


def serve(device: str | int | None = None) -> int:
    """Answer requests until the host goes away (end of input on a socket; a port is kept)."""
    device = device if device is not None else find_port(EXEC_PORT, 60)
    if device is None:
        return 0
    port = Port(device)
    while True:
        try:
            request = port.receive()
        except EOFError:
            return 0
        try:
            reply = handle(request)
        except Exception as e:  # noqa: BLE001 - the host gets every failure as an answer
            reply = {"error": f"{type(e).__name__}: {e}"}
        reply["id"] = request.get("id")
        port.send(reply)


if __name__ == "__main__":
    if sys.argv[1] == "agent-gate":
        sys.exit(agent_gate(sys.argv[2:]))
    sys.exit(serve())
