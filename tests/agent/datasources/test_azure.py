"""The Azure datasource: ovf-env.xml (hardened), IMDS network config, the wire server's ready report,
and a boot against ``cloudseed serve``'s Azure emulation with the provisioning ISO attached.

The guest namespace reaches IMDS at 169.254.169.254 and the wire server at 168.63.129.16 (both
addresses of the cloud namespace, one ``cloudseed serve`` listening on both); the ISO is built by
``cloudseed seed build --kind azure`` from the same registry record and attached as a loop device.
Debian's cloud-init 22.4 reads the same ovf-env.xml and builds the same network config.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import threading
import time

import pytest

from cloudseed.agent.datasources._azure_ovf import OvfError, parse
from cloudseed.agent.datasources._azure_wireserver import WireServerError, _decode_245, report_ready
from cloudseed.agent.datasources.azure import ASSET_TAG, network_config
from tests.agent.datasources.cloudlab import CLOUDSEED, KEY, DebianRoot, generators
from tests.agent.datasources.netlab import PYTHON, NetLab, find_in_guest, write_tree
from tests.reference import reference_python

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-azure-custom-data, content: seen}\n"
IID = "3f2d1c0b-aaaa-4bbb-8ccc-123456789abc"
DMI = {"chassis_asset_tag": ASSET_TAG, "sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}
AGENT_CFG = """\
cloud_init_modules: [write_files, set_hostname, update_etc_hosts, users_groups, ssh]
cloud_config_modules: []
cloud_final_modules: []
ssh_genkeytypes: [ed25519]
"""

OVF = f"""<?xml version="1.0" encoding="utf-8"?>
<ns0:Environment xmlns:ns0="http://schemas.dmtf.org/ovf/environment/1"
 xmlns:ns1="http://schemas.microsoft.com/windowsazure">
<ns1:ProvisioningSection><ns1:Version>1.0</ns1:Version>
<ns1:LinuxProvisioningConfigurationSet>
<ns1:ConfigurationSetType>LinuxProvisioningConfiguration</ns1:ConfigurationSetType>
<ns1:UserName>alice</ns1:UserName><ns1:UserPassword>S3cret-pass</ns1:UserPassword>
<ns1:SSH><ns1:PublicKeys>
<ns1:PublicKey><ns1:Fingerprint>6BE7A7C3C8A8F4B123CCA5D0C2F1BE4CA7B63ED7</ns1:Fingerprint>
<ns1:Path>/home/alice/.ssh/authorized_keys</ns1:Path></ns1:PublicKey>
<ns1:PublicKey><ns1:Fingerprint>AB</ns1:Fingerprint><ns1:Path>/home/alice/.ssh/authorized_keys</ns1:Path>
<ns1:Value>{KEY}</ns1:Value></ns1:PublicKey>
</ns1:PublicKeys></ns1:SSH>
<ns1:HostName>ovf-host</ns1:HostName><ns1:CustomData>{base64.b64encode(USER_DATA.encode()).decode()}</ns1:CustomData>
</ns1:LinuxProvisioningConfigurationSet></ns1:ProvisioningSection>
<ns1:PlatformSettingsSection><ns1:Version>1.0</ns1:Version><ns1:PlatformSettings>
<ns1:ProvisionGuestAgent>false</ns1:ProvisionGuestAgent><ns1:PreprovisionedVm>false</ns1:PreprovisionedVm>
</ns1:PlatformSettings></ns1:PlatformSettingsSection>
</ns0:Environment>
"""


# ---------------------------------------------------------------- ovf-env.xml
def test_ovf_fields_and_cloud_init_reads_the_same(tmp_path):
    env = parse(OVF)
    assert env.username == "alice" and env.password == "S3cret-pass" and env.hostname == "ovf-host"
    assert env.disable_ssh_password_auth is None and env.custom_data == USER_DATA.encode()
    assert env.key_values == [KEY] and len(env.public_keys) == 2  # one given by fingerprint only
    path = tmp_path / "ovf-env.xml"
    path.write_text(OVF)
    md, ud, cfg = reference_ovf(path)
    assert md["local-hostname"] == env.hostname and ud == USER_DATA
    assert cfg["system_info"]["default_user"]["name"] == env.username and cfg["ssh_pwauth"] is True
    assert [k["value"] for k in cfg["_pubkeys"] if k.get("value")] == env.key_values


def reference_ovf(path) -> tuple[dict, str, dict]:
    """cloud-init 22.4's read_azure_ovf on the file: (meta-data, user-data, config)."""
    out = reference_python(
        "import json,sys\nfrom cloudinit.sources.DataSourceAzure import read_azure_ovf\n"
        "md, ud, cfg = read_azure_ovf(open(sys.argv[1]).read())\n"
        "print(json.dumps([md, ud if isinstance(ud, str) else ud.decode(), cfg], default=str))", str(path))
    md, ud, cfg = json.loads(out.stdout.strip().splitlines()[-1])
    return md, ud, cfg


