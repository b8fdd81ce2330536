"""One lab VM: qemu on a throw-away qcow2 overlay, serial console followed, SSH forwarded.

The guest gets the image as ``vda`` (through an overlay, so the base stays clean), each seed as
a read-only virtio disk, one user-mode NIC with SSH forwarded from a host loopback port (and a
guest port nothing listens on beside it, for the SSH probe) and, when a metadata port is given,
169.254.169.254:80 in the guest forwarded to it (one socat per connection; Azure's wire server at
168.63.129.16:80 too). The VM is stopped with an ACPI
power-down over QMP so the disk is clean to read.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from cloudseed.lab.images.image import Image
from cloudseed.lab.machine.channel import EXEC_PORT, GATE_PORT
from cloudseed.lab.machine.console import Console, Event
from cloudseed.lab.machine.ssh_probe import CANARY_GUEST_PORT, SshProbe

PLATFORMS = {
    "openstack": "type=1,manufacturer=OpenStack Foundation,product=OpenStack Nova",
    "ec2": "type=1,manufacturer=Amazon EC2,product=t3.micro,uuid=ec2e1916-9099-7caf-fd21-012345abcdef",
    # the DMI facts each cloud's detection reads (several -smbios options where it reads several tables)
    "gce": ("type=0,vendor=Google", "type=1,manufacturer=Google,product=Google Compute Engine,serial=GoogleCloud-LAB"),
    "digitalocean": "type=1,manufacturer=DigitalOcean,product=Droplet,serial=4242",
    "hetzner": "type=1,manufacturer=Hetzner,product=vServer,serial=4242",  # = the instance-id (lab/boots/metadata.py)
    "oracle": ("type=1,manufacturer=QEMU,product=Standard PC", "type=3,manufacturer=QEMU,asset=OracleCloud.com"),
    # Azure: the chassis asset tag (as on Hyper-V), the rest as a Hyper-V VM shows it
    "azure": ("type=1,manufacturer=Microsoft Corporation,product=Virtual Machine",
              "type=3,manufacturer=Microsoft Corporation,asset=7783-7084-3265-9085-8269-3286-77"),
}

# more link-local services a platform's guest reaches beside 169.254.169.254:80, forwarded to
# the same metadata port (Azure's wire server). qemu forwards only addresses inside the user
# network, so such a platform gets a network wide enough to hold them all (168.0.0.0/6 holds
# 168.63.129.16 and 169.254.0.0/16; the guest's lease is still 169.254.169.x).
PLATFORM_SERVICES = {"azure": (("168.63.129.16", 80),)}
PLATFORM_NETS = {"azure": "168.0.0.0/6"}


class LabError(Exception):
    """The VM could not be started or did not behave as expected."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _opt(path: str) -> str:
    """A path inside a qemu option string (a comma there is written twice)."""
    return path.replace(",", ",,")


def _format(path: str) -> str:
    """qcow2 or raw, from the file's magic."""
    with open(path, "rb") as handle:
        return "qcow2" if handle.read(4) == b"QFI\xfb" else "raw"


def accel_args(accel: str, cpu: Optional[str] = None) -> list[str]:
    if accel == "kvm":
        return ["-accel", "kvm", "-cpu", cpu or "host"]
    return ["-accel", "tcg,thread=multi", "-cpu", cpu or "max"]


@dataclass
class VmSpec:
    image: Image
    workdir: str
    seeds: list[str] = field(default_factory=list)
    metadata_port: Optional[int] = None
    platform: Optional[str] = None  # a PLATFORMS key (its DMI strings) or None
    accel: str = "tcg"
    memory_mib: int = 1024
    cpus: int = 2
    overlay: Optional[str] = None  # reuse this overlay (a reboot); created when missing
    overlay_size: str = "4G"
    kernel_args: str = ""
    disks: list[str] = field(default_factory=list)  # more disks (raw or qcow2 files): vdb, vdc... before the seeds
    # more guest addresses forwarded to host loopback ports: (guest ip, guest port, host port);
    # the guest ip must be in the user network (10.0.2.0/24, or 169.254.0.0/16 with a metadata port)
    forwards: list[tuple[str, int, int]] = field(default_factory=list)
    channels: bool = False  # the lab's virtio-serial ports (gate and exec: lab/machine/channel.py)
    backing: Optional[str] = None  # what a new overlay is made on (default: the image's disk)
    incoming: Optional[str] = None  # a saved VM state file to resume from instead of booting
    # the guest's RAM in this file (a snapshot's: machine/snapshot.py): shared, the VM writes its RAM
    # there; private, the VM starts from its content, copied on write (nothing read until touched)
    memory_file: Optional[str] = None
    memory_shared: bool = False
    cpu: Optional[str] = None  # qemu's -cpu (default: host under KVM, max under TCG)


