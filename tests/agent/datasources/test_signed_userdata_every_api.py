"""Signed user-data through every metadata API the agent reads and ``cloudseed serve`` serves, in network
namespaces: the registry's key trusted, the user-data (and vendor-data) is applied; another key
trusted, it is refused and the status says why; changed on its way (a man in the middle,
``tamper_proxy.py``), it is refused and the changed data is not applied either; and without the
trust settings, no signature is asked for and nothing is imported for it.

One lab for all the clouds: the cloud namespace holds the metadata addresses (169.254.169.254,
Scaleway's 169.254.42.42, AliYun's 100.100.100.200, Azure's wire server 168.63.129.16) and one
server; each cloud's instance is registered at its own guest address, which the guest takes
before the agent's network stage runs as that cloud (a fresh small root whose DMI files name it).
The instance ids are not numbers, so the clouds whose guests read another id (GCE's number,
Azure's vmId, DigitalOcean's droplet id...) check that the signature covers that one.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from cloudseed.agent.datasources.azure import ASSET_TAG
from tests.agent.datasources.cloudlab import CLOUDSEED
from tests.agent.datasources.netlab import PYTHON, REPO, NetLab, write_tree

WORD, CHANGED = "from-signed-user-data", "from-tamper-user-data"  # what the man in the middle changes
USER_DATA = f"#cloud-config\nwrite_files:\n  - {{path: /etc/{WORD}, content: seen}}\n"
VENDOR_DATA = "#cloud-config\nfqdn: from-vendor-data.example\n"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFxUb2ucdAlOtSz8xhq4hEx2SCJkATUwXPS8Zb9zmH5f someone-else"
MAAS_CREDS = {"consumer_key": "Cq7mXnbJvS4mB9Z2Ly", "token_key": "Hz3Vn8pTqJ2wR6yL5s",
              "token_secret": "PbYq7xKj2LmNw9RtZs4VcXu3HfGd8Ea1"}
SERVICE_ADDRESSES = ("169.254.42.42", "100.100.100.200", "168.63.129.16")
MARK = "0x5ec"
AZURE_OVF = """<?xml version="1.0" encoding="utf-8"?>
<ns0:Environment xmlns:ns0="http://schemas.dmtf.org/ovf/environment/1"
 xmlns:ns1="http://schemas.microsoft.com/windowsazure"><ns1:ProvisioningSection><ns1:Version>1.0</ns1:Version>
