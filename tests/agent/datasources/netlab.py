"""Network namespaces for datasource tests: a "cloud" side and a "guest" side joined by a veth pair.

The cloud namespace owns 169.254.169.254 and fd00:ec2::254 (the metadata addresses; more with
``extra_addresses``, routed from the guest) and
10.77.N.1/24; the guest namespace gets 10.77.N.2/24 and a host route to the metadata address
(or nothing, for DHCP tests). Code runs in the guest with ``guest_python``; servers run in the
cloud namespace with ``start_in``. Everything is deleted on ``close``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON = os.path.join(REPO, ".venv", "bin", "python")
if not os.path.exists(PYTHON):
    PYTHON = sys.executable
_COUNTER = itertools.count(1)


def sh(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()}")
    return proc


class NetLab:
    def __init__(self, guest_configured: bool = True, metadata_v4: bool = True, metadata_v6: bool = True,
                 extra_addresses: tuple[str, ...] = ()):
        n = next(_COUNTER)
        tag = f"{os.getpid() % 100000}x{n}"
        self.subnet = 10 + (os.getpid() + n) % 200
        self.cloud = f"csdc{tag}"
        self.guest = f"csdg{tag}"
        self.cloud_if, self.guest_if = f"vc{tag}"[:15], f"vg{tag}"[:15]
        self.cloud_ip = f"10.77.{self.subnet}.1"
        self.guest_ip = f"10.77.{self.subnet}.2"
        self.procs: list[subprocess.Popen] = []
        sh("ip", "netns", "add", self.cloud)
        sh("ip", "netns", "add", self.guest)
        try:
            sh("ip", "link", "add", self.cloud_if, "netns", self.cloud, "type", "veth",
               "peer", "name", self.guest_if, "netns", self.guest)
            self.cloud_exec("ip", "link", "set", "lo", "up")
            self.guest_exec("ip", "link", "set", "lo", "up")
            self.cloud_exec("ip", "addr", "add", f"{self.cloud_ip}/24", "dev", self.cloud_if)
            if metadata_v4:
                self.cloud_exec("ip", "addr", "add", "169.254.169.254/32", "dev", self.cloud_if)
            for extra in extra_addresses:  # other metadata addresses (Scaleway's 169.254.42.42...)
                self.cloud_exec("ip", "addr", "add", f"{extra}/{128 if ':' in extra else 32}", "dev", self.cloud_if,
                                *(["nodad"] if ":" in extra else []))
            v6 = "fd00:ec2::254/64" if metadata_v6 else "fd00:ec2::1/64"  # ::254 then goes nowhere
            self.cloud_exec("ip", "-6", "addr", "add", v6, "dev", self.cloud_if, "nodad")
            self.cloud_exec("ip", "link", "set", self.cloud_if, "up")
            self.guest_exec("ip", "link", "set", self.guest_if, "up")
            if guest_configured:
                self.guest_exec("ip", "addr", "add", f"{self.guest_ip}/24", "dev", self.guest_if)
                self.guest_exec("ip", "route", "add", "169.254.169.254/32", "via", self.cloud_ip)
                self.guest_exec("ip", "-6", "addr", "add", "fd00:ec2::2/64", "dev", self.guest_if, "nodad")
                for extra in extra_addresses:
                    if ":" in extra:
                        self.guest_exec("ip", "-6", "route", "add", f"{extra}/128", "via", "fd00:ec2::254"
                                        if metadata_v6 else "fd00:ec2::1", "dev", self.guest_if)
                    else:
                        self.guest_exec("ip", "route", "add", f"{extra}/32", "via", self.cloud_ip)
        except Exception:
            self.close()
            raise

    def cloud_exec(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.cloud, *args, check=check, timeout=timeout)

    def guest_exec(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.guest, *args, check=check, timeout=timeout)

    def start_in_cloud(self, *args: str, ready: str | None = None, timeout: float = 15) -> subprocess.Popen:
        """Start a long-running process in the cloud namespace; wait for ``ready`` on its stdout."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.cloud, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        if ready:
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"{args[0]} exited: {proc.stderr.read()}")
                if ready in line:
                    break
        return proc

    def guest_python(self, code: str, timeout: float = 60) -> dict:
        """Run ``code`` in the guest namespace; it must print one JSON document last."""
        proc = self.guest_exec(PYTHON, "-c", code, check=False, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"guest code failed ({proc.returncode}):\n{proc.stderr}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["_stderr"] = proc.stderr
        return result

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
        for ns in (self.guest, self.cloud):
            sh("ip", "netns", "del", ns, check=False)


FIND_CODE = """
import base64, json, logging, sys, time
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
from cloudseed.core.root import TargetRoot
from cloudseed.agent.state import Paths
from cloudseed.agent.datasources import DatasourceContext, find_datasource
root = TargetRoot(ROOT)
ctx = DatasourceContext(root=root, cfg=json.loads(CFG), cmdline=CMDLINE, paths=Paths(root), stage=STAGE)
started = time.monotonic()
search = find_datasource(ctx, NAMES)
out = {"took": time.monotonic() - started, "errors": search.errors, "tried": search.tried, "ds": None}
ds = search.datasource
if ds is not None:
    out["ds"] = ds.to_json()
    for key in ("userdata_raw", "vendordata_raw", "vendordata2_raw"):
        value = out["ds"][key]
        out["ds"][key] = None if value is None else base64.b64decode(value).decode("utf-8", "replace")
    out["address"] = getattr(ds, "metadata_address", None)
    out["imds"] = getattr(ds, "imds_version", None)
    out["warnings"] = getattr(ds, "warnings", [])
print(json.dumps(out))
"""


def find_in_guest(lab: NetLab, root: str, names: list, cfg: dict | None = None, stage: str = "network",
                  timeout: float = 60, cmdline: str = "") -> dict:
    """Run ``find_datasource`` in the guest namespace against target root ``root``."""
    code = (FIND_CODE.replace("ROOT", repr(root)).replace("CFG", repr(json.dumps(cfg or {})))
            .replace("STAGE", repr(stage)).replace("CMDLINE", repr(cmdline)).replace("NAMES", repr(names)))
    return lab.guest_python(code, timeout=timeout)


SCRIPTED_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripted_server.py")


def find_against_script(root: str, script: dict, facts: dict, names: list, cfg: dict,
                        address: str = "169.254.169.254") -> tuple[dict, float]:
    """``find_in_guest`` for ``names`` in a guest whose root ``root`` holds ``facts`` (files), against
    ``scripted_server.py`` answering ``script`` at ``address``:80 in a fresh lab; and the seconds it
    took. Skips without root (network namespaces)."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    extra = () if address == "169.254.169.254" else (address,)
    lab = NetLab(extra_addresses=extra)
    try:
        lab.start_in_cloud(PYTHON, SCRIPTED_SERVER, address, "80", json.dumps(script), ready="ready")
        write_tree(root, facts)
        started = time.monotonic()
        out = find_in_guest(lab, root, names, cfg=cfg)
        return out, time.monotonic() - started
    finally:
        lab.close()


def write_tree(top, files: dict) -> None:
    """Create ``files`` ({relative path: text or bytes}) under ``top``."""
    for name, content in files.items():
        path = os.path.join(str(top), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
