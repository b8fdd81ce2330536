"""Seconds per try: a lab VM saved just before the agent reads its seed, restored for each try.

``Snapshot.ensure`` boots the image once with the kernel command line word
``cloudseed.lab.gate``: the lab image's gate unit (``labguest.py gate``) holds the agent's local
stage, waits until the rest of the early boot is quiet and says ``ready`` on its virtio-serial
port. A snapshot for a seed-disk datasource also has ``cloudseed.lab.net``: the gate first raises
the image's network (``guest/labnet.py``), so that a try whose network configuration is the
image's fallback does not wait for DHCP again. The VM is then stopped and its memory and devices
saved to a file (qemu's ``migrate`` to ``exec:cat``); its disk overlay, flushed, becomes the
read-only base of every try. The snapshot is cached per image, datasource shape and qemu, so
later sessions start from it at once.

``Snapshot.start_try`` makes a fresh qemu with the same devices, a thin overlay on that disk and
the try's own seed in the same place (seeds are padded to one size: the guest keeps the size it
saw), loads the state and sends the release: the host's clock and entropy, after which the guest
drops the seed disks' cached blocks and lets the agent start. Each try is a separate process,
so tries can run side by side (``--parallel``).
"""

from __future__ import annotations

import base64
import glob
import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from cloudseed.lab.cache import build_lock, digest, lab_dir
from cloudseed.lab.images.image import Image
from cloudseed.lab.machine.channel import EXEC_PORT, GATE_PORT, Channel, ChannelError
from cloudseed.lab.machine.console import Event
from cloudseed.lab.machine.qmp import Qmp, QmpError
from cloudseed.lab.machine.vm import IGNORE_SHARED, LabError, VirtualMachine, VmSpec

SEED_BYTES = 16 << 20  # every seed of a snapshot's tries is padded to this (the guest saw this size)
SNAPSHOT_VERSION = "4"
GATE_TIMEOUT = 300.0
USED = "used"  # touched by each try
IN_USE_SECONDS = 3600.0  # a snapshot a try used this recently is not pruned


def pad_seed(path: str, size: int = SEED_BYTES) -> None:
    """Extend a seed image with zeros to ``size`` (ISO 9660 and FAT ignore what follows them)."""
    have = os.path.getsize(path)
    if have > size:
        raise LabError(f"seed {path} is {have >> 20} MiB; a snapshot's tries take seeds up to {size >> 20} MiB")
    with open(path, "r+b") as handle:
        handle.truncate(size)


@dataclass
class Shape:
    """What a try's VM must have the same as the saved one (qemu refuses the state otherwise)."""

    seeds: int = 1  # how many seed disks, in order
    platform: Optional[str] = None  # SMBIOS identity
    metadata: bool = False  # 169.254.169.254 forwarded
    accel: str = "tcg"
    memory_mib: int = 1024
    cpus: int = 2
    seed_kinds: tuple[str, ...] = ()  # (kind/fs) of the placeholders, so the generator sees the same labels
    cpu: Optional[str] = None  # qemu's -cpu model
    network: bool = False  # the image's network raised before the save (guest/labnet.py)

    def key(self) -> list[str]:
        return [str(self.seeds), str(self.platform), str(self.metadata), self.accel, str(self.memory_mib),
                str(self.cpus), str(self.cpu), str(self.network), *self.seed_kinds]

    @property
    def kernel_args(self) -> str:
        return "cloudseed.lab.gate cloudseed.lab.net" if self.network else "cloudseed.lab.gate"


