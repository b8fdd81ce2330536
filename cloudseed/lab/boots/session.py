"""One lab boot from start to report: image, seed or metadata server, VM, console, results.

``run_boot`` starts the VM, waits for the agent to finish (its final marker, then the lab
collector's lines) and for SSH, and returns a ``BootResult`` with the timeline, the agent's
status and result as the collector reported them, and the VM (still running when ``keep``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from cloudseed.lab.images.image import Image
from cloudseed.lab.machine.console import Event
from cloudseed.lab.machine.vm import VirtualMachine, VmSpec


@dataclass
class StageTiming:
    name: str
    started_at: Optional[float] = None  # seconds since power-on (host clock)
    finished_at: Optional[float] = None
    seconds: Optional[float] = None  # as the agent measured it
    modules: int = 0
    errors: int = 0


@dataclass
class BootResult:
    accel: str
    accel_reason: str
    image: Image
    workdir: str
    console_log: str
    overlay: str
    kernel_at: Optional[float] = None
    stages: dict[str, StageTiming] = field(default_factory=dict)
    agent_done_at: Optional[float] = None
    collected_at: Optional[float] = None
    ssh_ready_at: Optional[float] = None
    status: Any = None
    result: Any = None
    timed_out: bool = False
    metadata_requests: Optional[int] = None
    vm: Optional[VirtualMachine] = None
    agent_log: Optional[str] = None  # cloud-init's log, read back from the disk (its status has no modules)
    released_at: Optional[float] = None  # a try restored from a snapshot: when the gate let the agent start
    milestones: list[tuple[str, str, float]] = field(default_factory=list)  # systemd targets reached: name, what, when
    units: list[tuple[str, str, float]] = field(default_factory=list)  # units started or finished (whole names only)
    unit_starts: dict[str, float] = field(default_factory=dict)  # when systemd said it was starting each unit
    inspected: Any = None  # what ``run_boot(inspect=...)`` asked the guest once the agent was done

    @property
    def agent_seconds(self) -> Optional[float]:
        """Total agent time: the sum of the stage durations the agent reported."""
        own = [s.seconds for s in self.stages.values() if s.seconds is not None]
        if own:
            return sum(own)
        from cloudseed.lab.reports.agent_report import summarize

        reported = [s["seconds"] for s in summarize(self.status, self.result)["stages"].values()
                    if s.get("seconds") is not None]
        return sum(reported) if reported else None


def apply_event(result: BootResult, event: Event) -> None:
    """Record what one console event says in ``result``."""
    if event.kind == "kernel" and result.kernel_at is None:
        result.kernel_at = event.at
    elif event.kind == "stage-start":
        result.stages.setdefault(event.stage, StageTiming(event.stage)).started_at = event.at
    elif event.kind == "stage-done":
        timing = result.stages.setdefault(event.stage, StageTiming(event.stage))
        timing.finished_at, timing.seconds = event.at, event.seconds
        timing.modules, timing.errors = event.modules, event.errors
    elif event.kind == "agent-done":
        result.agent_done_at = event.at
    elif event.kind == "collected":
        if event.stage == "status":
            result.status = event.data
        elif event.stage == "result":
            result.result = event.data
        else:
            result.collected_at = event.at
    elif event.kind == "ssh-ready":
        result.ssh_ready_at = event.at
    elif event.kind == "gate" and event.stage == "released":
        result.released_at = event.at
    elif event.kind == "target":
        result.milestones.append((event.stage, str(event.data), event.at))
    elif event.kind == "unit":
        result.units.append((event.stage, str(event.data), event.at))
    elif event.kind == "unit-start":
        result.unit_starts.setdefault(event.stage, event.at)


def run_boot(image: Image, workdir: str, accel: str = "tcg", accel_reason: str = "",
             seeds: Optional[list[str]] = None, metadata_port: Optional[int] = None,
             platform: Optional[str] = None, overlay: Optional[str] = None, timeout: float = 420,
             ssh_timeout: float = 30, keep: bool = False,
             progress: Optional[Callable[[Event], None]] = None, disks: Optional[list[str]] = None,
             forwards: Optional[list[tuple[str, int, int]]] = None, kernel_args: str = "",
             inspect: Optional[Callable[[Any], Any]] = None) -> BootResult:
    """Boot, wait for the agent and the collector, stop the VM unless ``keep``. ``kernel_args`` are
    added to the kernel command line (``cc: ... end_cc``: configuration the image would carry).

    ``inspect(channel)``: called with the guest helper's exec channel (``lab/machine/channel.py``) once the
    agent is done, its answer kept in ``inspected`` (facts for checks, the state for --compare).
    """
    if inspect is not None:
        kernel_args = f"{kernel_args} cloudseed.lab.exec".strip()
    spec = VmSpec(image=image, workdir=workdir, seeds=list(seeds or []), metadata_port=metadata_port,
                  platform=platform, accel=accel, overlay=overlay, disks=list(disks or []),
                  forwards=list(forwards or []), kernel_args=kernel_args, channels=inspect is not None)
    holder: dict[str, BootResult] = {}

    def on_event(event: Event) -> None:
        if "r" in holder:
            apply_event(holder["r"], event)
        if progress:
            progress(event)

    vm = VirtualMachine(spec, on_event=on_event)
    result = BootResult(accel=accel, accel_reason=accel_reason, image=image, workdir=workdir,
                        console_log="", overlay=vm.overlay, vm=vm)
    holder["r"] = result
    vm.start()
    result.console_log = vm.console_log
    started = time.monotonic()
    done = vm.wait_event(lambda e: e.kind == "collected" and e.stage == "done", timeout)
    if done is None:
        result.timed_out = True
    else:
        remaining = max(0.0, ssh_timeout - (time.monotonic() - started - done.at))
        vm.wait_ssh(remaining)
        if inspect is not None:
            inspected = _inspect(vm, inspect)
    # events that raced the holder being set are replayed
    if vm.console:
        fresh = BootResult(accel=accel, accel_reason=accel_reason, image=image, workdir=workdir,
                           console_log=result.console_log, overlay=vm.overlay, vm=vm)
        for event in list(vm.console.events):
            apply_event(fresh, event)
        fresh.ssh_ready_at = vm.ssh_ready_at
        fresh.timed_out = result.timed_out
        result = fresh
    if done is not None and inspect is not None:
        result.inspected = inspected
    if not keep:
        vm.stop()
        if image.agent == "reference":
            result.agent_log = _read_back(vm.overlay, "/var/log/cloud-init.log")
            if result.agent_log is not None:  # kept beside the console log
                with open(os.path.join(workdir, "cloud-init.log"), "w") as handle:
                    handle.write(result.agent_log)
    return result


def replay(console_log: str, image: Image, accel: str = "tcg", accel_reason: str = "") -> BootResult:
    """A BootResult from a console log the lab kept (what a boot's events said, without the VM)."""
    from cloudseed.lab.machine.console import parse_event, read_log

    result = BootResult(accel=accel, accel_reason=accel_reason, image=image, workdir=os.path.dirname(console_log),
                        console_log=console_log, overlay="")
    for line in read_log(console_log):
        event = parse_event(line)
        if event:
            apply_event(result, event)
    return result


def _inspect(vm: VirtualMachine, inspect: Callable[[Any], Any]) -> Any:
    from cloudseed.lab.machine.channel import EXEC_PORT, Channel, ChannelError

    channel = Channel(vm.exec_path, EXEC_PORT)
    try:
        return inspect(channel.connect())
    except ChannelError as e:
        return {"error": str(e)}
    finally:
        channel.close()


def _read_back(overlay: str, path: str) -> Optional[str]:
    """A file from the stopped guest's disk (None, with a note on stderr, when it cannot be read)."""
    import sys

    from cloudseed.lab.images.readback import GuestDisk, ReadbackError

    try:
        with GuestDisk.from_overlay(overlay) as disk:
            return disk.text(path)
    except (ReadbackError, OSError) as e:
        print(f"lab: cannot read {path} back from {overlay}: {e}", file=sys.stderr)
        return None
