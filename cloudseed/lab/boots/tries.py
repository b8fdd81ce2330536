"""One try of a cloud-config on a restored VM: seed, restore, release, the agent's records, checks.

``TrySession`` holds the image, the delivery (how the data reaches the guest) and the snapshot
(``machine/snapshot.py``); ``run_try`` takes the files as they are now, restores a VM from the snapshot
with the new seed (or a metadata server with the new record), waits until the agent is done,
asks the guest for the facts the checks need (and the system state for ``--compare``), stops the
VM and returns a ``Try``: a ``BootResult`` like a full boot's, whose times count from the moment
the try started (reading the files), and the time the whole try took.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from cloudseed.lab.boots.delivery import Delivery
from cloudseed.lab.boots.session import BootResult, apply_event
from cloudseed.lab.images.image import Image
from cloudseed.lab.machine.channel import ChannelError
from cloudseed.lab.machine.console import Event
from cloudseed.lab.machine.snapshot import Shape, Snapshot
from cloudseed.lab.machine.vm import free_port
from cloudseed.lab.reports.checks import Check, Expectations, judge, queries


@dataclass
class Try:
    number: int
    result: BootResult
    seconds: float = 0.0  # from reading the files to the agent's records, facts and state collected
    restored_in: float = 0.0  # from reading the files to the guest released
    checks: Optional[list[Check]] = None
    state: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    timings: dict[str, float] = field(default_factory=dict)
    network: Optional[dict[str, Any]] = None  # what became of the snapshot's network (guest/labnet.py)


class TrySession:
    def __init__(self, image: Image, delivery: Delivery, accel: str, accel_reason: str, workdir: str,
                 timeout: float = 300, expect: Optional[Expectations] = None,
                 progress: Optional[Callable[[Event], None]] = None, say: Optional[Callable[[str], None]] = None):
        self.image, self.delivery = image, delivery
        self.accel, self.accel_reason = accel, accel_reason
        self.workdir, self.timeout, self.expect = workdir, timeout, expect
        self.progress, self.say = progress, say or (lambda text: None)
        # the network is raised in the snapshot where no metadata service is asked over it (a
        # datasource that brings up its own ephemeral DHCP would find it up, unlike a real boot)
        shape = Shape(seeds=len(delivery.seed_kinds), platform=delivery.platform, metadata=bool(delivery.platform),
                      accel=accel, seed_kinds=delivery.seed_kinds, network=not delivery.platform)
        self.snapshot = Snapshot(image, shape)

    def prepare(self) -> Snapshot:
        """The snapshot, made now if no earlier session left one for this image and datasource shape."""
        port = free_port() if self.delivery.platform else None  # nothing asks it before the gate
        self.snapshot.ensure(self.delivery.placeholders, metadata_port=port, progress=self.say)
        if self.snapshot.made_in is not None:
            self.say(f"snapshot saved in {self.snapshot.made_in:.0f}s; each try restores it")
        return self.snapshot

    def run_try(self, number: int, delivery: Optional[Delivery] = None, workdir: Optional[str] = None,
                collect_state: bool = False) -> Try:
        delivery = delivery or self.delivery
        workdir = workdir or os.path.join(self.workdir, f"try-{number}")
        started = time.monotonic()
        spec = delivery.spec()
        seeds, server = delivery.prepare(workdir, spec)
        result = BootResult(accel=self.accel, accel_reason=f"{self.accel_reason}; restored from a snapshot",
                            image=self.image, workdir=workdir, console_log="",
                            overlay=os.path.join(workdir, "overlay.qcow2"))
        outcome = Try(number, result)
        with server as running:
            vm, channel = self.snapshot.start_try(workdir, seeds, running.port if running else None,
                                                  on_event=self.progress, origin=started)
            result.vm, result.console_log = vm, vm.console_log
            outcome.restored_in = time.monotonic() - started
            try:
                self._ask(outcome, channel, workdir, started, collect_state)
                if running:
                    result.metadata_requests = running.request_count()
            except BaseException:
                vm.kill()
                raise
            finally:
                channel.close()
        outcome.seconds = time.monotonic() - started
        if vm.console:
            for event in list(vm.console.events):
                apply_event(result, event)
        result.ssh_ready_at = vm.ssh_ready_at
        vm.kill()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(vm.overlay)
        return outcome

    def _ask(self, outcome: Try, channel, workdir: str, started: float, collect_state: bool) -> None:
        """The agent's records, the facts the checks need, the state: from the guest's exec loop."""
        result = outcome.result
        asked = {"queries": queries(self.expect)} if self.expect is not None else {}
        try:  # the facts the checks need come with the agent's records, asked for in the same request
            records = channel.request("agent", wait=self.timeout + 10, timeout=self.timeout, **asked)
            answered = time.monotonic() - started
            outcome.timings["agent"] = answered - float(records.pop("facts_seconds", 0) or 0)
            if "error" in records:
                result.timed_out, outcome.error = True, records["error"]
                return
            facts = records.pop("facts", None)
            result.status, result.result = records.get("status"), records.get("result")
            result.agent_log = records.get("log")
            outcome.network = records.get("network")
            _keep(workdir, "agent-records.json", records)
            if self.expect is not None:
                if facts is None:  # a guest helper that answers the agent's records alone
                    facts = channel.request("facts", queries=asked["queries"], wait=600)["facts"]
                _keep(workdir, "facts.json", facts)
                outcome.checks = judge(self.expect, facts, result.status, result.result, result.agent_log)
                outcome.timings["checks"] = time.monotonic() - started
            if collect_state:  # what changed since the release (the snapshot's own boot is older)
                outcome.state = channel.request("state", since=_released_time(channel), wait=600)["state"]
        except ChannelError as e:
            result.timed_out, outcome.error = True, str(e)


def _keep(workdir: str, name: str, data: Any) -> None:
    """The guest's answers beside the console log, for a look afterwards."""
    import json

    with open(os.path.join(workdir, name), "w") as handle:
        json.dump(data, handle, indent=1)


def _released_time(channel) -> Optional[float]:
    """When the gate released the guest, by the guest's (corrected) clock."""
    import json

    reply = channel.request("exec", argv=["cat", "/run/cloudseed-lab/released"], timeout=10, wait=20)
    try:
        return float(json.loads(reply.get("stdout") or "{}").get("at"))
    except (ValueError, TypeError):
        return None

