"""A metadata server for one lab VM: ``cloudseed serve`` on host loopback with a throw-away registry.

The guest reaches it at 169.254.169.254:80 through qemu's guestfwd, which connects from the
host's 127.0.0.1, so the instance is registered with that address in a temporary SQLite
registry made from the lab's InstanceSpec (from files or copied from the user's registry).
The same listener answers every platform's paths (Azure's wire server too: the lab forwards
168.63.129.16:80 to it), and the registry keeps what the guest reported (``azure_health``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Optional

from cloudseed.lab.machine.vm import LabError, free_port
from cloudseed.provider.seeds.spec import InstanceSpec


class MetadataServer:
    def __init__(self, spec: InstanceSpec, workdir: str, imds_tokens: Optional[str] = None):
        self.spec = spec
        self.workdir = workdir
        self.imds_tokens = imds_tokens
        self.port = free_port()
        self.db = os.path.join(workdir, "registry.db")
        self.access_log = os.path.join(workdir, "metadata-access.log")
        self.process: Optional[subprocess.Popen] = None

    def _cli(self, *args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "cloudseed", *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise LabError(f"cloudseed {' '.join(args[:3])}: {proc.stderr.strip() or proc.stdout.strip()}")

    def _register(self) -> None:
        spec = self.spec
        argv = ["instances", "--db", self.db, "add", "--id", spec.instance_id, "--address", "127.0.0.1"]
        if spec.hostname:
            argv += ["--hostname", spec.hostname]
        if spec.user_data is not None:
            path = os.path.join(self.workdir, "user-data")
            with open(path, "wb") as handle:
                handle.write(spec.user_data)
            argv += ["--user-data", path]
        for number, key in enumerate(spec.ssh_keys):
            path = os.path.join(self.workdir, f"key-{number}.pub")
            with open(path, "w") as handle:
                handle.write(key.data + "\n")
            argv += ["--ssh-key", path]
        if spec.availability_zone:
            argv += ["--availability-zone", spec.availability_zone]
        if self.imds_tokens:
            argv += ["--imds-tokens", self.imds_tokens]
        # the ids the lab's DMI strings carry (lab/machine/vm.py PLATFORMS): Hetzner checks its serial
        clouds = {"hetzner": {"numeric_id": 4242}, "digitalocean": {"droplet_id": 4242}}
        path = os.path.join(self.workdir, "clouds.json")
        with open(path, "w") as handle:
            json.dump(clouds, handle)
        argv += ["--clouds-json", path]
        self._cli(*argv)

    def __enter__(self) -> MetadataServer:
        os.makedirs(self.workdir, exist_ok=True)
        if os.path.exists(self.db):
            os.unlink(self.db)
        self._register()
        argv = [sys.executable, "-m", "cloudseed", "serve", "--db", self.db,
                "--listen", f"127.0.0.1:{self.port}", "--access-log", self.access_log, "--rate-limit", "0"]
        with open(os.path.join(self.workdir, "serve.err"), "a") as errors:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=errors, stderr=errors)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LabError(f"cloudseed serve exited {self.process.returncode}; see {self.workdir}/serve.err")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise LabError("cloudseed serve did not start listening within 20 s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def azure_health(self) -> Optional[dict]:
        """The last health report Azure's wire server emulation accepted from the guest (None: none)."""
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", self.db, "show",
                               self.spec.instance_id], capture_output=True, text=True)
        if proc.returncode != 0:
            raise LabError(f"cloudseed instances show: {proc.stderr.strip() or proc.stdout.strip()}")
        health = json.loads(proc.stdout).get("azure_health")
        return health if isinstance(health, dict) else None

    def request_count(self) -> int:
        try:
            with open(self.access_log) as handle:
                return sum(1 for line in handle if line.strip())
        except OSError:
            return 0
