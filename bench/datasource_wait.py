"""Benchmark: how long the network stage's datasource search takes when no datasource answers.

Setup (as a real cloud without a metadata service): a guest namespace with an address and a route
to 169.254.169.254 through a "cloud" namespace that silently drops it (no server, no forwarding);
fd00:ec2::254 is on-link but absent. Measured, each in that guest namespace:
  - cloudseed's search with the default datasource_list on a machine with no cloud DMI,
    with DMI saying OpenStack Nova, and with DMI saying Amazon EC2 (worst cases: "may exist");
  - ``cloudseed --root R init`` (the whole network stage, modules included) on those roots, with and
    without SSH host key generation (which costs the same with or without a datasource);
  - Debian's cloud-init 22.4 DataSourceOpenStack/DataSourceEc2 ``get_data()`` with its default
    timeouts (DMI patched to say the same), via ``tests/reference.py``.
Run as root: ``.venv/bin/python bench/datasource_wait.py [--skip-reference-ec2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)  # run as a script: the tests package (its lab helpers) of this checkout

from tests.agent.datasources.netlab import NetLab, find_in_guest, write_tree  # noqa: E402

REFERENCE_CODE = """
import sys, time, logging
logging.basicConfig(level=logging.WARNING)
from cloudinit import dmi, helpers, util
from cloudinit.sources import DataSourceOpenStack as OS, DataSourceEc2 as EC2
facts = {"system-product-name": PRODUCT, "system-manufacturer": VENDOR, "system-uuid": UUID,
         "system-serial-number": UUID, "chassis-asset-tag": ""}
dmi.read_dmi_data = lambda key: facts.get(key, "")
util.is_x86 = lambda *a: True
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
cls = OS.DataSourceOpenStack if KIND == "openstack" else EC2.DataSourceEc2
ds = cls({"datasource_list": [cls.dsname, "None"]}, None, paths)
t = time.monotonic()
found = ds.get_data()
print(found, round(time.monotonic() - t, 2))
"""


def ours(lab: NetLab, tmp: str, facts: dict) -> float:
    root = tempfile.mkdtemp(dir=tmp)
    write_tree(root, facts or {"etc/hostname": "bench\n"})
    out = find_in_guest(lab, root, ["NoCloud", "ConfigDrive", "OpenStack", "Ec2", "None"], timeout=300)
    assert out["ds"] is None, "a datasource answered in the no-datasource benchmark"
    return out["took"]


def our_network_stage(lab: NetLab, tmp: str, facts: dict, host_keys: bool = True) -> float:
    root = tempfile.mkdtemp(dir=tmp)
    files = {**facts, "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
             "etc/os-release": "ID=debian\nVERSION_ID=12\n"}
    if not host_keys:  # SSH host key generation (seconds for RSA 3072) is the same with or without a datasource
        files["etc/cloudseed/cloud.cfg.d/90-bench.cfg"] = "ssh_genkeytypes: []\n"
    write_tree(root, files)
    started = time.monotonic()
    lab.guest_exec(os.path.join(REPO, ".venv", "bin", "cloudseed"), "--root", root, "init", check=False, timeout=300)
    return time.monotonic() - started


def reference(lab: NetLab, tmp: str, kind: str, product: str, vendor: str, uuid: str) -> str:
    from tests.reference import SYSTEM_PYTHON, _env

    env = _env()
    code = (REFERENCE_CODE.replace("PRODUCT", repr(product)).replace("VENDOR", repr(vendor))
            .replace("UUID", repr(uuid)).replace("KIND", repr(kind)))
    work = tempfile.mkdtemp(dir=tmp)
    started = time.monotonic()
    proc = subprocess.run(["ip", "netns", "exec", lab.guest, SYSTEM_PYTHON, "-c", code, work], env=env,
                          capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - started
    last = (proc.stdout.strip().splitlines() or ["?"])[-1]
    return f"{wall:.1f}s (get_data -> {last.split()[0]}; rc {proc.returncode})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-reference-ec2", action="store_true", help="its default wait is minutes")
    args = parser.parse_args()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        lab = NetLab(metadata_v4=False, metadata_v6=False)
        try:
            nova = {"sys/class/dmi/id/product_name": "OpenStack Nova\n"}
            aws = {"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                   "sys/class/dmi/id/product_uuid": "ec2e1916-9099-7caf-fd21-012345abcdef\n",
                   "sys/class/dmi/id/product_serial": "ec2e1916-9099-7caf-fd21-012345abcdef\n"}
            results["cloudseed search, no cloud DMI"] = f"{ours(lab, tmp, {}):.2f}s"
            results["cloudseed search, DMI OpenStack Nova"] = f"{ours(lab, tmp, nova):.2f}s"
            results["cloudseed search, DMI Amazon EC2"] = f"{ours(lab, tmp, aws):.2f}s"
            results["cloudseed init (network stage), no cloud DMI, no host keys"] = \
                f"{our_network_stage(lab, tmp, {}, host_keys=False):.2f}s"
            results["cloudseed init (network stage), DMI OpenStack Nova, no host keys"] = \
                f"{our_network_stage(lab, tmp, nova, host_keys=False):.2f}s"
            results["cloudseed init (network stage), DMI OpenStack Nova, with host keys"] = \
                f"{our_network_stage(lab, tmp, nova):.2f}s"
            results["cloud-init 22.4 DataSourceOpenStack.get_data(), DMI OpenStack Nova"] = \
                reference(lab, tmp, "openstack", "OpenStack Nova", "", "")
            if not args.skip_reference_ec2:
                results["cloud-init 22.4 DataSourceEc2.get_data(), DMI Amazon EC2"] = \
                    reference(lab, tmp, "ec2", "", "Amazon EC2", "ec2e1916-9099-7caf-fd21-012345abcdef")
        finally:
            lab.close()
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