@dataclass
class Snapshot:
    image: Image
    shape: Shape
    directory: str = ""
    made_in: Optional[float] = None  # seconds it took to make (None: it was cached)
    info: dict = field(default_factory=dict)

    @property
    def state(self) -> str:
        return os.path.join(self.directory, "state")

    @property
    def memory(self) -> str:
        return os.path.join(self.directory, "memory")

    @property
    def disk(self) -> str:
        return os.path.join(self.directory, "disk.qcow2")

    def cached_at(self) -> str:
        """Where this snapshot is kept: per image, qemu and shape."""
        qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout
        key = digest([SNAPSHOT_VERSION, self.image.key, self.image.disk, qemu, *self.shape.key()])
        return os.path.join(lab_dir("snapshots"), key)

    def discard(self) -> None:
        """Forget the cached snapshot: the next ``ensure`` makes it again."""
        shutil.rmtree(self.cached_at(), ignore_errors=True)

    def ensure(self, placeholders: Callable[[str], list[str]], metadata_port: Optional[int] = None,
               progress: Optional[Callable[[str], None]] = None) -> Snapshot:
        """Make the snapshot unless it is cached. ``placeholders(dir)`` writes the seeds to boot it with."""
        self.directory = self.cached_at()
        with build_lock(f"snapshot-{os.path.basename(self.directory)}"):
            if not os.path.exists(os.path.join(self.directory, "ready.json")):
                self._make(placeholders, metadata_port, progress)
            with open(os.path.join(self.directory, "ready.json")) as handle:
                self.info = json.load(handle)
        return self

    def _files(self, directory: str) -> Image:
        """The image as the snapshot keeps it: hard links to its disk, kernel and initrd in the
        snapshot's directory, so a newer image replacing them in the cache does not break it."""
        from dataclasses import replace

        return replace(self.image, disk=os.path.join(directory, "base.raw"),
                       kernel=os.path.join(directory, "vmlinuz"), initrd=os.path.join(directory, "initrd"))

    def _spec(self, workdir: str, overlay: str, seeds: list[str], metadata_port: Optional[int],
              incoming: Optional[str] = None, backing: Optional[str] = None, memory_file: str = "",
              memory_shared: bool = False) -> VmSpec:
        shape = self.shape
        if shape.metadata and metadata_port is None:
            raise LabError("this snapshot has a metadata service: a port is needed")
        return VmSpec(image=self._files(self.directory), workdir=workdir, seeds=seeds, overlay=overlay, backing=backing,
                      metadata_port=metadata_port if shape.metadata else None, platform=shape.platform,
                      accel=shape.accel, memory_mib=shape.memory_mib, cpus=shape.cpus, cpu=shape.cpu,
                      kernel_args=shape.kernel_args, channels=True, incoming=incoming,
                      memory_file=memory_file or None, memory_shared=memory_shared)

    def _make(self, placeholders: Callable[[str], list[str]], metadata_port: Optional[int],
              progress: Optional[Callable[[str], None]]) -> None:
        partial = self.directory + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        kept = self._files(partial)
        for source, link in ((self.image.disk, kept.disk), (self.image.kernel, kept.kernel),
                             (self.image.initrd, kept.initrd)):
            try:
                os.link(source, link)
            except OSError as e:
                raise LabError(f"cannot keep {source} with the snapshot: {e.strerror}") from None
        seeds = placeholders(partial)
        for seed in seeds:
            pad_seed(seed)
        started = time.monotonic()
        # the disk names its base relatively: the directory is renamed when the snapshot is ready
        made = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", "base.raw", "disk.qcow2",
                               VmSpec.overlay_size], cwd=partial, capture_output=True, text=True)
        if made.returncode != 0:
            raise LabError(f"qemu-img create {partial}/disk.qcow2: {made.stderr.strip()}")
        spec = self._spec(partial, os.path.join(partial, "disk.qcow2"), seeds, metadata_port,
                          memory_file=os.path.join(partial, "memory"), memory_shared=True)
        spec.image = kept
        vm = VirtualMachine(spec)
        vm.start()
        if progress:
            progress("booting the image to the point before the agent reads its seed (once)")
        try:
            gate = Channel(vm.gate_path, GATE_PORT).connect()
            try:
                ready = gate.wait_for("ready", GATE_TIMEOUT)
            except ChannelError as e:
                raise LabError(f"the VM never reached the lab gate ({e}); console: {vm.console_log}") from None
            gate.close()
            saved = save_state(vm, os.path.join(partial, "state"))
        finally:
            vm.kill()
        for seed in seeds:
            os.unlink(seed)
        info = {"version": SNAPSHOT_VERSION, "agent": self.image.agent, "image": self.image.key,
                "boot_to_gate": round(time.monotonic() - started, 1), "guest_uptime": ready.get("uptime"),
                "network": ready.get("network"),
                "state_bytes": os.path.getsize(os.path.join(partial, "state")),
                "memory_bytes": os.stat(os.path.join(partial, "memory")).st_blocks * 512, **saved}
        with open(os.path.join(partial, "ready.json"), "w") as handle:
            json.dump(info, handle)
        shutil.rmtree(self.directory, ignore_errors=True)
        os.rename(partial, self.directory)
        self.made_in = time.monotonic() - started
        self._prune()

    def _prune(self) -> None:
        """Drop snapshots of older images of the same agent, and those an older lab made (each is a
        few hundred MB; the lab keeps one image per agent), unless a try used one within the last
        ``IN_USE_SECONDS`` (another session, of another tree, may be trying from it right now)."""
        for ready in glob.glob(os.path.join(os.path.dirname(self.directory), "*", "ready.json")):
            directory = os.path.dirname(ready)
            if directory == self.directory or _used_within(directory, IN_USE_SECONDS):
                continue
            try:
                with open(ready) as handle:
                    info = json.load(handle)
            except (OSError, ValueError):
                continue
            if info.get("version") != SNAPSHOT_VERSION or \
                    (info.get("agent") == self.image.agent and info.get("image") != self.image.key):
                shutil.rmtree(directory, ignore_errors=True)

    def start_try(self, workdir: str, seeds: list[str], metadata_port: Optional[int] = None,
                  on_event: Optional[Callable[[Event], None]] = None,
                  origin: Optional[float] = None) -> tuple[VirtualMachine, Channel]:
        """A new VM resumed from the snapshot with ``seeds``, released; and its exec channel."""
        if len(seeds) != self.shape.seeds:
            raise LabError(f"the snapshot has {self.shape.seeds} seed disk(s), the try gives {len(seeds)}")
        with open(os.path.join(self.directory, USED), "a"):  # in use: not pruned by another session
            os.utime(os.path.join(self.directory, USED))
        for seed in seeds:
            pad_seed(seed)
        os.makedirs(workdir, exist_ok=True)
        overlay = os.path.join(workdir, "overlay.qcow2")
        if os.path.exists(overlay):
            os.unlink(overlay)
        vm = VirtualMachine(self._spec(workdir, overlay, seeds, metadata_port, incoming=self.state,
                                       backing=self.disk, memory_file=self.memory), on_event=on_event)
        vm.start(origin)
        try:
            gate = Channel(vm.gate_path, GATE_PORT).connect()
            entropy = base64.b64encode(secrets.token_bytes(64)).decode()
            gate.send({"op": "release", "time": time.time(), "entropy": entropy})
            gate.wait_for("released", 60)
            gate.close()
            exec_channel = Channel(vm.exec_path, EXEC_PORT).connect()
        except ChannelError as e:
            vm.kill()
            raise LabError(f"the restored VM did not take the release: {e}; console: {vm.console_log}") from None
        return vm, exec_channel


def _used_within(directory: str, seconds: float) -> bool:
    try:
        return time.time() - os.path.getmtime(os.path.join(directory, USED)) < seconds
    except OSError:
        return False


def save_state(vm: VirtualMachine, path: str) -> dict:
    """Stop ``vm`` and write its state to ``path``; its disk is flushed and left as it is."""
    try:
        qmp = Qmp(vm.qmp_path)
        try:
            qmp.command("migrate-set-parameters", **{"max-bandwidth": 8 << 30})
            if vm.spec.memory_file and vm.spec.memory_shared:  # the RAM stays in its file
                qmp.command("migrate-set-capabilities", capabilities=[IGNORE_SHARED])
            qmp.command("stop")
            started = time.monotonic()
            qmp.command("migrate", uri=f"exec:cat > {path}")
            stats = qmp.wait_migration(300)
            seconds = time.monotonic() - started
            qmp.command("quit")
        finally:
            qmp.close()
    except QmpError as e:
        raise LabError(f"saving the VM failed: {e}") from None
    vm.process.wait(30)
    ram = stats.get("ram") or {}
    return {"save_seconds": round(seconds, 2), "ram_transferred": ram.get("transferred")}
