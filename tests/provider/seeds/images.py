"""Helpers for the seed tests: build seeds, and read them back with real tools (no mounting)."""

from __future__ import annotations

import os
import subprocess

from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.spec import InstanceSpec, SshKey

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq7sGZ0cXkVu1e2rM0aFy3m6Xo8xwB0wq2QWbq1Q2lO lab@test"
USER_DATA = b"#cloud-config\nhostname: seeded\nruncmd:\n  - echo hi\n"


def sample_spec(**overrides) -> InstanceSpec:
    spec = InstanceSpec(instance_id="iid-seed-0001", hostname="seeded", name="seeded",
                        ssh_keys=[SshKey(name="lab", type="ed25519", data=KEY)], user_data=USER_DATA,
                        vendor_data={"cloud-init": "#cloud-config\nruncmd: [echo vendor]\n"})
    for name, value in overrides.items():
        setattr(spec, name, value)
    return spec


def build(tmp_path, kind: str, fs: str, spec: InstanceSpec | None = None, name: str = "seed") -> str:
    out = os.path.join(str(tmp_path), f"{name}.{kind}.{fs}")
    build_seed(kind, fs, spec or sample_spec(), out)
    return out


def blkid(image: str) -> dict[str, str]:
    out = subprocess.run(["blkid", "-o", "export", image], capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def extract(image: str, fs: str, dest: str) -> str:
    """Copy every file of the image into ``dest`` with isoinfo (Rock Ridge names) or mtools."""
    os.makedirs(dest, exist_ok=True)
    if fs == "vfat":
        subprocess.run(["mcopy", "-s", "-n", "-i", image, "::/*", dest], check=True, capture_output=True)
        return dest
    listing = subprocess.run(["isoinfo", "-R", "-l", "-i", image], capture_output=True, text=True,
                             check=True).stdout
    directory = ""
    for line in listing.splitlines():
        if line.startswith("Directory listing of "):
            directory = line[len("Directory listing of "):].strip()
            continue
        fields = line.split()
        if not fields or not line.startswith("-"):
            continue
        name = fields[-1]
        path = directory + name
        data = subprocess.run(["isoinfo", "-R", "-x", path, "-i", image], capture_output=True,
                              check=True).stdout
        target = os.path.join(dest, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
    return dest


def tree(dest: str) -> dict[str, bytes]:
    files = {}
    for dirpath, _dirs, names in os.walk(dest):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, dest)] = handle.read()
    return files
