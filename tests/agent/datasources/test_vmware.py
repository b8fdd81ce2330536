"""The VMware datasource reading guestinfo through a ``vmware-rpctool`` in a chrooted busybox root.

The real VMware tools need a VMware hypervisor (they speak the backdoor port to the VMX), so the
``vmware-rpctool`` here is a shell script in the chrooted target (the ``shell_target`` fixture)
that answers ``info-get guestinfo.X`` from files under ``/guestinfo`` (``No value found`` on
stderr and exit 1 for a missing key, as the real one), and records every ``info-set``. The agent
runs it through the target root as it would run the real tool. cloud-init 22.4's own
``DataSourceVMware`` functions read the same tool (run through chroot) for the differential test.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import time

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources.vmware import VMware, decode
from cloudseed.agent.state import Paths
from tests.agent.datasources.vmware_support import DMI, RPCTOOL, setup_vm

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd vm@example"
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-vmware, content: seen}\n"
NETWORK = {"version": 2, "ethernets": {"nic0": {"match": {"macaddress": "00:50:56:aa:bb:cc"},
                                                "addresses": ["192.168.10.7/24"], "gateway4": "192.168.10.1"}}}
SLOW_RPCTOOL = "#!/bin/sh\nsleep 30\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def gzb64(data: bytes) -> str:
    return b64(gzip.compress(data))


def metadata(**extra) -> str:
    md = {"instance-id": "vm-42", "local-hostname": "vm42", "public-keys": KEY, **extra}
    return json.dumps(md)


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage=LOCAL)


def test_detection(shell_target, monkeypatch):
    root = shell_target
    monkeypatch.delenv("VMX_GUESTINFO", raising=False)
    assert VMware.why(context(root)) is None
    root.write("/sys/class/dmi/id/product_name", "VMware Virtual Platform\n")
    assert VMware.why(context(root)) is None  # VMware, but no tool to read guestinfo with
    root.write("/usr/bin/vmtoolsd", "#!/bin/sh\n", mode=0o755)
    assert "vmtoolsd" in VMware.why(context(root))
    root.write("/sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    assert VMware.why(context(root)) is None  # a tool, but not VMware
    monkeypatch.setenv("VMX_GUESTINFO", "1")
    monkeypatch.setenv("VMX_GUESTINFO_USERDATA", b64(b"#cloud-config\n"))
    assert "VMX_GUESTINFO_USERDATA" in VMware.why(context(root))


def test_not_vmware_costs_nothing(target, monkeypatch):
    monkeypatch.delenv("VMX_GUESTINFO", raising=False)
    search = find_datasource(context(target), ["VMware"])
    assert search.tried == [] and search.datasource is None


@pytest.mark.parametrize("encoding,encode", [("", lambda b: b.decode()), ("base64", b64), ("b64", b64),
                                             ("gzip+base64", gzb64), ("gz+b64", gzb64)])
def test_encodings_round_trip(shell_target, encoding, encode):
    values = {"metadata": encode(metadata().encode()), "userdata": encode(USER_DATA.encode())}
    if encoding:
        values.update({"metadata.encoding": encoding, "userdata.encoding": encoding})
    setup_vm(shell_target, values)
    ds = find_datasource(context(shell_target), ["VMware"]).datasource
    assert ds is not None
    assert ds.instance_id == "vm-42" and ds.local_hostname == "vm42" and ds.public_keys == [KEY]
    # a plain value loses its trailing whitespace (as cloud-init strips every value it reads)
    assert ds.userdata_raw == (USER_DATA.encode() if encoding else USER_DATA.rstrip().encode())
    assert ds.subplatform == "guestinfo (guestinfo.metadata)"


def test_vmtoolsd_and_encoded_network_and_uuid_instance_id(shell_target):
    # vmtoolsd --cmd "info-get ...": the same script, reading its second argument
    tool = RPCTOOL.replace('case "$1" in', '[ "$1" = --cmd ] && shift\ncase "$1" in')
    md = {"local-hostname": "vm42", "network": gzb64(json.dumps(NETWORK).encode()),
          "network.encoding": "gzip+base64"}
    setup_vm(shell_target, {"metadata": json.dumps(md), "vendordata": "#cloud-config\nv: 1\n"},
             tool=tool, name="vmtoolsd")
    ds = find_datasource(context(shell_target), ["VMware"]).datasource
    assert ds.network_config == NETWORK
    assert ds.metadata["network"] == {"config": NETWORK} and "network.encoding" not in ds.metadata
    assert ds.instance_id == "4230a1b2-c3d4-e5f6-0718-293a4b5c6d7e"  # from DMI, lower case
    assert ds.vendordata_raw == b"#cloud-config\nv: 1" and ds.userdata_raw is None


def test_cleanup_guestinfo_clears_the_keys(shell_target):
    md = metadata(**{"cleanup-guestinfo": ["userdata", "vendordata"]})
    setup_vm(shell_target, {"metadata": md, "userdata": b64(USER_DATA.encode()), "userdata.encoding": "base64",
                            "vendordata": "#cloud-config\n"})
    ds = find_datasource(context(shell_target), ["VMware"]).datasource
    assert ds.userdata_raw == USER_DATA.encode()
    assert shell_target.read_text("/guestinfo-set.log").splitlines() == [
        "userdata=---", "userdata.encoding= ", "vendordata=---", "vendordata.encoding= "]
    assert ds.cleared == ["userdata", "vendordata"]
    # a second reader finds them empty: "---" is no value
    again = find_datasource(context(shell_target), ["VMware"]).datasource
    assert again.userdata_raw is None and again.vendordata_raw is None and again.instance_id == "vm-42"


def test_redact_takes_a_single_key(shell_target):
    setup_vm(shell_target, {"metadata": metadata(redact="userdata"), "userdata": USER_DATA})
    find_datasource(context(shell_target), ["VMware"])
    assert shell_target.read_text("/guestinfo-set.log").splitlines() == ["userdata=---", "userdata.encoding= "]


def test_nothing_set_is_no_instance(shell_target):
    setup_vm(shell_target, {})
    search = find_datasource(context(shell_target), ["VMware"])
    assert search.tried == ["VMware"] and search.datasource is None and search.errors == []


@pytest.mark.parametrize("values,message", [
    ({"metadata": "!!!", "metadata.encoding": "base64"}, "guestinfo.metadata: not valid base64"),
    ({"metadata": b64(b"not gzip"), "metadata.encoding": "gz+b64"}, "guestinfo.metadata: not valid gzip"),
    ({"metadata": "x", "metadata.encoding": "rot13"}, "unknown encoding 'rot13'"),
    ({"metadata": "key: [unclosed"}, "guestinfo.metadata: neither JSON nor valid YAML"),
    ({"metadata": "[1, 2]"}, "expected a mapping"),
    ({"metadata": gzb64(b"a" * (17 * 1024 * 1024)), "metadata.encoding": "gzip+base64"}, "more than"),
])
def test_bad_values_are_clear_errors(shell_target, values, message):
    setup_vm(shell_target, values)
    search = find_datasource(context(shell_target), ["VMware"])
    assert search.datasource is None and message in search.errors[0], search.errors


def test_a_hanging_tool_is_bounded(shell_target):
    setup_vm(shell_target, {}, tool=SLOW_RPCTOOL)
    start = time.monotonic()
    search = find_datasource(context(shell_target, {"datasource": {"VMware": {"timeout": 1}}}), ["VMware"])
    assert search.datasource is None and "timed out" in search.errors[0]
    assert time.monotonic() - start < 5


def test_envvar_transport(target, monkeypatch):
    monkeypatch.setenv("VMX_GUESTINFO", "1")
    monkeypatch.setenv("VMX_GUESTINFO_METADATA", gzb64(metadata().encode()))
    monkeypatch.setenv("VMX_GUESTINFO_METADATA_ENCODING", "gzip+base64")
    monkeypatch.setenv("VMX_GUESTINFO_USERDATA", USER_DATA)
    ds = find_datasource(context(target), ["VMware"]).datasource
    assert ds.subplatform == "envvar (VMX_GUESTINFO_METADATA)"
    assert ds.instance_id == "vm-42" and ds.userdata_raw == USER_DATA.rstrip().encode()


def test_decode_direct():
    assert decode("k", "gz+b64", gzb64(b"hello")) == b"hello"
    assert decode("k", None, "plain") == b"plain"


def test_agent_provisions_a_root(shell_target, monkeypatch):
    monkeypatch.delenv("VMX_GUESTINFO", raising=False)
    root = shell_target
    net = {"version": 2, "ethernets": {"eth0": {"addresses": ["192.168.10.7/24"], "gateway4": "192.168.10.1"}}}
    setup_vm(root, {"metadata": metadata(network=b64(json.dumps(net).encode()), **{"network.encoding": "base64"}),
                    "userdata": gzb64(USER_DATA.encode()), "userdata.encoding": "gzip+base64"})
    root.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
               "datasource_list: [VMware, None]\n"
               "cloud_init_modules: [write_files, set_hostname]\ncloud_config_modules: []\n"
               "cloud_final_modules: []\n")
    root.write("/usr/lib/systemd/systemd-networkd", "#!/bin/sh\n", mode=0o755)
    from cloudseed.agent.boot.stages import Agent

    agent = Agent(root)
    assert agent.run_local() == 0
    assert agent.run_network() == 0
    v1 = json.loads(root.read_text("/run/cloudseed/instance-data.json"))["v1"]
    assert (v1["cloud_name"], v1["platform"], v1["instance_id"], v1["local_hostname"]) == \
        ("vmware", "vmware", "vm-42", "vm42")
    assert v1["public_ssh_keys"] == [KEY]
    assert root.read_text("/etc/hostname").strip() == "vm42"
    assert root.read_text("/etc/from-vmware") == "seen"
    rendered = "".join(root.read_text(f"/etc/systemd/network/{f}") for f in root.listdir("/etc/systemd/network"))
    assert "192.168.10.7/24" in rendered


REFERENCE = r"""
import json, sys
from cloudinit.sources import DataSourceVMware as m
tool = sys.argv[1]
md, ud, vd = (m.guestinfo(k, tool) for k in ("metadata", "userdata", "vendordata"))
meta = m.process_metadata(m.load_json_or_yaml(md))
ds = m.DataSourceVMware.__new__(m.DataSourceVMware)
ds.metadata = meta
print(json.dumps({"metadata": meta, "userdata": ud, "vendordata": vd, "keys": ds.get_public_ssh_keys()}))
"""


def test_same_data_as_cloud_init(shell_target, tmp_path):
    from tests.reference import reference_python

    md = {"instance-id": "vm-42", "local-hostname": "vm42", "public-keys-data": f"{KEY}\n{KEY[:-3]}two",
          "network": gzb64(json.dumps(NETWORK).encode()), "network.encoding": "gz+b64"}
    setup_vm(shell_target, {"metadata": b64(json.dumps(md).encode()), "metadata.encoding": "b64",
                            "userdata": gzb64(USER_DATA.encode()), "userdata.encoding": "gzip+base64",
                            "vendordata": "#cloud-config\nv: 1\n"})
    host_tool = tmp_path / "rpctool"  # the reference runs on the host: reach the chrooted tool
    host_tool.write_text(f'#!/bin/sh\nexec chroot {shell_target.top} /usr/bin/vmware-rpctool "$@"\n')
    os.chmod(host_tool, 0o755)
    ref = json.loads(reference_python(REFERENCE, str(host_tool)).stdout)
    ds = find_datasource(context(shell_target), ["VMware"]).datasource
    assert ds.metadata == ref["metadata"]
    assert ds.userdata_raw.decode() == ref["userdata"] and ds.vendordata_raw.decode() == ref["vendordata"]
    assert ds.public_keys == ref["keys"]
    assert ds.network_config == ref["metadata"]["network"]["config"]


@pytest.mark.parametrize("tool,enabled", [("vmware-rpctool", True), ("vmtoolsd", True), (None, False)])
def test_both_generators_decide_on_dmi_and_the_tool(tmp_path, tool, enabled):
    import subprocess

    from tests.agent.datasources.cloudlab import CLOUDSEED, GENERATOR

    for kind in ("shell", "python"):
        root = tmp_path / kind
        for key, value in DMI.items():
            (root / "sys/class/dmi/id").mkdir(parents=True, exist_ok=True)
            (root / f"sys/class/dmi/id/{key}").write_text(value + "\n")
        (root / "etc").mkdir(exist_ok=True)
        if tool:
            (root / "usr/bin").mkdir(parents=True)
            (root / f"usr/bin/{tool}").write_text("#!/bin/sh\n")
            os.chmod(root / f"usr/bin/{tool}", 0o755)
        out = str(tmp_path / f"out-{kind}")
        if kind == "shell":
            env = {"CLOUDSEED_ROOT": str(root), "CLOUDSEED_BIN": CLOUDSEED, "PATH": os.environ["PATH"]}
            proc = subprocess.run(["/bin/sh", GENERATOR, out], env=env, capture_output=True, text=True, timeout=60)
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith("VMX_")}
            proc = subprocess.run([CLOUDSEED, "--root", str(root), "generator", out], env=env,
                                  capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        state = root / "run/cloudseed/enabled"
        if enabled and kind == "python":
            assert "VMware (DMI" in state.read_text() and tool in state.read_text(), kind
        elif enabled:  # the shell names the first possible datasource of the list: OVF reads vmware-rpctool too
            first = "OVF (DMI says VMware and vmware-rpctool" if tool == "vmware-rpctool" else "VMware (DMI"
            assert first in state.read_text() and tool in state.read_text(), kind
        else:  # disabled, unless another test's seed device is attached: never for VMware
            assert not state.exists() or "VMware" not in state.read_text(), kind
