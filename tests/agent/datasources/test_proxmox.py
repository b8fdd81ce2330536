"""Proxmox VE's cloud-init drive, in both of its formats, read by NoCloud and ConfigDrive.

``pve_files`` writes what Proxmox's qemu-server (PVE/QemuServer/Cloudinit.pm) generates from a VM
config (``name``, ``ciuser``, ``cipassword``, ``sshkeys``, ``netN`` MACs, ``ipconfigN``,
``nameserver``, ``searchdomain``): ``nocloud`` (label ``cidata``: ``user-data``, ``meta-data`` whose
instance-id is the SHA-1 of user-data + network-config, ``network-config`` v1 with 4-space list
indentation, ``dhcp4``/``static``/``dhcp6``/``ipv6_slaac``/``static6`` subnets and a ``nameserver``
entry, and an empty ``vendor-data``) and ``configdrive2`` (label ``config-2``:
``openstack/latest/{user_data, meta_data.json, vendor_data.json}`` with an empty vendor_data.json
and the network as an interfaces file ``openstack/content/0000`` named by meta_data.json's
``network_config.content_path``; no network_data.json). Images are made as Proxmox makes them
(``genisoimage -iso-level 3 -R``, no Joliet) and attached as loop devices; cloud-init 22.4's
NoCloud and ConfigDrive read the same files for the differential tests.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources._eni import ENIError, eni_to_v1
from cloudseed.agent.state import Paths
from tests.agent.datasources.diskimages import loop_device, make_iso, write_tree

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd pve@example"
HASH = "$6$rounds=4096$pvesalt$Wm1mRk0zZ3Y2cE1YbXl2Q2tqT0Z3QmZQbXl3eUxPUnRqQmV4c3lJbm1GRkx0dQ"
DUAL = {"name": "pve-vm.example.com", "ciuser": "admin", "cipassword": HASH, "sshkeys": KEY,
        "net0": "BC:24:11:AA:BB:01", "ipconfig0": {"ip": "192.168.10.20/24", "gw": "192.168.10.1",
                                                   "ip6": "2001:db8::20/64", "gw6": "2001:db8::1"},
        "net1": "BC:24:11:AA:BB:02", "ipconfig1": {"ip": "dhcp", "ip6": "auto"},
        "nameserver": "1.1.1.1 9.9.9.9", "searchdomain": "example.com"}
V4 = {"name": "pve-v4", "sshkeys": KEY, "net0": "BC:24:11:AA:BB:03",
      "ipconfig0": {"ip": "10.0.0.7/16", "gw": "10.0.0.1"}, "nameserver": "10.0.0.2", "searchdomain": "lab"}


def _mask(prefix: int) -> str:
    import ipaddress

    return str(ipaddress.IPv4Network(f"0.0.0.0/{prefix}").netmask)


def user_data(conf: dict) -> str:
    name = conf["name"]
    hostname, fqdn = name.split(".")[0], name if "." in name else f"{name}.{conf['searchdomain']}"
    out = f"#cloud-config\nhostname: {hostname}\nmanage_etc_hosts: true\nfqdn: {fqdn}\n"
    if "ciuser" in conf:
        out += f"user: {conf['ciuser']}\n"
    if "cipassword" in conf:
        out += f"password: {conf['cipassword']}\n"
    out += f"ssh_authorized_keys:\n  - {conf['sshkeys']}\nchpasswd:\n  expire: False\nusers:\n  - default\n"
    return out + "package_upgrade: true\n"


def nocloud_network(conf: dict) -> str:
    out = "version: 1\nconfig:\n"
    for n in sorted(k[3:] for k in conf if k.startswith("net")):
        ip = conf[f"ipconfig{n}"]
        out += (f"    - type: physical\n      name: eth{n}\n      mac_address: '{conf[f'net{n}'].lower()}'\n"
                "      subnets:\n")
        if ip.get("ip") == "dhcp":
            out += "        - type: dhcp4\n"
        elif ip.get("ip"):
            addr, prefix = ip["ip"].split("/")
            out += f"        - type: static\n          address: '{addr}'\n          netmask: '{_mask(int(prefix))}'\n"
            if ip.get("gw"):
                out += f"          gateway: '{ip['gw']}'\n"
        if ip.get("ip6") == "dhcp":
            out += "        - type: dhcp6\n"
        elif ip.get("ip6") == "auto":
            out += "        - type: ipv6_slaac\n"
        elif ip.get("ip6"):
            out += f"        - type: static6\n          address: '{ip['ip6']}'\n"
            if ip.get("gw6"):
                out += f"          gateway: '{ip['gw6']}'\n"
    out += "    - type: nameserver\n      address:\n"
    out += "".join(f"      - '{s}'\n" for s in conf["nameserver"].split())
    out += "      search:\n" + "".join(f"      - '{s}'\n" for s in conf["searchdomain"].split())
    return out


def eni_network(conf: dict) -> str:
    out = "auto lo\niface lo inet loopback\n\n"
    out += f"        dns_nameservers {conf['nameserver']}\n        dns_search {conf['searchdomain']}\n"
    for n in sorted(k[3:] for k in conf if k.startswith("net")):
        ip, dev = conf[f"ipconfig{n}"], f"eth{n}"
        out += f"auto {dev}\n"
        if ip.get("ip") == "dhcp":
            out += f"iface {dev} inet dhcp\n"
        elif ip.get("ip"):
            addr, prefix = ip["ip"].split("/")
            out += f"iface {dev} inet static\n        address {addr}\n        netmask {_mask(int(prefix))}\n"
            if ip.get("gw"):
                out += f"        gateway {ip['gw']}\n"
        if ip.get("ip6") in ("auto", "dhcp"):
            out += f"iface {dev} inet6 {ip['ip6']}\n"
        elif ip.get("ip6"):
            addr, prefix = ip["ip6"].split("/")
            out += f"iface {dev} inet6 static\n        address {addr}\n        netmask {prefix}\n"
            if ip.get("gw6"):
                out += f"        gateway {ip['gw6']}\n"
    return out


def pve_files(conf: dict, kind: str) -> dict[str, str]:
    ud = user_data(conf)
    if kind == "nocloud":
        net = nocloud_network(conf)
        return {"user-data": ud, "network-config": net, "vendor-data": "",
                "meta-data": f"instance-id: {hashlib.sha1((ud + net).encode()).hexdigest()}\n"}
    net = eni_network(conf)
    uuid = hashlib.sha1((ud + net).encode()).hexdigest()
    return {"openstack/latest/user_data": ud, "openstack/content/0000": net, "openstack/latest/vendor_data.json": "",
            "openstack/latest/meta_data.json":
                f'{{\n     "uuid": "{uuid}",\n     "network_config": {{ "content_path": "/content/0000" }}\n}}\n'}


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage=LOCAL)


def pve_image(tmp_path, conf, kind) -> str:
    src = write_tree(str(tmp_path / f"pve-{kind}"), pve_files(conf, kind))
    label = "cidata" if kind == "nocloud" else "config-2"
    return make_iso(src, str(tmp_path / f"pve-{kind}.iso"), label, "-iso-level", "3")


def found_on(target, name: str, device: str):
    search = find_datasource(context(target), [name])
    ds = search.datasource
    assert ds is not None, search.errors
    if device not in ds.subplatform:
        pytest.skip(f"another test's seed device was read first ({ds.subplatform})")
    return ds


@pytest.mark.parametrize("conf", [DUAL, V4], ids=["dual-stack", "ipv4"])
def test_nocloud_drive(target, tmp_path, conf):
    from cloudseed.network.parsers import parse

    files = pve_files(conf, "nocloud")
    with loop_device(pve_image(tmp_path, conf, "nocloud")) as device:
        ds = found_on(target, "NoCloud", device)
    assert ds.instance_id == hashlib.sha1((files["user-data"] + files["network-config"]).encode()).hexdigest()
    assert ds.userdata_raw == files["user-data"].encode() and ds.vendordata_raw == b""
    assert ds.network_config["version"] == 1
    model = parse(ds.network_config)
    assert model is not None
    eth0 = ds.network_config["config"][0]
    assert eth0["mac_address"] == conf["net0"].lower() and eth0["name"] == "eth0"
    assert ds.network_config["config"][-1]["type"] == "nameserver"


@pytest.mark.parametrize("conf", [DUAL, V4], ids=["dual-stack", "ipv4"])
def test_configdrive2_drive(target, tmp_path, conf):
    from cloudseed.network.parsers import parse

    files = pve_files(conf, "configdrive2")
    with loop_device(pve_image(tmp_path, conf, "configdrive2")) as device:
        ds = found_on(target, "ConfigDrive", device)
    assert ds.instance_id == json.loads(files["openstack/latest/meta_data.json"])["uuid"]
    assert ds.userdata_raw == files["openstack/latest/user_data"].encode() and ds.vendordata_raw is None
    net = ds.network_config
    assert net == eni_to_v1(files["openstack/content/0000"])
    assert parse(net) is not None
    eth0 = next(c for c in net["config"] if c.get("name") == "eth0")
    assert eth0["subnets"][0] == {"type": "static", "address": conf["ipconfig0"]["ip"].split("/")[0],
                                  "netmask": _mask(int(conf["ipconfig0"]["ip"].split("/")[1])),
                                  "gateway": conf["ipconfig0"]["gw"], "control": "auto"}
    if conf is DUAL:
        assert eth0["subnets"][1] == {"type": "static6", "address": "2001:db8::20/64", "gateway": "2001:db8::1",
                                      "control": "auto"}
        eth1 = next(c for c in net["config"] if c.get("name") == "eth1")
        assert [s["type"] for s in eth1["subnets"]] == ["dhcp", "ipv6_slaac"]
    assert net["config"][-1] == {"type": "nameserver", "address": conf["nameserver"].split(),
                                 "search": conf["searchdomain"].split()}


@pytest.mark.parametrize("text,message", [
    ("auto eth0\nsource /etc/network/interfaces.d/*\n", "line 2: 'source' is not followed"),
    ("address 10.0.0.1\n", "line 1: 'address' outside an 'iface' stanza"),
    ("iface eth0 inet\n", "line 1: 'iface' needs a name, a family and a method"),
    ("iface eth0 inet static\n  netmask 255.0.0.0\n", "eth0 inet static has no address"),
])
def test_hostile_interfaces_files(text, message):
    with pytest.raises(ENIError, match=message):
        eni_to_v1(text, "cd/openstack/content/0000")


def test_configdrive2_content_path_problems(target):
    files = pve_files(V4, "configdrive2")
    seed = "/var/lib/cloud/seed/config_drive"
    meta = json.loads(files["openstack/latest/meta_data.json"])
    for bad, message in ((dict(meta, network_config={"content_path": "/../../etc/shadow"}), "no valid content_path"),
                         (dict(meta, network_config={"content_path": "/content/0001"}), "is missing")):
        write_tree(target.top, {f"{seed[1:]}/{k}": v for k, v in files.items()})
        write_tree(target.top, {f"{seed[1:]}/openstack/latest/meta_data.json": json.dumps(bad)})
        search = find_datasource(context(target), ["ConfigDrive"])
        assert search.datasource is None and message in search.errors[0], search.errors


NOCLOUD_REF = r"""
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceNoCloud as m
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})  # its seed_dir: cloud_dir/seed
distro = distros.fetch("debian")("debian", {}, paths)
ds = m.DataSourceNoCloud({"datasource": {"NoCloud": {"fs_label": None}}}, distro, paths)
ok = ds.get_data()
vd = ds.vendordata_raw
print(json.dumps({"ok": ok, "metadata": ds.metadata, "userdata": ds.userdata_raw.decode(),
                  "vendordata": vd.decode() if isinstance(vd, bytes) else vd, "network": ds.network_config,
                  "instance_id": ds.get_instance_id()}, default=str))
