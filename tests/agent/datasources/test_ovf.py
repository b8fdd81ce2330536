"""The OVF datasource: ovf-env.xml from real ISO images, seed directories and guestinfo.ovfEnv.

Images are made with genisoimage and xorriso (label ``OVF ENV``) and read by the userspace ISO
reader; one is attached as a loop device for the agent's local stage. Hostile documents (a DTD
with entities, a huge file, not XML, the wrong document) are refused with clear errors before any
entity could be expanded. cloud-init 22.4's own ``read_ovf_environment`` reads the same documents
for the differential test.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources.ovf import OVF, OvfError, properties, read_environment, read_image
from cloudseed.agent.state import Paths

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd ovf@example"
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-ovf, content: seen}\n"
NETWORK = "network:\n  version: 2\n  ethernets:\n    eth0:\n      addresses: [172.16.4.9/24]\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def env_xml(props: dict[str, str] | None = None, extra: str = "") -> str:
    props = props if props is not None else {
        "instance-id": "ovf-iid-1", "hostname": "ovfhost", "public-keys": KEY, "user-data": b64(USER_DATA),
        "password": "s3cret", "network-config": b64(NETWORK), "other": "ignored"}
    lines = "\n".join(f'    <Property oe:key="{k}" oe:value="{v}"/>' for k, v in props.items())
    return f"""<?xml version="1.0" encoding="UTF-8"?>
{extra}<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"
     xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
     xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" oe:id="WebTier">
  <PlatformSection><Kind>VMware ESXi</Kind><Version>8.0.0</Version></PlatformSection>
  <PropertySection>
{lines}
  </PropertySection>
</Environment>
"""


def make_iso(tmp_path, text: str, tool: str = "genisoimage", name: str = "ovf-env.xml") -> str:
    src = tmp_path / f"src-{tool}"
    src.mkdir()
    (src / name).write_text(text)
    image = str(tmp_path / f"ovf-{tool}.iso")
    argv = ["genisoimage", "-quiet"] if tool == "genisoimage" else ["xorriso", "-as", "mkisofs", "-quiet"]
    subprocess.run([*argv, "-o", image, "-V", "OVF ENV", "-J", "-R", str(src)], check=True, capture_output=True)
    return image


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage=LOCAL)


def test_properties_as_cloud_init_reads_them():
    md, ud, cfg = read_environment(env_xml(), read_network=True)
    assert md == {"instance-id": "ovf-iid-1", "local-hostname": "ovfhost", "public-keys": KEY,
                  "network-config": {"version": 2, "ethernets": {"eth0": {"addresses": ["172.16.4.9/24"]}}}}
    assert ud == USER_DATA.encode() and cfg == {"password": "s3cret"}
    md, ud, _ = read_environment(env_xml({"user-data": "#cloud-config", "network-config": b64(NETWORK)}))
    assert ud == b"#cloud-config" and md == {}  # not base64: as it is; no network from a seed


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<Environment xmlns:oe="http://schemas.dmtf.org/ovf/environment/1"><PropertySection>
<Property oe:key="hostname" oe:value="&lol3;"/></PropertySection></Environment>
"""
EXTERNAL = env_xml().replace('<?xml version="1.0" encoding="UTF-8"?>\n',
                             '<?xml version="1.0"?>\n<!doctype x SYSTEM "file:///etc/shadow">\n')


@pytest.mark.parametrize("text,message", [
    (BILLION_LAUGHS, "carries a DTD"),
    (EXTERNAL, "carries a DTD"),
    (env_xml({"hostname": "x" * (1024 * 1024)}), "the limit is 1048576"),
    ("<Environment><PropertySection>", "not well-formed XML"),
    ('<?xml version="1.0"?><Envelope/>', "not an OVF Environment"),
    ('<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"/>', "no PropertySection"),
    (env_xml().replace("oe:key", "key"), "a Property without oe:key"),
])
def test_hostile_documents_are_refused(text, message):
    with pytest.raises(OvfError, match=message):
        properties(text, "where.xml")