_RUNNING: list[VirtualMachine] = []
# a migration leaves out RAM kept in a shared file (the saved VM and its restored copies map the file)
IGNORE_SHARED = {"capability": "x-ignore-shared", "state": True}


@atexit.register
def _kill_leftovers() -> None:
    """VMs started in new sessions outlive us unless kept on purpose: kill the others at exit."""
    for vm in list(_RUNNING):
        if not vm.detached and vm.running():
            vm.process.kill()


class VirtualMachine:
    detached = False  # set by `--keep`: the VM is meant to outlive this process

    def __init__(self, spec: VmSpec, on_event: Optional[Callable[[Event], None]] = None):
        self.spec = spec
        os.makedirs(spec.workdir, exist_ok=True)
        self.overlay = spec.overlay or os.path.join(spec.workdir, "overlay.qcow2")
        self.qmp_path = os.path.join(spec.workdir, "qmp.sock")
        self.serial_path = os.path.join(spec.workdir, "serial.out")
        self.gate_path = os.path.join(spec.workdir, "gate.sock")
        self.exec_path = os.path.join(spec.workdir, "exec.sock")
        self.ssh_port = free_port()
        self.canary_port = free_port()  # a guest port nothing listens on: when does its network answer
        self.on_event = on_event
        self.process: Optional[subprocess.Popen] = None
        self.console: Optional[Console] = None
        self.ssh_ready_at: Optional[float] = None
        self.ssh_probe: Optional[SshProbe] = None
        self.started = 0.0
        self._stop = threading.Event()
        self._log = None

    def argv(self) -> list[str]:
        spec = self.spec
        netdev = (f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{self.ssh_port}-:22,"
                  f"hostfwd=tcp:127.0.0.1:{self.canary_port}-:{CANARY_GUEST_PORT}")
        if spec.metadata_port is not None:
            socat = shutil.which("socat") or "socat"
            net = PLATFORM_NETS.get(spec.platform or "", "169.254.0.0/16")
            netdev += (f",net={net},host=169.254.169.1,dhcpstart=169.254.169.10,ipv6=off,"
                       f"guestfwd=tcp:169.254.169.254:80-cmd:{socat} STDIO TCP:127.0.0.1:{spec.metadata_port}")
            for guest_ip, guest_port in PLATFORM_SERVICES.get(spec.platform or "", ()):
                netdev += f",guestfwd=tcp:{guest_ip}:{guest_port}-cmd:{socat} STDIO TCP:127.0.0.1:{spec.metadata_port}"
        for guest_ip, guest_port, host_port in spec.forwards:
            socat = shutil.which("socat") or "socat"
            netdev += f",guestfwd=tcp:{guest_ip}:{guest_port}-cmd:{socat} STDIO TCP:127.0.0.1:{host_port}"
        argv = ["qemu-system-x86_64", *accel_args(spec.accel, spec.cpu), "-smp", str(spec.cpus),
                "-m", str(spec.memory_mib), *self._memory_args(), "-display", "none", "-monitor", "none",
                "-serial", f"file:{_opt(self.serial_path)}",
                "-qmp", f"unix:{_opt(self.qmp_path)},server=on,wait=off",
                "-drive", f"file={_opt(self.overlay)},if=virtio,format=qcow2,cache=unsafe",
                "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56",
                "-object", "rng-random,filename=/dev/urandom,id=rng0",
                "-device", "virtio-rng-pci,rng=rng0"]
        if spec.image.kernel:
            argv += ["-kernel", spec.image.kernel, "-initrd", spec.image.initrd,
                     "-append", f"root=/dev/vda1 ro console=ttyS0,115200 {spec.kernel_args}".strip()]
        for extra in spec.disks:
            argv += ["-drive", f"file={_opt(extra)},if=virtio,format={_format(extra)},cache=unsafe"]
        for seed in spec.seeds:
            argv += ["-drive", f"file={_opt(seed)},if=virtio,format=raw,readonly=on"]
        smbios = PLATFORMS.get(spec.platform or "", spec.platform)
        for entry in (smbios,) if isinstance(smbios, str) else smbios or ():
            argv += ["-smbios", entry]
        if spec.channels:
            argv += ["-device", "virtio-serial-pci,id=labser"]
            for ident, path, name in (("labgate", self.gate_path, GATE_PORT), ("labexec", self.exec_path, EXEC_PORT)):
                argv += ["-chardev", f"socket,id={ident},path={_opt(path)},server=on,wait=off",
                         "-device", f"virtserialport,bus=labser.0,chardev={ident},name={name}"]
        if spec.incoming:
            argv += ["-incoming", "defer"]
        return argv

    def _memory_args(self) -> list[str]:
        spec = self.spec
        if not spec.memory_file:
            return []
        share = "on" if spec.memory_shared else "off"
        return ["-object", f"memory-backend-file,id=labram,size={spec.memory_mib}M,"
                           f"mem-path={_opt(spec.memory_file)},share={share}",
                "-machine", "memory-backend=labram"]

    def start(self, origin: Optional[float] = None) -> None:
        """Start qemu; console times count from ``origin`` (a ``time.monotonic()``; default: now)."""
        if not os.path.exists(self.overlay):
            backing = self.spec.backing or self.spec.image.disk
            proc = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", _format(backing), "-b",
                                   backing, self.overlay, self.spec.overlay_size],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise LabError(f"qemu-img create {self.overlay}: {proc.stderr.strip()}")
        for stale in (self.qmp_path, self.serial_path, self.gate_path, self.exec_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
        boot = 1
        while os.path.exists(os.path.join(self.spec.workdir, f"console-{boot}.log")):
            boot += 1
        self.console_log = os.path.join(self.spec.workdir, f"console-{boot}.log")
        self._log = open(self.console_log, "w")  # noqa: SIM115 - open for the VM's lifetime
        self.started = origin or time.monotonic()
        with open(os.path.join(self.spec.workdir, "qemu.err"), "a") as errors:
            self.process = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=errors,
                                            stderr=errors, start_new_session=True)
        _RUNNING.append(self)
        if self.spec.incoming:
            self._resume(self.spec.incoming)
        self.console = Console(self.started, self._log, self.on_event)
        self.console.follow_file(self.serial_path, self.running)
        threading.Thread(target=self._watch_ssh, daemon=True).start()

    def _resume(self, state: str) -> None:
        """Load the saved state into the waiting qemu and run it (it was saved stopped)."""
        from cloudseed.lab.machine.qmp import Qmp, QmpError

        try:
            qmp = Qmp(self.qmp_path)
            try:
                if self.spec.memory_file:  # the RAM is the file's, not in the state
                    qmp.command("migrate-set-capabilities", capabilities=[IGNORE_SHARED])
                qmp.command("migrate-incoming", uri=f"exec:cat {shlex.quote(state)}")
                qmp.wait_migration(120)
                qmp.command("cont")
            finally:
                qmp.close()
        except QmpError as e:
            self.kill()
            raise LabError(f"cannot restore the VM from {state}: {e}") from None

    def _watch_ssh(self) -> None:
        """SSH ready: when sshd's banner first arrives (``lab/machine/ssh_probe.py``: how, and its error)."""
        self.ssh_probe = SshProbe(("127.0.0.1", self.ssh_port), ("127.0.0.1", self.canary_port))
        arrived = self.ssh_probe.run(self._stop, self.running)
        if arrived is not None:
            self.ssh_ready_at = arrived - self.started
            if self.on_event:
                self.on_event(Event("ssh-ready", self.ssh_ready_at))

    def wait_event(self, predicate: Callable[[Event], bool], timeout: float) -> Optional[Event]:
        assert self.console is not None
        return self.console.wait_event(predicate, timeout)

    def wait_ssh(self, timeout: float) -> Optional[float]:
        deadline = time.monotonic() + timeout
        while self.ssh_ready_at is None and time.monotonic() < deadline and self.running():
            time.sleep(0.2)
        return self.ssh_ready_at

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _qmp(self, command: str) -> None:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)
            sock.connect(self.qmp_path)
            sock.recv(4096)
            for message in ({"execute": "qmp_capabilities"}, {"execute": command}):
                sock.sendall(json.dumps(message).encode() + b"\n")
                sock.recv(4096)

    def stop(self, timeout: float = 90) -> None:
        """ACPI power-down; if the guest does not power off in ``timeout``, quit qemu."""
        self._stop.set()
        if not self.running():
            return self._close()
        with contextlib.suppress(OSError):
            self._qmp("system_powerdown")
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self._qmp("quit")
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close()

    def power_cut(self, timeout: float = 30) -> None:
        """Pull the plug: qemu quits at once, the guest neither shuts down nor syncs. What the guest
        had written to its disk stays (qemu writes its own qcow2 tables out as it quits; a ``kill``
        loses them under ``cache=unsafe``, which no real disk would do with data it had acknowledged)."""
        self._stop.set()
        if self.running():
            with contextlib.suppress(OSError):
                self._qmp("quit")
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close()

    def kill(self) -> None:
        self._stop.set()
        if self.running():
            self.process.kill()
            self.process.wait()
        self._close()

    def _close(self) -> None:
        time.sleep(0.3)  # let the console thread drain
        if self._log and not self._log.closed:
            self._log.flush()
            self._log.close()