@pytest.mark.parametrize("document,why", [
    ('<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY a "aaaa">]><Environment>&a;</Environment>', "DTD"),
    ('<!doctype x SYSTEM "file:///etc/passwd"><x/>', "DTD"),
    ("<Environment>" + "x" * (1024 * 1024 + 1) + "</Environment>", "limit"),
    ("<Environment><unclosed></Environment>", "not XML"),
    ('<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"/>', "LinuxProvisioningConfigurationSet"),
])
def test_hostile_or_broken_ovf_is_refused_with_a_clear_error(document, why):
    with pytest.raises(OvfError, match=why):
        parse(document)


# ---------------------------------------------------------------- network config
IMDS_NETWORK = {"interface": [
    {"macAddress": "000D3A047598", "ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.4"},
                                                          {"privateIpAddress": "10.0.0.5"}],
                                            "subnet": [{"address": "10.0.0.0", "prefix": "24"}]},
     "ipv6": {"ipAddress": [{"privateIpAddress": "fd00::4"}], "subnet": [{"address": "fd00::", "prefix": "64"}]}},
    {"macAddress": "000D3A047599", "ipv4": {"ipAddress": [{"privateIpAddress": "10.1.0.4"}],
                                            "subnet": [{"address": "10.1.0.0", "prefix": "24"}]},
     "ipv6": {"ipAddress": []}},
    {"macAddress": "000D3A04759A", "ipv4": {"ipAddress": []}, "ipv6": {"ipAddress": []}},
]}


def test_network_config_is_cloud_init_22_4s():
    ours = network_config(IMDS_NETWORK)
    out = reference_python(
        "import json,sys\nfrom cloudinit.sources import DataSourceAzure as A\n"
        "A.device_driver = lambda name: None\n"
        "print(json.dumps(A.generate_network_config_from_instance_network_metadata(json.loads(sys.argv[1]))))",
        json.dumps(IMDS_NETWORK))
    assert ours == json.loads(out.stdout.strip().splitlines()[-1])
    assert ours["ethernets"]["eth1"]["dhcp4-overrides"] == {"route-metric": 200}
    assert "eth2" not in ours["ethernets"]


def test_option_245_decoding():
    assert _decode_245("a83f8110") == "168.63.129.16"
    assert _decode_245("a8:3f:81:10;") == "168.63.129.16"
    assert _decode_245("nonsense") is None


# ---------------------------------------------------------------- wire server bounds
def test_a_wire_server_that_never_answers_is_bounded():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accept and hold every connection, never answer
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        with pytest.raises(WireServerError, match="no complete answer"):
            report_ready(f"127.0.0.1:{listener.getsockname()[1]}", deadline=2.0, timeout=0.5, retries=10)
        assert time.monotonic() - started < 4.0
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