@pytest.mark.parametrize("tool", ["genisoimage", "xorriso"])
def test_real_iso_images(tmp_path, tool):
    assert read_image(make_iso(tmp_path, env_xml(), tool)) == env_xml().encode()


def test_iso_without_an_environment_and_a_broken_one(tmp_path):
    assert read_image(make_iso(tmp_path, "x", name="readme.txt")) is None
    truncated = tmp_path / "truncated.iso"
    with open(make_iso(tmp_path, env_xml(), "xorriso"), "rb") as f:
        truncated.write_bytes(f.read()[:40000])
    with pytest.raises(OvfError, match="outside the image"):
        read_image(str(truncated))


def test_seed_directory(target):
    assert OVF.why(context(target)) is None or "labelled" in OVF.why(context(target))
    target.write("/var/lib/cloud/seed/ovf/ovf-env.xml", env_xml())
    assert OVF.why(context(target)) == "seed directory /var/lib/cloud/seed/ovf"
    ds = find_datasource(context(target), ["OVF"]).datasource
    assert ds.instance_id == "ovf-iid-1" and ds.local_hostname == "ovfhost" and ds.public_keys == [KEY]
    assert ds.userdata_raw == USER_DATA.encode() and ds.network_config is None
    assert ds.subplatform == "ovf (/var/lib/cloud/seed/ovf/ovf-env.xml)"
    assert ds.vendordata_raw == b'#cloud-config\n{"password": "s3cret"}\n' and ds.extra["password"] == "s3cret"


def test_seedfrom_a_local_directory(target):
    target.write("/var/lib/cloud/seed/ovf/ovf-env.xml",
                 env_xml({"seedfrom": "file:///srv/seed/", "hostname": "from-ovf"}))
    target.write("/srv/seed/meta-data", "instance-id: from-seed\nlocal-hostname: from-seed\n")
    target.write("/srv/seed/user-data", "#cloud-config\nseed: 1\n")
    ds = find_datasource(context(target), ["OVF"]).datasource
    assert ds.instance_id == "from-seed" and ds.local_hostname == "from-ovf"  # OVF's properties win
    assert ds.userdata_raw == b"#cloud-config\nseed: 1\n"


def test_refused_environment_fails_the_datasource_clearly(target):
    target.write("/var/lib/cloud/seed/ovf/ovf-env.xml", BILLION_LAUGHS)
    search = find_datasource(context(target), ["OVF"])
    assert search.datasource is None and "carries a DTD" in search.errors[0]


def test_guestinfo_ovfenv(shell_target):
    from tests.agent.datasources.vmware_support import setup_vm

    setup_vm(shell_target, {"ovfEnv": env_xml()})
    assert "vmware-rpctool" in OVF.why(context(shell_target))
    ds = find_datasource(context(shell_target), ["OVF"]).datasource
    assert ds.subplatform == "ovf (com.vmware.guestInfo)"
    assert ds.instance_id == "ovf-iid-1" and ds.network_config["ethernets"]["eth0"]["addresses"] == ["172.16.4.9/24"]