<ns1:LinuxProvisioningConfigurationSet>
<ns1:ConfigurationSetType>LinuxProvisioningConfiguration</ns1:ConfigurationSetType>
<ns1:UserName>azureuser</ns1:UserName><ns1:HostName>az-vm</ns1:HostName><ns1:CustomData>{custom}</ns1:CustomData>
</ns1:LinuxProvisioningConfigurationSet></ns1:ProvisioningSection></ns0:Environment>
"""

# cloud (the API's name) -> (datasource, DMI files, the datasource's settings, reads vendor-data from the API)
CLOUDS: dict[str, tuple[str, dict[str, str], dict, bool]] = {
    "ec2": ("Ec2", {"sys_vendor": "Amazon EC2", "product_uuid": "ec2a1b2c-0000-0000-0000-000000000001"}, {}, False),
    "openstack": ("OpenStack", {"product_name": "OpenStack Nova", "sys_vendor": "OpenStack Foundation"}, {}, True),
    "nocloud": ("NoCloud", {}, {"seedfrom": "http://169.254.169.254/nocloud/", "fs_label": None}, True),
    "gce": ("GCE", {"product_name": "Google Compute Engine"}, {}, False),
    "azure": ("Azure", {"chassis_asset_tag": ASSET_TAG}, {}, False),
    "digitalocean": ("DigitalOcean", {"sys_vendor": "DigitalOcean"}, {}, True),
    "hetzner": ("Hetzner", {"sys_vendor": "Hetzner"}, {}, True),
    "oracle": ("Oracle", {"chassis_asset_tag": "OracleCloud.com"}, {}, False),
    "vultr": ("Vultr", {"sys_vendor": "Vultr"}, {}, True),
    "upcloud": ("UpCloud", {"sys_vendor": "UpCloud", "product_uuid": "00e5a0b1-1c2d-4e3f-8a9b-0c1d2e3f4a5b"}, {},
                True),
    "nwcs": ("NWCS", {"sys_vendor": "NWCS"}, {}, True),
    "scaleway": ("Scaleway", {"sys_vendor": "Scaleway"}, {}, True),
    "akamai": ("Akamai", {"sys_vendor": "Linode", "product_name": "Compute Instance"}, {}, False),
    "cloudcix": ("CloudCIX", {"product_name": "CloudCIX"}, {}, False),
    "cloudstack": ("CloudStack", {"product_name": "CloudStack KVM Hypervisor"},
                   {"metadata_url": "http://169.254.169.254", "password_server": False}, False),
    "exoscale": ("Exoscale", {"product_name": "Exoscale Compute Platform"}, {}, False),
    "aliyun": ("AliYun", {"product_name": "Alibaba Cloud ECS"}, {}, False),
    "maas": ("MAAS", {}, {"metadata_url": "http://169.254.169.254/MAAS/metadata/", **MAAS_CREDS}, True),
}


class SignedLab:
    """The namespaces, ``cloudseed serve`` with one instance per cloud, and the guest's man in the middle."""

    def __init__(self, tmp: str):
        self.tmp = tmp
        self.lab = NetLab(extra_addresses=SERVICE_ADDRESSES)
        try:
            self.db = os.path.join(tmp, "server.db")
            self.prefix = self.lab.guest_ip.rsplit(".", 1)[0]
            self.addresses = {cloud: f"{self.prefix}.{20 + i}" for i, cloud in enumerate(CLOUDS)}
            self._register()
            self.key = subprocess.run([CLOUDSEED, "userdata", "key", "--db", self.db], capture_output=True,
                                      text=True, timeout=60, check=True).stdout.strip()
            self.access_log = os.path.join(tmp, "access.log")
            listen = [a for address in ("169.254.169.254", *SERVICE_ADDRESSES) for a in ("--listen", f"{address}:80")]
            self.server_log = open(os.path.join(tmp, "server.stderr"), "w+")  # noqa: SIM115 - until close()
            self.server = subprocess.Popen(["ip", "netns", "exec", self.lab.cloud, CLOUDSEED, "serve", "--db", self.db,
                                            *listen, "--rate-limit", "0", "--access-log", self.access_log],
                                           stdout=subprocess.DEVNULL, stderr=self.server_log)
            self.lab.procs.append(self.server)
            self._wait_for_server()
            with open(os.path.join(tmp, "user-data"), "w") as f:
                f.write(USER_DATA)
            self.port = 18000 + os.getpid() % 1000
            self.proxy_proc: subprocess.Popen | None = None
            self.table = f"tamper{os.getpid() % 100000}"
        except BaseException:
            self.close()
            raise

    def _register(self) -> None:
        from cloudseed.provider.registry import InstanceRecord, open_registry

        registry = open_registry(self.db)
        try:
            for cloud, address in self.addresses.items():
                clouds = {} if cloud in ("ec2", "openstack", "nocloud") else {cloud: {}}
                if cloud == "maas":
                    clouds = {"maas": dict(MAAS_CREDS)}
                registry.add(InstanceRecord.from_dict({
                    "instance_id": f"signed-{cloud}-vm", "hostname": f"{cloud}-vm",
                    "addresses": [{"address": address, "network": "default"}], "user_data": USER_DATA,
                    "vendor_data": VENDOR_DATA, "clouds": clouds}))
        finally:
            registry.close()

    def _wait_for_server(self) -> None:
        import time

        for _ in range(150):
            probe = self.lab.guest_exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "1",
                                        "http://169.254.169.254/", check=False)
            if probe.stdout.strip() not in ("", "000"):
                return
            if self.server.poll() is not None:
                self.server_log.seek(0)
                raise RuntimeError(f"cloudseed serve exited: {self.server_log.read()[-500:]}")
            time.sleep(0.1)
        raise RuntimeError("cloudseed serve did not answer")

    def become(self, cloud: str) -> None:
        """The guest takes ``cloud``'s instance address (the server knows instances by it)."""
        lab = self.lab
        lab.guest_exec("ip", "-4", "addr", "flush", "dev", lab.guest_if)
        lab.guest_exec("ip", "addr", "add", f"{self.addresses[cloud]}/24", "dev", lab.guest_if)
        for address in ("169.254.169.254", *SERVICE_ADDRESSES):
            lab.guest_exec("ip", "route", "replace", f"{address}/32", "via", lab.cloud_ip)

    def tamper(self, on: bool) -> None:
        """Start (or stop) the man in the middle: the guest's metadata connections go through it."""
        lab = self.lab
        if on:
            self.proxy_proc = subprocess.Popen(
                ["ip", "netns", "exec", lab.guest, PYTHON, os.path.join(os.path.dirname(__file__), "tamper_proxy.py"),
                 str(self.port), MARK, WORD, CHANGED, os.path.join(self.tmp, "user-data")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            lab.procs.append(self.proxy_proc)
            assert self.proxy_proc.stdout.readline().strip() == "ready", self.proxy_proc.stderr.read()
            addresses = ", ".join(("169.254.169.254", *SERVICE_ADDRESSES))
            script = (f"add table ip {self.table}\n"
                      f"add chain ip {self.table} out {{ type nat hook output priority -100; }}\n"
                      f"add rule ip {self.table} out meta mark != {MARK} ip daddr {{ {addresses} }} tcp dport 80 "
                      f"redirect to :{self.port}\n")
            proc = subprocess.run(["ip", "netns", "exec", lab.guest, "nft", "-f", "-"], input=script,
                                  capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, proc.stderr
            return
        lab.guest_exec("nft", "delete", "table", "ip", self.table, check=False)
        if self.proxy_proc is not None:
            self.proxy_proc.terminate()
            self.proxy_proc.wait(5)

    def changed_paths(self) -> list[str]:
        """The answers the man in the middle changed (after ``tamper(False)``)."""
        assert self.proxy_proc is not None
        return [line.split(" ", 1)[1] for line in self.proxy_proc.stdout.read().splitlines()
                if line.startswith("changed ")]

    def close(self) -> None:
        self.lab.close()
        if getattr(self, "server_log", None):
            self.server_log.close()


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not shutil.which("nft"):
        pytest.skip("needs nft (the man in the middle)")
    lab = SignedLab(str(tmp_path_factory.mktemp("signed-every-api")))
    yield lab
    lab.close()


# ``python -m cloudseed ARGS``, then the names of the modules the process loaded, on the first line of stdout
WITH_MODULES = ("import json, runpy, sys\n"
                "try:\n    runpy.run_module('cloudseed', run_name='__main__', alter_sys=True)\n"
                "except SystemExit:\n    pass\n"
                "loaded = sorted(m for m in sys.modules if m.startswith('cloudseed'))\n"
                "sys.__stdout__.write(json.dumps(loaded) + '\\n')\n")


def _boot(lab: SignedLab, cloud: str, trusted: str | None, tampered: bool = False,
          modules: bool = False) -> tuple[str, dict, list[str]]:
    """The agent's network stage as ``cloud`` in a fresh root; (the root, its init status, with
    ``modules`` the cloudseed modules the agent loaded)."""
    name, dmi, settings, _ = CLOUDS[cloud]
    top = tempfile.mkdtemp(prefix="cloudseed-signed-")
    cfg: dict = {"datasource_list": [name], "network": {"config": "disabled"},
                 "cloud_init_modules": ["write_files"], "cloud_config_modules": [], "cloud_final_modules": [],
                 "datasource": {name: {"max_wait": 5, "timeout": 5, "retries": 1, **settings}}}
    if trusted:
        cfg.update(trusted_userdata_keys=[trusted], require_signed_userdata=True)
    custom = USER_DATA.replace(WORD, CHANGED) if tampered else USER_DATA  # Azure's comes on its media
    write_tree(top, {**{f"sys/class/dmi/id/{k}": v + "\n" for k, v in dmi.items()},
                     "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
                     "etc/cloudseed/cloud.cfg": json.dumps(cfg)})
    if cloud == "azure":
        write_tree(top, {"var/lib/cloud/seed/azure/ovf-env.xml": AZURE_OVF.format(
            custom=base64.b64encode(custom.encode()).decode())})
    run = ["-c", WITH_MODULES] if modules else ["-m", "cloudseed"]
    proc = lab.lab.guest_exec(PYTHON, *run, "--root", top, "init", check=False, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    with open(os.path.join(top, "run/cloudseed/status.json")) as f:
        status = json.load(f)["v1"]
    assert status["datasource"] == name, (cloud, status["init"], proc.stderr[-2000:])
    return top, status["init"], json.loads(proc.stdout.splitlines()[-1]) if modules else []


def _requests_since(lab: SignedLab, before: int, cloud: str) -> list[str]:
    """The access log's lines after the first ``before``, once a marker request made now is in it (the
    log is written twice a second, in order)."""
    import time

    marker = f"/flushed-{cloud}-{before}"
    lab.lab.guest_exec("curl", "-s", "-o", "/dev/null", "-m", "5", f"http://169.254.169.254{marker}", check=False)
    for _ in range(50):
        with open(lab.access_log) as f:
            lines = f.readlines()[before:]
        if any(marker in line for line in lines):
            return [line for line in lines if marker not in line]
        time.sleep(0.1)
    raise AssertionError(f"the access log never showed {marker}")


def _log_length(lab: SignedLab, cloud: str) -> int:
    """How many lines the access log has once every request made so far is written to it (an
    earlier test's requests, written late, would otherwise count as this test's)."""
    with open(lab.access_log) as f:
        start = len(f.readlines())
    flushed = _requests_since(lab, start, f"{cloud}-start")
    return start + len(flushed) + 1  # the marker's own line too


def _fingerprint(key: str) -> str:
    import hashlib

    digest = hashlib.sha256(base64.b64decode(key.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _combined(top: str) -> dict:
    """The config the modules ran with (system, vendor-data, user-data merged)."""
    with open(os.path.join(top, "run/cloudseed/combined-cloud-config.json")) as f:
        return json.load(f)


def _instance_id(top: str) -> str:
    with open(os.path.join(top, "run/cloudseed/instance-data.json")) as f:
        return json.load(f)["v1"]["instance_id"]


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_signed_user_data_is_applied_refused_with_another_key_and_refused_when_changed(signed, cloud):
    lab = signed
    lab.become(cloud)
    vendor = CLOUDS[cloud][3]
    roots = []
    try:
        top, status, _ = _boot(lab, cloud, lab.key)  # the registry's key: applied (vendor-data too)
        roots.append(top)
        assert status["errors"] == [], status
        assert os.path.exists(os.path.join(top, f"etc/{WORD}"))
        assert ("fqdn" in _combined(top)) == vendor
        instance_id = _instance_id(top)

        top, status, _ = _boot(lab, cloud, OTHER_KEY)  # another key: refused, and the status says why
        roots.append(top)
        assert not os.path.exists(os.path.join(top, f"etc/{WORD}"))
        refused = [e for e in status["errors"] if e.startswith("user-data not applied")]
        assert refused == [f"user-data not applied: its signature does not verify against trusted_userdata_keys "
                           f"for instance {instance_id!r} (signed by {_fingerprint(lab.key)}, a key not in "
                           f"trusted_userdata_keys)"]

        if cloud != "azure":  # Azure's user-data comes on the provisioning media: changed there below
            lab.tamper(True)
        try:
            top, status, _ = _boot(lab, cloud, lab.key, tampered=True)  # changed on its way: refused
            roots.append(top)
        finally:
            if cloud != "azure":
                lab.tamper(False)
                assert lab.changed_paths(), "the man in the middle changed nothing"
        assert not os.path.exists(os.path.join(top, f"etc/{WORD}"))
        assert not os.path.exists(os.path.join(top, f"etc/{CHANGED}"))  # nor the changed data
        assert any(e.startswith("user-data not applied: its signature does not verify") for e in status["errors"]), \
            status["errors"]
    finally:
        for top in roots:
            shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_without_trust_settings_no_signature_is_asked_for_and_nothing_imported(signed, cloud):
    lab = signed
    lab.become(cloud)
    before = _log_length(lab, cloud)
    top, status, imported = _boot(lab, cloud, None, modules=True)
    try:
        assert status["errors"] == [] and os.path.exists(os.path.join(top, f"etc/{WORD}"))
        assert f"cloudseed.agent.datasources.{CLOUDS[cloud][0].lower()}" in imported  # (the list is read right)
        assert not set(imported) & {"cloudseed.agent.userdata_trust", "cloudseed.core.userdata_signatures"}
        requests = _requests_since(lab, before, cloud)
        assert requests and not [line for line in requests if ".sig" in line], requests
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_the_server_s_signature_is_what_instances_signature_prints(signed):
    """``cloudseed instances signature`` gives the bytes the guest fetched for GCE (its number as the id)."""
    lab = signed
    lab.become("gce")
    fetched = lab.lab.guest_exec("curl", "-s", "-H", "Metadata-Flavor: Google",
                                 "http://169.254.169.254/computeMetadata/v1/instance/attributes/user-data.sig").stdout
    printed = subprocess.run([CLOUDSEED, "instances", "--db", lab.db, "signature", "signed-gce-vm", "--api", "gce"],
                             capture_output=True, text=True, timeout=60, cwd=REPO)
    assert printed.returncode == 0, printed.stderr
    assert fetched.startswith("-----BEGIN SSH SIGNATURE-----") and printed.stdout == fetched
