"""Debian's cloud-init 22.4 datasources for GCE, DigitalOcean, Hetzner and Oracle as real clients of
``cloudseed serve``: shared by tests/provider/server/test_{gce,digitalocean,hetzner,oracle}_api.py.

``CloudNamespaces``: ``srv`` runs the server on 169.254.169.254:80 (``metadata_ip``: another
address, e.g. Scaleway's 169.254.42.42), ``gst`` (10.86.N.5) is wired
to it; ``gst`` gets its own ``/etc/hosts`` (``metadata.google.internal`` is 169.254.169.254) and a
``resolv.conf`` naming no reachable server, through ``/etc/netns/GST/`` (``ip netns exec`` mounts
those over ``/etc``). ``reference_in`` runs Python with the reference importable in ``gst``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.provider.server.server_support import ServerProcess
from tests.reference import SYSTEM_PYTHON, _env, reference_tree

_N = itertools.count(1)

COMMON = """
import json, sys
from cloudinit import distros, helpers
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
def report(src, ok, **extra):
    ud = src.userdata_raw
    print(json.dumps({"ok": ok, "metadata": src.metadata,
                      "userdata": ud.decode() if isinstance(ud, bytes) else ud,
                      "vendordata": src.vendordata_raw if isinstance(src.vendordata_raw, (str, type(None)))
                      else src.vendordata_raw.decode(),
                      "network_config": src.network_config if ok else None,
                      "keys": src.get_public_ssh_keys() if ok else None,
                      "instance_id": src.get_instance_id() if ok else None,
                      "hostname": src.get_hostname().hostname if ok else None,
                      "region": getattr(src, "region", None) if ok else None,
                      "availability_zone": getattr(src, "availability_zone", None) if ok else None,
                      **extra}, default=str))
"""


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class CloudNamespaces:
    def __init__(self, db_url: str, tmp: str, metadata_ip: str = "169.254.169.254",
                 extra_addresses: tuple[str, ...] = (), serve_extra: tuple[str, ...] = (),
                 config: dict | None = None):
        """``extra_addresses``: more addresses the server listens on (port 80), routed from ``gst``
        as the metadata address is (Azure's wire server at 168.63.129.16). ``serve_extra``: more
        ``cloudseed serve`` flags; ``ROUTER`` in them is ``router_ip``, the server namespace's
        address on the guest's link (CloudStack's virtual router). ``config``: server settings."""
        if os.geteuid() != 0:
            pytest.skip("network namespaces need root")
        n = next(_N)
        tag = f"cr{os.getpid() % 100000}x{n}"
        self.srv, self.gst = f"{tag}s", f"{tag}g"
        self.guest_ip = f"10.86.{n % 250}.5"
        self.router_ip = f"10.86.{n % 250}.1"
        self.etc = f"/etc/netns/{self.gst}"
        self.server = None
        try:
            ip("netns", "add", self.srv)
            ip("netns", "add", self.gst)
            for ns in (self.srv, self.gst):
                ip("-n", ns, "link", "set", "lo", "up")
            ip("link", "add", f"{tag}v", "netns", self.srv, "type", "veth", "peer", "name", "eth0", "netns", self.gst)
            ip("-n", self.srv, "addr", "add", f"{metadata_ip}/32", "dev", "lo")
            ip("-n", self.srv, "addr", "add", f"10.86.{n % 250}.1/24", "dev", f"{tag}v")
            ip("-n", self.gst, "addr", "add", f"{self.guest_ip}/24", "dev", "eth0")
            ip("-n", self.srv, "link", "set", f"{tag}v", "up")
            ip("-n", self.gst, "link", "set", "eth0", "up")
            ip("-n", self.gst, "route", "add", f"{metadata_ip}/32", "via", f"10.86.{n % 250}.1")
            for extra in extra_addresses:
                ip("-n", self.srv, "addr", "add", f"{extra}/32", "dev", "lo")
                ip("-n", self.gst, "route", "add", f"{extra}/32", "via", f"10.86.{n % 250}.1")
            out = subprocess.run(["ip", "-n", self.gst, "-j", "link", "show", "eth0"], check=True,
                                 capture_output=True, text=True).stdout
            self.mac = json.loads(out)[0]["address"]
            os.makedirs(self.etc, exist_ok=True)
            with open(f"{self.etc}/hosts", "w") as f:
                f.write("127.0.0.1 localhost\n169.254.169.254 metadata.google.internal metadata\n")
            with open(f"{self.etc}/resolv.conf", "w") as f:
                f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
            self.server = ServerProcess(db_url, tmp, [f"{metadata_ip}:80", *(f"{a}:80" for a in extra_addresses)],
                                        extra=["--rate-limit", "0",
                                               *(a.replace("ROUTER", self.router_ip) for a in serve_extra)],
                                        netns=self.srv, config=config)
        except BaseException:
            self.close()
            raise

    def reference_in(self, code: str, tmp: str) -> dict:
        if reference_tree() is None:
            pytest.skip("Debian's cloud-init could not be fetched")
        proc = subprocess.run(["ip", "netns", "exec", self.gst, SYSTEM_PYTHON, "-c", textwrap.dedent(code), tmp],
                              env=_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        for ns in (self.srv, self.gst):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(self.etc, ignore_errors=True)

    def python_in(self, namespace: str, code: str, *args: str, timeout: float = 120, env: dict | None = None) -> dict:
        """This test run's Python (with the clouds' SDKs) running ``code`` in ``namespace`` (``self.gst`` or
        ``self.srv``), ``env`` added to its environment; its last output line is JSON."""
        env = {**{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}, **(env or {})}
        proc = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", textwrap.dedent(code), *args],
                              env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])


def verified_claims(server: ServerProcess, token: str, audience: str) -> dict:
    """The claims of a token the server signed (an Azure managed identity's access token, a GCE
    identity token), its signature checked with PyJWT against the JWK Set the admin listener
    publishes, and its audience."""
    import jwt

    keys = jwt.PyJWKSet.from_dict(json.loads(server.admin("GET", "/v1/keys/jwks", token=None).text))
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    return jwt.decode(token, key.key, algorithms=["RS256"], audience=audience)