"""

CONFIGDRIVE_REF = r"""
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceConfigDrive as m
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})  # its seed_dir: cloud_dir/seed
distro = distros.fetch("debian")("debian", {}, paths)
ds = m.DataSourceConfigDrive({}, distro, paths)
m.find_candidate_devs = lambda *a, **k: []  # only the seed directory: no device of this host
try:
    ok = ds.get_data()
except Exception as e:
    print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
    raise SystemExit(0)
try:
    network = ds.network_config
except Exception as e:
    network = f"{type(e).__name__}: {e}"
print(json.dumps({"ok": ok, "instance_id": ds.get_instance_id(), "userdata": ds.userdata_raw.decode(),
                  "vendordata": ds.vendordata_raw, "network": network}, default=str))
"""


@pytest.mark.parametrize("conf", [DUAL, V4], ids=["dual-stack", "ipv4"])
def test_nocloud_same_as_cloud_init(target, tmp_path, conf):
    from tests.reference import reference_python

    files = pve_files(conf, "nocloud")
    write_tree(str(tmp_path / "ref/cloud/seed/nocloud"), files)
    ref = json.loads(reference_python(NOCLOUD_REF, str(tmp_path / "ref")).stdout.strip().splitlines()[-1])
    write_tree(target.top, {f"var/lib/cloud/seed/nocloud/{k}": v for k, v in files.items()})
    ds = find_datasource(context(target), ["NoCloud"]).datasource
    assert ref["ok"] is True and ds.instance_id == ref["instance_id"]
    assert ds.userdata_raw.decode() == ref["userdata"] and ds.network_config == ref["network"]
    assert ds.vendordata_raw.decode() == ref["vendordata"] == ""


def reference_configdrive(tmp_path, files: dict) -> dict:
    from tests.reference import reference_python

    write_tree(str(tmp_path / "ref/cloud/seed/config_drive"), files)
    return json.loads(reference_python(CONFIGDRIVE_REF, str(tmp_path / "ref")).stdout.strip().splitlines()[-1])


def test_configdrive2_empty_vendor_data_read_where_cloud_init_fails(target, tmp_path):
    """Named difference: Proxmox writes an empty vendor_data.json; 22.4 refuses the whole drive."""
    files = pve_files(V4, "configdrive2")
    ref = reference_configdrive(tmp_path, files)
    assert ref["ok"] is False and "vendor_data.json: Expecting value" in ref["error"], ref
    write_tree(target.top, {f"var/lib/cloud/seed/config_drive/{k}": v for k, v in files.items()})
    ds = find_datasource(context(target), ["ConfigDrive"]).datasource
    assert ds is not None and ds.vendordata_raw is None and ds.network_config is not None


def without_vendor_data(files: dict) -> dict:
    """The same drive without its empty vendor_data.json, which 22.4 cannot read (test above)."""
    return {k: v for k, v in files.items() if not k.endswith("vendor_data.json")}


def test_configdrive2_same_as_cloud_init_ipv4(target, tmp_path):
    files = pve_files(V4, "configdrive2")
    ref = reference_configdrive(tmp_path, without_vendor_data(files))
    write_tree(target.top, {f"var/lib/cloud/seed/config_drive/{k}": v for k, v in files.items()})
    ds = find_datasource(context(target), ["ConfigDrive"]).datasource
    assert ref["ok"] is True, ref
    assert ds.instance_id == ref["instance_id"] and ds.userdata_raw.decode() == ref["userdata"]
    ours, theirs = ds.network_config["config"], ref["network"]["config"]
    for dev in theirs:
        for sub in dev["subnets"]:
            del sub["_orig_eni_name"]
    # named difference: Proxmox's dns_nameservers/dns_search lines (under lo) are read here as a global
    # nameserver entry; cloud-init 22.4 knows only dns-nameservers/dns-search and drops them
    assert ours[-1] == {"type": "nameserver", "address": ["10.0.0.2"], "search": ["lab"]}
    assert ours[:-1] == theirs


def test_configdrive2_dual_stack_read_where_cloud_init_fails(target, tmp_path):
    """Named difference: 22.4's ENI parser refuses a NIC with inet and inet6 stanzas."""
    files = pve_files(DUAL, "configdrive2")
    ref = reference_configdrive(tmp_path, without_vendor_data(files))
    assert "can only be defined once" in json.dumps(ref), ref
    write_tree(target.top, {f"var/lib/cloud/seed/config_drive/{k}": v for k, v in files.items()})
    ds = find_datasource(context(target), ["ConfigDrive"]).datasource
    types = [s["type"] for c in ds.network_config["config"] for s in c.get("subnets", [])]
    assert types == ["static", "static6", "dhcp", "ipv6_slaac", "loopback"]
    assert os.path.isdir(target.path("/var/lib/cloud/seed/config_drive/openstack/content"))
