"""How a lab VM gets its instance data: seed images built from files, or a metadata server.

``Delivery`` holds what the user named (datasource, seed filesystem, the files, or a registry
instance) and, for a given work directory, writes the seeds and gives the metadata server to run
(``prepare``). Files are read again at every ``prepare``, so a try picks up the latest save. The
same delivery serves one boot, the tries of ``--repeat``, both boots of ``--compare`` and each VM
of ``--parallel`` (``user_data`` given there overrides the file).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from typing import Optional

SERVER_DATASOURCES = ("openstack", "ec2", "gce", "digitalocean", "hetzner", "oracle", "azure")
SEED_DATASOURCES = ("nocloud", "configdrive")


@dataclass
class Delivery:
    datasource: str = "nocloud"
    fs: str = "iso9660"
    seeds: list[str] = field(default_factory=list)  # ready-made seed images, attached as they are
    instance_id: str = "iid-lab-0001"
    hostname: str = "labhost"
    user_data: Optional[str] = None
    meta_data: Optional[str] = None
    vendor_data: Optional[str] = None
    network_config: Optional[str] = None
    ssh_keys: list[str] = field(default_factory=list)
    db: Optional[str] = None
    instance: Optional[str] = None
    imds_tokens: Optional[str] = None

    @property
    def platform(self) -> Optional[str]:
        """The SMBIOS identity and metadata service the VM gets (None: a seed only)."""
        return self.datasource if self.datasource in SERVER_DATASOURCES else None

    @property
    def seed_kinds(self) -> tuple[str, ...]:
        """The seeds the VM gets, as kind/fs (what a snapshot must have the same of)."""
        if self.seeds:
            return tuple(f"given/{os.path.basename(s)}" for s in self.seeds)
        if self.datasource == "azure":
            return (f"azure/{self.fs}",)
        return () if self.platform else (f"{self.datasource}/{self.fs}",)

    def with_user_data(self, path: str) -> Delivery:
        return replace(self, user_data=path)

    def spec(self, instance_id: Optional[str] = None):
        from cloudseed.provider.seeds.errors import SeedError
        from cloudseed.provider.seeds.spec import spec_from_files, spec_from_registry

        if self.db or self.instance:
            if not (self.db and self.instance):
                raise SeedError("--db and --instance go together")
            spec = spec_from_registry(self.db, self.instance)
        else:
            spec = spec_from_files(self.instance_id, self.hostname, self.meta_data, self.user_data,
                                   self.vendor_data, self.network_config, self.ssh_keys)
        if instance_id:
            spec.instance_id = instance_id
        return spec

    def build_seeds(self, workdir: str, spec) -> list[str]:
        """The seed images for ``spec`` in ``workdir`` (copies of the ready-made ones when given: a
        snapshot's tries pad them, and nothing of the user's is changed)."""
        import shutil

        from cloudseed.provider.seeds.build import build_seed

        if self.seeds:
            copies = []
            for number, seed in enumerate(self.seeds):
                copies.append(os.path.join(workdir, f"seed-{number}-{os.path.basename(seed)}"))
                shutil.copyfile(seed, copies[-1])
            return copies
        kinds = self.seed_kinds
        out = []
        for number, kind in enumerate(kinds):
            name, fs = kind.split("/", 1)
            path = os.path.join(workdir, f"seed-{number}-{name}.{fs}")
            if os.path.exists(path):
                os.unlink(path)
            build_seed(name, fs, spec, path)
            out.append(path)
        return out

    def prepare(self, workdir: str, spec=None) -> tuple[list[str], contextlib.AbstractContextManager]:
        """(seeds, server): the seed images written into ``workdir`` and the metadata server to run
        while the VM boots (a context manager giving the server, or None)."""
        from cloudseed.lab.boots.metadata import MetadataServer

        os.makedirs(workdir, exist_ok=True)
        spec = spec or self.spec()
        seeds = self.build_seeds(workdir, spec)
        server: contextlib.AbstractContextManager = contextlib.nullcontext()
        if self.platform:
            server = MetadataServer(spec, workdir, imds_tokens=self.imds_tokens)
        return seeds, server

    def placeholders(self, workdir: str) -> list[str]:
        """Seeds with the same labels and filesystems but no user data: what a snapshot boots with."""
        from cloudseed.provider.seeds.spec import InstanceSpec

        return self.build_seeds(workdir, InstanceSpec(instance_id="iid-lab-snapshot", hostname="lab-snapshot"))
