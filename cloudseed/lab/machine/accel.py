"""Choose the accelerator: KVM when a short probe boots the guest kernel, TCG otherwise.

On some hosts ``/dev/kvm`` exists but cannot run a stock kernel (nested PVM aborts on
``-cpu host`` or stalls). The probe boots the lab kernel under KVM for up to 20 seconds and
wants to see it reach user space; the verdict is cached per kernel and qemu binary.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from cloudseed.lab.cache import digest, lab_dir

PROBE_SECONDS = 20
_REACHED_USERSPACE = (b"Run /init as init process", b"Freeing unused kernel image")


def _probe(kernel: str, initrd: str) -> tuple[bool, str]:
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "no usable /dev/kvm"
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "512", "-display", "none",
            "-monitor", "none", "-serial", "stdio", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
            "-append", "console=ttyS0 panic=-1"]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = b""
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() - started < PROBE_SECONDS and proc.poll() is None:
            chunk = proc.stdout.read(65536)
            if chunk:
                seen += chunk
                if any(mark in seen for mark in _REACHED_USERSPACE):
                    return True, f"KVM boots the kernel ({time.monotonic() - started:.1f}s to user space)"
            else:
                time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    error = proc.stderr.read().decode(errors="replace").strip().splitlines()
    if error:
        return False, f"KVM probe failed: {error[-1][:120]}"
    return False, f"KVM did not reach user space in {PROBE_SECONDS}s"


def choose_accel(requested: str, kernel: str, initrd: str) -> tuple[str, str]:
    """("kvm"|"tcg", reason) for ``requested`` "auto", "kvm" or "tcg"."""
    if requested in ("kvm", "tcg"):
        return requested, "requested"
    qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout
    key = digest([kernel, str(os.path.getsize(kernel)) if os.path.exists(kernel) else "", qemu])
    verdict = os.path.join(lab_dir("probes"), f"kvm-{key}.json")
    if os.path.exists(verdict):
        with open(verdict) as handle:
            cached = json.load(handle)
        return ("kvm" if cached["ok"] else "tcg"), cached["reason"] + " (cached probe)"
    ok, reason = _probe(kernel, initrd)
    with open(verdict + ".tmp", "w") as handle:
        json.dump({"ok": ok, "reason": reason}, handle)
    os.replace(verdict + ".tmp", verdict)
    return ("kvm" if ok else "tcg"), reason