# ---------------------------------------------------------------- the seed builder
def test_seed_build_from_files_is_reproducible_and_read_back(tmp_path):
    from cloudseed.agent.seedfs import extract, read_label

    (tmp_path / "ud").write_text(USER_DATA)
    (tmp_path / "k.pub").write_text(KEY + "\n")
    args = [CLOUDSEED, "seed", "build", "--kind", "azure", "--instance-id", "i-files", "--hostname", "files-vm",
            "--user-data", str(tmp_path / "ud"), "--ssh-key", str(tmp_path / "k.pub")]
    for out in ("a.iso", "b.iso"):
        subprocess.run([*args, "-o", str(tmp_path / out)], check=True, capture_output=True, timeout=60)
    assert (tmp_path / "a.iso").read_bytes() == (tmp_path / "b.iso").read_bytes()
    assert read_label(str(tmp_path / "a.iso")) == ("iso9660", "rd_rdfe_stable.0")
    extract(str(tmp_path / "a.iso"), str(tmp_path / "x"))
    env = parse((tmp_path / "x" / "ovf-env.xml").read_bytes())
    assert (env.username, env.hostname, env.key_values, env.custom_data) == ("azureuser", "files-vm", [KEY],
                                                                              USER_DATA.encode())
    assert env.disable_ssh_password_auth is True and env.password is None
    md, ud, cfg = reference_ovf(tmp_path / "x" / "ovf-env.xml")  # cloud-init 22.4 reads our ISO's document
    assert md == {"local-hostname": "files-vm"} and ud == USER_DATA and cfg["ssh_pwauth"] is False
    assert cfg["system_info"]["default_user"] == {"name": "azureuser"}
    assert [k["value"] for k in cfg["_pubkeys"]] == [KEY]
    refused = subprocess.run([*args, "--fs", "vfat", "-o", str(tmp_path / "c.img")], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0 and "use --fs udf or iso9660" in refused.stderr


# ---------------------------------------------------------------- detection
def test_both_generators_enable_the_agent_on_azure(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the generators write under the root as root")
    for kind, verdict in generators(str(tmp_path), {"chassis_asset_tag": ASSET_TAG}).items():
        assert verdict.startswith("enabled") and "Azure (DMI chassis_asset_tag" in verdict, (kind, verdict)


def test_detection_from_the_seed_directory_and_the_media(tmp_path):
    from cloudseed.agent.datasources import DatasourceContext
    from cloudseed.agent.datasources.azure import Azure, _media_devices
    from cloudseed.agent.state import Paths
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(str(tmp_path))
    ctx = DatasourceContext(root=root, cfg={}, cmdline="", paths=Paths(root), stage="local")
    if not _media_devices():  # (another run's media attached on this host would be found)
        assert Azure.why(ctx) is None
    write_tree(tmp_path, {"var/lib/cloud/seed/azure/ovf-env.xml": OVF})
    assert "seed directory /var/lib/cloud/seed/azure" in Azure.why(ctx)
    started = time.monotonic()  # local stage, no Azure DMI tag: no temporary DHCP, the network stage reads it
    assert Azure(ctx).fetch() is False and time.monotonic() - started < 1
    ctx.cfg = {"datasource": {"Azure": {"max_wait": 0, "report_ready": False}}}  # media only: no network here
    ds = Azure(ctx)
    assert ds.fetch() is True
    assert ds.local_hostname == "ovf-host" and ds.public_keys == [KEY] and ds.userdata_raw == USER_DATA.encode()
    user = ds.extra["cloud_config"]["system_info"]["default_user"]
    assert user["name"] == "alice" and user["lock_passwd"] is False and user["hashed_passwd"].startswith("$6$")
    assert ds.extra["cloud_config"]["ssh_pwauth"] is True


# ---------------------------------------------------------------- against cloudseed serve
class AzureLab:
    """The cloud namespace serves IMDS and the wire server; the ISO from the same record is a loop device."""

    def __init__(self, tmp: str):
        self.tmp = tmp
        self.lab = NetLab()
        self.loop = ""
        try:
            lab = self.lab
            lab.cloud_exec("ip", "addr", "add", "168.63.129.16/32", "dev", lab.cloud_if)
            lab.guest_exec("ip", "route", "add", "168.63.129.16/32", "via", lab.cloud_ip)
            self.mac = json.loads(lab.guest_exec("ip", "-j", "link", "show", lab.guest_if).stdout)[0]["address"]
            self.db = os.path.join(tmp, "server.db")
            for name, text in (("key.pub", KEY + "\n"), ("user-data", USER_DATA),
                               ("clouds.json", json.dumps({"azure": {"location": "westeurope",
                                                                     "admin_username": "azadmin",
                                                                     "resource_group": "lab-rg"}}))):
                with open(os.path.join(tmp, name), "w") as f:
                    f.write(text)
            subprocess.run([CLOUDSEED, "instances", "--db", self.db, "add", "--id", IID, "--hostname", "az-vm",
                            "--address", f"{lab.guest_ip}/24", "--mac", self.mac,
                            "--ssh-key", os.path.join(tmp, "key.pub"),
                            "--user-data", os.path.join(tmp, "user-data"),
                            "--clouds-json", os.path.join(tmp, "clouds.json")],
                           check=True, capture_output=True, text=True, timeout=60)
            self.iso = os.path.join(tmp, "ovf.iso")
            subprocess.run([CLOUDSEED, "seed", "build", "--kind", "azure", "--db", self.db, "--instance", IID,
                            "-o", self.iso], check=True, capture_output=True, text=True, timeout=60)
            self.server = subprocess.Popen(["ip", "netns", "exec", lab.cloud, CLOUDSEED, "serve", "--db", self.db,
                                            "--listen", "169.254.169.254:80", "--listen", "168.63.129.16:80",
                                            "--rate-limit", "0"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            lab.procs.append(self.server)
            for _ in range(100):
                probe = lab.guest_exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "1",
                                       "http://168.63.129.16/machine/?comp=goalstate", check=False)
                if probe.stdout.strip() not in ("", "000"):
                    break
                if self.server.poll() is not None:
                    raise RuntimeError(f"cloudseed serve exited: {self.server.stderr.read()[-500:]}")
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def attach(self) -> str:
        self.loop = subprocess.run(["losetup", "--find", "--show", "--read-only", self.iso], check=True,
                                   capture_output=True, text=True).stdout.strip()
        return self.loop

    def show(self) -> dict:
        return json.loads(subprocess.run([CLOUDSEED, "instances", "--db", self.db, "show", IID], check=True,
                                         capture_output=True, text=True, timeout=60).stdout)

    def close(self) -> None:
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        self.lab.close()


@pytest.fixture(scope="module")
def azure(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, loop devices)")
    lab = AzureLab(str(tmp_path_factory.mktemp("azure")))
    try:
        lab.attach()
    except subprocess.CalledProcessError as e:
        lab.close()
        pytest.skip(f"no loop device: {e.stderr}")
    yield lab
    lab.close()


def test_imds_and_media_are_read_and_ready_is_reported(azure, tmp_path):
    write_tree(tmp_path, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    out = find_in_guest(azure.lab, str(tmp_path), ["Azure"])
    ds = out["ds"]
    assert ds is not None, out["_stderr"][-3000:]
    assert out["warnings"] == [], out["warnings"]
    assert ds["metadata"]["instance-id"] == IID and ds["metadata"]["local-hostname"] == "az-vm"
    assert ds["public_keys"] == [KEY] and ds["userdata_raw"] == USER_DATA
    assert ds["region"] == "westeurope" and ds["availability_zone"] == "0"
    assert f"provisioning media ({azure.loop})" in ds["subplatform"] and "IMDS" in ds["subplatform"]
    assert ds["extra"]["cloud_config"]["system_info"]["default_user"]["name"] == "azadmin"
    assert ds["network_config"]["ethernets"]["eth0"]["match"] == {"macaddress": azure.mac}
    health = azure.show()["azure_health"]
    assert health["state"] == "Ready" and health["incarnation"] == "1"
    assert health["instance"] == f"{IID}.az-vm"
    # cloud-init 22.4 reads the same user, keys, hostname and custom data from this ISO
    from cloudseed.agent.seedfs import extract

    extract(azure.iso, str(tmp_path / "iso"))
    md, ud, cfg = reference_ovf(tmp_path / "iso" / "ovf-env.xml")
    assert md["local-hostname"] == ds["metadata"]["local-hostname"] and ud == ds["userdata_raw"]
    assert cfg["system_info"]["default_user"]["name"] == "azadmin"
    assert [k["value"] for k in cfg["_pubkeys"]] == ds["public_keys"]


def test_boot_provisions_a_root(azure):
    root = DebianRoot()
    try:
        write_tree(root.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
        write_tree(root.top, {"etc/cloudseed/cloud.cfg.d/90-azure.cfg": AGENT_CFG})
        write_tree(root.top, {"usr/lib/systemd/systemd-networkd": "#!/bin/sh\n"})
        for stage in (["init", "--local"], ["init"]):
            proc = azure.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, *stage, check=False,
                                        timeout=120)
            assert proc.returncode == 0, f"{stage}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
        data = json.loads(root.read("/run/cloudseed/instance-data.json"))
        v1 = data["v1"]
        assert v1["cloud_name"] == "azure" and v1["platform"] == "azure"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "az-vm"
        assert v1["region"] == "westeurope" and v1["availability_zone"] == "0"
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "az-vm"
        assert "azadmin:" in root.read("/etc/passwd")
        assert KEY in root.read("/home/azadmin/.ssh/authorized_keys")
        assert root.read("/etc/from-azure-custom-data") == "seen"
        rendered = "".join(_read(os.path.join(d, f)) for d, _, files in os.walk(root.top + "/etc") for f in files)
        assert azure.mac in rendered
        assert azure.show()["azure_health"]["state"] == "Ready"
    finally:
        root.close()


FABRIC = """
import json, sys
from cloudinit.sources.helpers import azure as helpers
helpers.report_failure_to_fabric("168.63.129.16", description="cloudseed test: provisioning failed")
print(json.dumps({"step": "failure"}))
sys.stdout.flush()
input()
helpers.get_metadata_from_fabric("168.63.129.16")
print(json.dumps({"step": "ready"}))
"""


def test_cloud_init_22_4_reports_failure_then_ready_to_the_wire_server(azure):
    from tests.reference import SYSTEM_PYTHON, _env, reference_tree

    if reference_tree() is None:
        pytest.skip("Debian's cloud-init could not be fetched")
    proc = subprocess.Popen(["ip", "netns", "exec", azure.lab.guest, SYSTEM_PYTHON, "-c", FABRIC], env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline()) == {"step": "failure"}, proc.stderr.read()[-3000:]
        failed = azure.show()["azure_health"]
        assert failed["state"] == "NotReady" and failed["substatus"] == "ProvisioningFailed"
        assert failed["description"] == "cloudseed test: provisioning failed"
        out, err = proc.communicate("\n", timeout=120)
        assert proc.returncode == 0 and json.loads(out.strip().splitlines()[-1]) == {"step": "ready"}, err[-3000:]
        ready = azure.show()["azure_health"]
        assert ready["state"] == "Ready" and ready["instance"] == f"{IID}.az-vm" and ready["incarnation"] == "1"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_failed_ready_report_is_an_error_in_the_status_not_a_hang(azure):
    root = DebianRoot()
    try:
        write_tree(root.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
        cfg = AGENT_CFG + (f"datasource:\n  Azure:\n    wireserver: '{azure.lab.cloud_ip}:9'\n"
                           "    ready_deadline: 3\n")
        write_tree(root.top, {"etc/cloudseed/cloud.cfg.d/90-azure.cfg": cfg})
        started = time.monotonic()
        proc = azure.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, "init", "--local", check=False,
                                    timeout=120)
        assert time.monotonic() - started < 30, proc.stderr[-2000:]
        status = json.loads(root.read("/run/cloudseed/status.json"))
        errors = status["v1"]["init-local"]["errors"]
        assert any("could not be reported ready" in e and ":9" in e for e in errors), (errors, proc.stderr[-2000:])
        assert status["v1"]["datasource"], status  # provisioned all the same
    finally:
        root.close()


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read(65536)
    except OSError:
        return ""


def test_fallback_network_config_is_the_likely_nic_by_mac_not_eth0(tmp_path):
    """Without IMDS network data: DHCP on the most likely NIC matched by MAC, as cloud-init 22.4's
    generate_fallback_config (Mellanox VFs excluded); the lab's virtio NIC is ens3, not eth0."""
    import os

    from cloudseed.agent.datasources.azure import fallback_network_config
    from cloudseed.core.root import TargetRoot

    def nic(name, mac, driver):
        d = tmp_path / "sys/class/net" / name
        (d / "device").mkdir(parents=True)
        for key, text in (("address", mac), ("carrier", "1"), ("operstate", "up"), ("type", "1"),
                          ("uevent", f"INTERFACE={name}")):
            (d / key).write_text(text + "\n")
        (tmp_path / "sys/bus/drivers" / driver).mkdir(parents=True, exist_ok=True)
        os.symlink(f"/sys/bus/drivers/{driver}", d / "device" / "driver")  # resolved inside the root

    root = str(tmp_path)  # a path: a TargetRoot resolves the driver link (live, "/" reads it as is)
    assert fallback_network_config(TargetRoot(root)) == {}
    nic("enP1s1", "00:0d:3a:00:00:02", "mlx5_core")  # accelerated networking's VF: never chosen
    assert fallback_network_config(root) == {}
    nic("ens3", "00:0d:3a:00:00:01", "hv_netvsc")
    assert fallback_network_config(root) == {"version": 2, "ethernets": {"ens3": {
        "match": {"macaddress": "00:0d:3a:00:00:01"}, "set-name": "ens3", "dhcp4": True}}}
