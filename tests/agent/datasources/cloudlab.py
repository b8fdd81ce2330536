"""A public cloud's metadata service emulated by ``cloudseed serve`` in a host namespace, and a
guest that boots against it: the shared part of the GCE, DigitalOcean, Hetzner and Oracle tests.

``CloudLab`` registers one instance (``cloudseed instances add``, with ``--clouds-json``) for the
guest's address and MAC, runs the server on 169.254.169.254:80 in the cloud namespace, and can
name ``metadata.google.internal`` in the guest (``/etc/netns/GUEST/hosts``, which ``ip netns
exec`` mounts over ``/etc/hosts``). ``provision`` runs the agent's local and network stages in
the guest against a fresh Debian root (an overlay over the cached debootstrapped tree) whose DMI
files say which cloud this is, and returns that root.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time

from tests.agent.datasources.netlab import PYTHON, REPO, NetLab, write_tree

CLOUDSEED = os.path.join(REPO, ".venv", "bin", "cloudseed")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd guest@example"
PROJECT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEIVIJSUxewGwwalx3dCe5IYLVlvK0oX7vQmpNk4JtQT proj@example"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAHSFCjeaZc4dNOJddKs1STcOLMwDr/Is6b2B0cfMFl other@example"
AGENT_CFG = """\
cloud_init_modules: [write_files, set_hostname, update_etc_hosts, users_groups, ssh]
cloud_config_modules: []
cloud_final_modules: []
ssh_genkeytypes: [ed25519]
"""


class CloudLab:
    def __init__(self, tmp: str, instance_id: str, clouds: dict, user_data: str, hosts: str = "",
                 extra: list[str] | None = None, listen: list[str] | None = None,
                 serve_extra: list[str] | None = None, service_addresses: tuple[str, ...] = ()):
        self.tmp = tmp
        self.lab = NetLab()
        self.etc_netns = f"/etc/netns/{self.lab.guest}"
        try:
            mac = json.loads(self.lab.guest_exec("ip", "-j", "link", "show", self.lab.guest_if).stdout)[0]["address"]
            self.mac = mac
            db = os.path.join(tmp, "server.db")
            with open(os.path.join(tmp, "key.pub"), "w") as f:
                f.write(KEY + "\n")
            with open(os.path.join(tmp, "user-data"), "w") as f:
                f.write(user_data)
            with open(os.path.join(tmp, "clouds.json"), "w") as f:
                json.dump(clouds, f)
            subprocess.run([CLOUDSEED, "instances", "--db", db, "add", "--id", instance_id, "--hostname", "lab-vm",
                            "--address", f"{self.lab.guest_ip}/24", "--mac", mac,
                            "--ssh-key", os.path.join(tmp, "key.pub"), "--user-data", os.path.join(tmp, "user-data"),
                            "--availability-zone", "zone-a-1", "--clouds-json", os.path.join(tmp, "clouds.json"),
                            *(extra or [])], check=True, capture_output=True, text=True, timeout=60)
            if hosts:
                os.makedirs(self.etc_netns, exist_ok=True)
                with open(f"{self.etc_netns}/hosts", "w") as f:
                    f.write("127.0.0.1 localhost\n" + hosts)
            for address in service_addresses:  # more service addresses (AliYun's 100.100.100.200)
                self.lab.cloud_exec("ip", "addr", "add", f"{address}/32", "dev", self.lab.cloud_if)
                self.lab.guest_exec("ip", "route", "add", f"{address}/32", "via", self.lab.cloud_ip)
            # the first is probed until it answers; ROUTER: the cloud namespace's address on the link
            listen = [spec.replace("ROUTER", self.lab.cloud_ip) for spec in listen or ["169.254.169.254:80"]]
            serve_extra = [arg.replace("ROUTER", self.lab.cloud_ip) for arg in serve_extra or []]
            self.server = subprocess.Popen(["ip", "netns", "exec", self.lab.cloud, CLOUDSEED, "serve", "--db", db,
                                            *(a for spec in listen for a in ("--listen", spec)),
                                            "--rate-limit", "0", *(serve_extra or [])],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.lab.procs.append(self.server)
            for _ in range(100):
                probe = self.lab.guest_exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "1",
                                            f"http://{listen[0]}/", check=False)
                if probe.stdout.strip() not in ("", "000"):
                    break
                if self.server.poll() is not None:
                    raise RuntimeError(f"cloudseed serve exited: {self.server.stderr.read()[-500:]}")
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.lab.close()
        shutil.rmtree(self.etc_netns, ignore_errors=True)


class DebianRoot:
    """A private writable Debian root (overlay over the cached tree); ``close`` removes it."""

    def __init__(self) -> None:
        from tests.agent.identity import debian_chroot

        self.work = tempfile.mkdtemp(prefix="cloudseed-cloudlab-")
        lower = _shared_base(debian_chroot)
        self.top, upper, scratch = (os.path.join(self.work, d) for d in ("root", "upper", "work"))
        for d in (self.top, upper, scratch):
            os.makedirs(d)
        self.mounted = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                                       f"lowerdir={lower},upperdir={upper},workdir={scratch}", self.top],
                                      capture_output=True).returncode == 0
        if not self.mounted:
            debian_chroot.unpack(self.top)

    def read(self, path: str) -> str:
        with open(os.path.join(self.top, path.lstrip("/"))) as f:
            return f.read()

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", self.top], check=False)
        shutil.rmtree(self.work, ignore_errors=True)


_UNPACKED: dict[str, str] = {}


def _shared_base(debian_chroot) -> str:
    """The cached tree unpacked once per test session (read-only lower layer)."""
    if "dir" not in _UNPACKED:
        top = tempfile.mkdtemp(prefix="cloudseed-cloudlab-base-")
        atexit.register(shutil.rmtree, top, True)
        _UNPACKED["dir"] = debian_chroot.unpack(top)
    return _UNPACKED["dir"]


def provision(cloud: CloudLab, dmi: dict[str, str], cfg: str = "") -> tuple[DebianRoot, dict]:
    """Run the local then the network stage in the guest against a new root with ``dmi``; the root
    and ``/run/cloudseed/instance-data.json``."""
    root = DebianRoot()
    write_tree(root.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in dmi.items()})
    write_tree(root.top, {"etc/cloudseed/cloud.cfg.d/90-cloudlab.cfg": AGENT_CFG + cfg})
    # the minbase tree has no network stack; a cloud image has systemd-networkd: its presence is
    # what makes the agent pick that renderer (the binary itself is never run against a --root)
    write_tree(root.top, {"usr/lib/systemd/systemd-networkd": "#!/bin/sh\n"})
    for stage in (["init", "--local"], ["init"]):
        proc = cloud.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, *stage, check=False, timeout=120)
        if proc.returncode != 0:
            root.close()
            raise AssertionError(f"cloudseed {' '.join(stage)} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    data = json.loads(root.read("/run/cloudseed/instance-data.json"))
    return root, data


GENERATOR = os.path.join(REPO, "cloudseed", "data", "systemd", "cloudseed-generator")


def generators(tmp: str, dmi: dict[str, str]) -> dict[str, str]:
    """What the shell generator and ``cloudseed generator`` decide for a root with only ``dmi``:
    ``{"shell": verdict, "python": verdict}``, each the enabled/disabled file's text."""
    verdicts = {}
    for kind in ("shell", "python"):
        root = os.path.join(tmp, f"gen-{kind}")
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(os.path.join(root, "etc"))
        write_tree(root, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in dmi.items()})
        out = os.path.join(tmp, f"gen-{kind}-out")
        if kind == "shell":
            env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": CLOUDSEED, "PATH": os.environ["PATH"]}
            proc = subprocess.run(["/bin/sh", GENERATOR, out], env=env, capture_output=True, text=True, timeout=60)
        else:
            proc = subprocess.run([CLOUDSEED, "--root", root, "generator", out], capture_output=True, text=True,
                                  timeout=60)
        assert proc.returncode == 0, proc.stderr
        run = os.path.join(root, "run", "cloudseed")
        name = "enabled" if os.path.exists(os.path.join(run, "enabled")) else "disabled"
        with open(os.path.join(run, name)) as f:
            verdicts[kind] = f"{name}: {f.read()}"
    return verdicts