def test_agent_provisions_a_root_from_an_ovf_cdrom(target, tmp_path):
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("needs root and loop devices")
    from cloudseed.agent.boot.stages import Agent
    from cloudseed.agent.devices import find_devices_by_label

    image = make_iso(tmp_path, env_xml())
    target.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
                 "datasource_list: [OVF, None]\n"
                 "cloud_init_modules: [write_files, set_hostname]\ncloud_config_modules: []\n"
                 "cloud_final_modules: []\n")
    target.write("/usr/lib/systemd/systemd-networkd", "#!/bin/sh\n", mode=0o755)
    device = subprocess.run(["losetup", "-f", "--show", "-r", image], check=True, capture_output=True,
                            text=True).stdout.strip()
    try:
        assert device in find_devices_by_label(["OVF ENV"])
        verdicts = generators(str(tmp_path / "gen"))
        agent = Agent(target)
        assert agent.run_local() == 0
        assert agent.run_network() == 0
    finally:
        subprocess.run(["losetup", "-d", device], check=False)
    for kind, verdict in verdicts.items():  # the shell's one blkid probe sees the label too
        assert verdict.startswith("enabled"), (kind, verdict)
        json.loads(verdict.split(": ", 1)[1])  # still JSON: blkid's "OVF\\ ENV" is unescaped
        # the shell names the first seed label it finds: another test's loop device may come first
        assert "ovf" in verdict.lower() or (kind == "shell" and device not in verdict), (kind, verdict)
    data = json.loads(target.read_text("/run/cloudseed/instance-data.json"))
    v1 = data["v1"]
    assert (v1["cloud_name"], v1["platform"], v1["instance_id"]) == ("ovf", "ovf", "ovf-iid-1")
    assert v1["subplatform"] == "ovf (iso)" and v1["public_ssh_keys"] == [KEY]
    assert "s3cret" not in target.read_text("/run/cloudseed/instance-data.json")
    assert target.read_text("/etc/hostname").strip() == "ovfhost"
    assert target.read_text("/etc/from-ovf") == "seen"
    rendered = "".join(target.read_text(f"/etc/systemd/network/{f}") for f in target.listdir("/etc/systemd/network"))
    assert "172.16.4.9/24" in rendered


def generators(tmp: str, files: dict[str, str] | None = None) -> dict[str, str]:
    """What the shell generator and ``cloudseed generator`` decide for a root holding ``files``."""
    from tests.agent.datasources.cloudlab import CLOUDSEED, GENERATOR

    verdicts = {}
    for kind in ("shell", "python"):
        root = os.path.join(tmp, kind)
        os.makedirs(os.path.join(root, "etc"))
        for inner, text in (files or {}).items():
            os.makedirs(os.path.join(root, os.path.dirname(inner)), exist_ok=True)
            with open(os.path.join(root, inner), "w") as f:
                f.write(text)
        out = os.path.join(tmp, f"out-{kind}")
        if kind == "shell":
            env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": CLOUDSEED, "PATH": os.environ["PATH"]}
            argv = ["/bin/sh", GENERATOR, out]
        else:
            env, argv = None, [CLOUDSEED, "--root", root, "generator", out]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        name = "enabled" if os.path.exists(os.path.join(root, "run/cloudseed/enabled")) else "disabled"
        with open(os.path.join(root, "run/cloudseed", name)) as f:
            verdicts[kind] = f"{name}: {f.read()}"
    return verdicts


def test_both_generators_enable_the_agent_on_a_seed_directory(tmp_path):
    for kind, verdict in generators(str(tmp_path), {"var/lib/cloud/seed/ovf/ovf-env.xml": env_xml()}).items():
        assert verdict.startswith("enabled") and "OVF (seed directory" in verdict, (kind, verdict)


REFERENCE = r"""
import json, sys
from cloudinit.sources import DataSourceOVF as m
md, ud, cfg = m.read_ovf_environment(open(sys.argv[1]).read(), True)
print(json.dumps({"md": md, "ud": ud.decode() if ud else ud, "cfg": cfg}))
"""


@pytest.mark.parametrize("props", [None, {"hostname": "h", "local-hostname": "l", "user-data": "plain",
                                          "seedfrom": "/x", "public-keys": KEY}])
def test_same_data_as_cloud_init(tmp_path, props):
    from tests.reference import reference_python

    path = tmp_path / "ovf-env.xml"
    path.write_text(env_xml(props))
    ref = json.loads(reference_python(REFERENCE, str(path)).stdout)
    md, ud, cfg = read_environment(path.read_text(), read_network=True)
    assert md == ref["md"] and cfg == ref["cfg"]
    assert (ud.decode() if ud else ud) == ref["ud"]
