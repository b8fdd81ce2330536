"""Azure: the provisioning media (``ovf-env.xml``), IMDS, and the wire server's "ready" report.

Possible only where DMI's chassis asset tag is Azure's (``7783-7084-3265-9085-8269-3286-77``),
a seed directory holds ``ovf-env.xml`` (``/var/lib/cloud/seed/azure``), or a device carries the
provisioning media (ISO 9660 labelled ``rd_rdfe_stable*``, or UDF). Read as cloud-init 22.4 reads it:

- ``ovf-env.xml`` (``_azure_ovf``): the admin user (the default user, its password hashed, SSH
  password logins as ``DisableSshPasswordAuthentication`` says), SSH keys, hostname and
  ``CustomData`` (the user-data); the media is read in userspace (UDF: ``_udf``; ISO 9660), and
  mounted only when that fails (a UDF metadata partition);
- IMDS ``/metadata/instance?api-version=2021-08-01`` (``Metadata: true``): the instance id
  (``vmId``), location and zone, keys (``compute.publicKeys`` before the OVF's), and the network
  config: DHCP on every NIC that has addresses, named ``ethN`` and matched by MAC, route metric
  100 x (N+1), secondary addresses static, DHCPv6 where the NIC has IPv6 addresses;
- then the VM is reported ready to the wire server (``_azure_wireserver``), once per instance;
  a failure is an error in the status, bounded in time, never a hang;
- the resource disk (``/dev/disk/cloud/azure_resource``, or ``disk_aliases: {ephemeral0: ...}``):
  when it is there and still as the platform made it (``_azure_resource_disk``), cloud-init's
  built-in ``disk_setup``/``fs_setup`` (gpt, one ext4 partition) join the datasource's config and
  the disk becomes ``ephemeral0`` (mounts puts it on ``/mnt``); otherwise it is left alone and the
  status says why. On the same instance a fresh disk (a resize or redeploy) has those two modules
  run again, as 22.4's ``address_ephemeral_resize`` does.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AnyOf, Disk, Dmi, Path
from cloudseed.agent.datasources._metadata_service import ServiceLimits, reachable
from cloudseed.clouds.azure import CLOUD

LOG = logging.getLogger("cloudseed.datasources.azure")

ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
SEED_DIRS = ("/var/lib/cloudseed/seed/azure", "/var/lib/cloud/seed/azure")
LABEL_PREFIX = "rd_rdfe_stable"
IMDS_URL = CLOUD.addresses[0] + CLOUD.requests["instance"].path  # the wire contract: clouds/azure.py
F = CLOUD.fields  # the IMDS document's names
API_VERSION = CLOUD.versions[0]
MAX_DOCUMENT = 4 * 1024 * 1024
READY_MARKER = "azure-reported-ready"


# Azure's provisioning media: ISO 9660 labelled rd_rdfe_stable*, or a UDF disc (any label); the
# superblocks are read in this process (a few KiB per device, no process started)
MEDIA = AnyOf(Disk(f"{LABEL_PREFIX}*", fstypes=("iso9660",)), Disk("*", fstypes=("udf",)),
              why="Azure provisioning media on {value}")


def _media_devices() -> list[str]:
    """The block devices holding Azure's provisioning media (``MEDIA``)."""
    found = MEDIA.value(None, Azure.name)
    return found.split(", ") if found else []


def _hash_password(password: str) -> str | None:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt  # deprecated, gone in 3.13: then openssl

        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_SHA512))
    except ImportError:
        from cloudseed.core.root import run_on_machine

        proc = run_on_machine(["openssl", "passwd", "-6", "-stdin"], input=password, timeout=10)
        return proc.stdout.strip() if proc.returncode == 0 else None


def network_config(imds_network: Any) -> dict | None:
    """cloud-init 22.4's version 2 config from IMDS ``network`` (None: nothing usable)."""
    if not isinstance(imds_network, dict) or not isinstance(imds_network.get(F["interface"]), list):
        return None
    ethernets: dict[str, Any] = {}
    for index, nic in enumerate(imds_network[F["interface"]]):
        if not isinstance(nic, dict) or not nic.get(F["mac"]):
            continue
        name = f"eth{index}"
        override = {"route-metric": (index + 1) * 100}
        entry: dict[str, Any] = {"dhcp4": True, "dhcp4-overrides": override, "dhcp6": False}
        has_address = False
        for kind, default_prefix in ((F["ipv4"], "24"), (F["ipv6"], "128")):
            family = nic.get(kind) if isinstance(nic.get(kind), dict) else {}
            addresses = family.get(F["ip_address"]) or []
            if not addresses:
                continue
            has_address = True
            if kind == F["ipv6"]:
                entry["dhcp6"] = True
                entry["dhcp6-overrides"] = override
            subnets = family.get(F["subnet"]) or [{}]
            prefix = subnets[0].get(F["prefix"], default_prefix) if isinstance(subnets[0], dict) else default_prefix
            for address in addresses[1:]:
                entry.setdefault("addresses", []).append(f"{address[F['private_ip']]}/{prefix}")
        if not has_address:
            continue
        mac = str(nic[F["mac"]]).replace("-", "").replace(":", "").lower()
        mac = ":".join(mac[i:i + 2] for i in range(0, len(mac), 2))
        entry.update({"match": {"macaddress": mac}, "set-name": name})
        ethernets[name] = entry
    return {"version": 2, "ethernets": ethernets} if ethernets else None


# accelerated networking's VFs (cloud-init 22.4's BLACKLIST_DRIVERS): never the fallback NIC
BLACKLIST_DRIVERS = ["mlx4_core", "mlx5_core"]


def fallback_network_config(root: Any) -> dict:
    """As cloud-init 22.4 without IMDS network data: DHCP on the most likely NIC, matched by MAC
    (Mellanox VFs excluded); ``{}`` without one. Not ``eth0`` by name: the NIC may be ens3."""
    from cloudseed.network.fallback import candidates

    nics = candidates(root, blacklist_drivers=BLACKLIST_DRIVERS)
    if not nics:
        return {}
    name, mac = nics[0]
    return {"version": 2, "ethernets": {name: {"match": {"macaddress": mac}, "set-name": name, "dhcp4": True}}}


class Azure(Datasource):
    name = "Azure"
    stages = (LOCAL, NETWORK)
    platform = "azure"
    detection = (
        Dmi("chassis_asset_tag", ASSET_TAG, why="DMI chassis_asset_tag is Azure's ({value})"),
        Path(*SEED_DIRS, kind="file", inside=("ovf-env.xml",), why="seed directory {value} holds ovf-env.xml"),
        MEDIA,
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "azure"
        self.warnings: list[str] = []
        self.errors: list[str] = []  # the stage reports them in the status
        self.reported_ready: str | None = None

    @classmethod
    def _seed_dirs(cls, ctx: DatasourceContext) -> list[str]:
        return [d for d in SEED_DIRS if ctx.root.isfile(f"{d}/ovf-env.xml")]

    # -- the provisioning media
    def _read_ovf(self) -> tuple[Any, str] | None:
        from cloudseed.agent.datasources._azure_ovf import MAX_BYTES, parse

        for directory in self._seed_dirs(self.ctx):
            path = self.ctx.root.path(f"{directory}/ovf-env.xml")
            with open(path, "rb") as f:
                return parse(f.read(MAX_BYTES + 1)), f"seed-dir ({directory})"
        from cloudseed.agent.devices import MountError, is_udf, mounted_readonly

        for device in _media_devices():
            if is_udf(device):  # read in userspace first: no udf kernel module needed
                from cloudseed.agent.datasources._udf import UdfError, read_root_file

                try:
                    return parse(read_root_file(device, "ovf-env.xml", MAX_BYTES + 1)), \
                        f"provisioning media ({device}, UDF)"
                except UdfError as e:
                    LOG.info("Azure: %s as UDF: %s; trying ISO 9660 and mount", device, e)
            try:
                with mounted_readonly(device, fstypes=("iso9660", "udf")) as top:
                    path = os.path.join(top, "ovf-env.xml")
                    if not os.path.isfile(path):
                        LOG.info("Azure: %s holds no ovf-env.xml", device)
                        continue
                    with open(path, "rb") as f:
                        return parse(f.read(MAX_BYTES + 1)), f"provisioning media ({device})"
            except MountError as e:
                LOG.warning("Azure: %s", e)
                self.warnings.append(f"Azure: {e}")
        return None

    # -- IMDS
    def _imds(self, url: str, limits: ServiceLimits) -> dict | None:
        from cloudseed.core.http import FetchError, fetch

        try:
            asked = CLOUD.requests["instance"]
            body = fetch(f"{url}?{asked.query.replace('{version}', API_VERSION)}", headers=asked.headers(),
                         timeout=limits.timeout,
                         retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.max_wait + limits.timeout * limits.retries)
        except FetchError as e:
            LOG.info("Azure: IMDS %s: %s", url, e)
            return None
        try:
            document = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            LOG.warning("Azure: IMDS answer is not JSON: %s", e)
            return None
        return document if isinstance(document, dict) else None

    def fetch(self) -> bool:
        """OVF, then IMDS and the ready report while the network is up (in the local stage: a
        temporary lease, only when DMI says Azure; a seed directory or a disc alone waits for the
        network stage, so a UDF disc on another platform costs no DHCP)."""
        from cloudseed.agent.datasources._azure_ovf import OvfError

        section = self.ctx.ds_cfg(self.name)
        limits = ServiceLimits.from_cfg(section)
        started = time.monotonic()
        identified = self.ctx.dmi("chassis_asset_tag") == ASSET_TAG
        if self.ctx.stage == LOCAL and not identified and limits.max_wait > 0:
            LOG.info("Azure: not identified by DMI; IMDS and the ready report wait for the network stage")
            return False
        try:
            found = self._read_ovf()
        except OvfError as e:
            LOG.error("Azure: %s", e)
            raise
        if found is None and not identified:
            LOG.info("Azure: no ovf-env.xml and no Azure DMI tag; not Azure")
            return False
        if limits.max_wait <= 0:  # IMDS switched off: the media alone
            self._fill(found, {})
            if self.ctx.stage != LOCAL:
                self._report_ready(section, {})
            return found is not None
        with reachable(self.ctx, self.name) as ok:
            imds = self._imds(str(section.get("imds_url") or IMDS_URL), limits) if ok else None
            if imds is None and self.ctx.stage == LOCAL:
                LOG.info("Azure: IMDS not reachable in the local stage; leaving it to the network stage")
                return False
            if found is None and imds is None:
                return False
            self._fill(found, imds or {})
            if imds and self.userdata_raw and self.ctx.checks_signatures:
                self._read_signature(str(section.get("imds_url") or IMDS_URL), limits)
            self._report_ready(section, imds or {})  # while the (temporary) network is up
        LOG.info("Azure: instance %s from %s in %.2fs", self.instance_id, self.subplatform,
                 time.monotonic() - started)
        return True

    def _read_signature(self, imds_url: str, limits: ServiceLimits) -> None:
        """Signed user-data: the custom data's signature, which IMDS serves beside the same data
        (``compute/userData.sig``, base64 text there: the signature covers it decoded)."""
        from cloudseed.agent.datasources._metadata_service import get_signature
        from cloudseed.agent.userdata_trust import read_signatures

        asked = CLOUD.requests["user_data"]
        url = imds_url + asked.target(API_VERSION)[len(CLOUD.requests["instance"].path):]
        read_signatures(self, {"user-data": (url, asked.headers())},
                        lambda sig_url, headers: get_signature(sig_url, headers, limits))

    def service_url(self) -> str | None:
        """IMDS when it answered (``subplatform`` ends ``+ IMDS``); the provisioning media alone: None."""
        if "IMDS" not in self.subplatform.split(" + "):
            return None
        return str(self.ctx.ds_cfg(self.name).get("imds_url") or IMDS_URL)

    def _fill(self, found: tuple[Any, str] | None, imds: dict) -> None:
        ovf, where = found if found else (None, "")
        compute = imds.get(F["compute"]) if isinstance(imds.get(F["compute"]), dict) else {}
        profile = compute.get(F["os_profile"]) if isinstance(compute.get(F["os_profile"]), dict) else {}
        instance_id = compute.get(F["vm_id"]) or self.ctx.dmi("product_uuid") or ""
        hostname = (ovf.hostname if ovf else None) or profile.get(F["computer_name"]) or compute.get(F["name"])
        self.metadata = {"instance-id": str(instance_id).lower() if instance_id else "iid-azure"}
        if hostname:
            self.metadata["local-hostname"] = str(hostname)
        location = compute.get(F["location"]) or None
        zone = compute.get(F["zone"]) or None
        self.region = str(location) if location else None
        # as cloud-init 22.4: the availability zone is the platform fault domain (the zone stays in the metadata)
        fault_domain = compute.get(F["fault_domain"])
        self.availability_zone = str(fault_domain) if fault_domain not in (None, "") else None
        if zone:
            self.metadata["zone"] = str(zone)
        imds_keys = [str(k.get(F["key_data"])).strip() for k in compute.get(F["public_keys"]) or []
                     if isinstance(k, dict) and k.get(F["key_data"])]
        self.public_keys = imds_keys or (ovf.key_values if ovf else [])
        self.metadata["public-keys"] = list(self.public_keys)
        config: dict[str, Any] = {}
        user: dict[str, Any] = {}
        username = (ovf.username if ovf else None) or profile.get(F["admin_username"])
        if username:
            user["name"] = str(username)
        if ovf is not None:
            if ovf.disable_ssh_password_auth is not None:
                config["ssh_pwauth"] = not ovf.disable_ssh_password_auth
            elif ovf.password:
                config["ssh_pwauth"] = True
            if ovf.password:
                user["lock_passwd"] = False
                from cloudseed.agent.datasources._azure_ovf import PASSWORD_REDACTED

                if ovf.password != PASSWORD_REDACTED:
                    hashed = _hash_password(ovf.password)
                    if hashed:
                        user["hashed_passwd"] = hashed
                    else:
                        self.warnings.append("Azure: the admin password could not be hashed; not set")
            if ovf.custom_data:
                self.userdata_raw = ovf.custom_data
        if user:
            config["system_info"] = {"default_user": user}
        self.extra["cloud_config"] = config  # under the system config's, over it; user-data wins
        self._resource_disk()
        self.network_config = network_config(imds.get(F["network"])) or fallback_network_config(self.ctx.root) or None
        self.raw = {"imds": imds}
        sources = [s for s in (where, "IMDS" if imds else "") if s]
        self.subplatform = " + ".join(sources)

    # -- the resource disk
    def reused(self) -> None:
        """A later boot of the same instance from the cache: a resource disk that is as the platform
        makes it again (a resize, a redeploy) is formatted and mounted again, as 22.4's
        ``address_ephemeral_resize`` checks at every boot. Without one: a stat and a sector read."""
        try:
            self._resource_disk(same_instance=True)
        except OSError as e:  # never a failed boot over the resource disk
            LOG.warning("Azure: resource disk: %s", e)
            self.warnings.append(f"Azure: the resource disk could not be checked: {e}")

    def _resource_disk(self, same_instance: bool | None = None) -> None:
        """cloud-init's ephemeral disk config and ``ephemeral0`` when the resource disk may be reformatted."""
        from cloudseed.agent.datasources import _azure_resource_disk as rd
        from cloudseed.core.values import as_bool

        section = self.ctx.ds_cfg(self.name)
        aliases = section.get("disk_aliases")
        disk = str((aliases.get("ephemeral0") if isinstance(aliases, dict) else None) or rd.RESOURCE_DISK)
        if not os.path.exists(disk):  # one stat: no resource disk on this VM size (as 22.4: nothing merged)
            LOG.info("Azure: no resource disk (%s)", disk)
            return
        mapping = {"ephemeral0": disk}
        if same_instance is None:
            previous = self.ctx.root.read_text(self.ctx.paths.current_instance_file, default="").strip()
            same_instance = previous == self.instance_id
        if same_instance and not rd.looks_fresh(disk):  # not as the platform makes it: never formatted again
            if len(rd.partitions(disk)) == 1:  # the one partition disk_setup made: still ephemeral0
                self.metadata["block-device-mapping"] = mapping
            return
        preserve = as_bool(section.get(rd.PRESERVE_KEY), False)
        verdict = rd.reformat_verdict(disk, preserve_ntfs=preserve)
        if verdict.safe:
            import copy

            self.metadata["block-device-mapping"] = mapping
            config = self.extra.setdefault("cloud_config", {})
            for key, value in copy.deepcopy(rd.EPHEMERAL_CLOUD_CONFIG).items():
                config.setdefault(key, value)
            LOG.info("Azure: resource disk %s becomes ext4 on /mnt: %s", disk, verdict.reason)
            if same_instance:  # the disk came back fresh (resize, redeploy): format and mount it again
                from cloudseed.agent.state import PER_INSTANCE, Semaphores

                sems = Semaphores(self.ctx.paths, self.instance_id)
                for module in ("disk_setup", "mounts"):
                    sems.clear(module, PER_INSTANCE)
                LOG.info("Azure: same instance, fresh resource disk: disk_setup and mounts run again")
        elif preserve or same_instance:
            LOG.info("Azure: resource disk %s left alone: %s", disk, verdict.reason)
        else:
            LOG.warning("Azure: resource disk %s left alone: %s", disk, verdict.reason)
            self.warnings.append(f"Azure: the resource disk {disk} is not formatted or mounted: {verdict.reason}")

    # -- the wire server
    def _report_ready(self, section: dict, imds: dict) -> None:
        from cloudseed.agent.datasources._azure_wireserver import (
            WELL_KNOWN,
            WireServerError,
            endpoint_from_leases,
            report_ready,
        )

        vm_id = str(((imds.get(F["compute"]) or {}) if isinstance(imds.get(F["compute"]), dict) else {}).get(F["vm_id"])
                    or self.ctx.dmi("product_uuid") or "unknown").lower()
        marker = f"{self.ctx.paths.instance_dir(vm_id)}/sem/{READY_MARKER}"
        if section.get("report_ready") is False or self.ctx.root.exists(marker):
            return
        endpoint = str(section.get("wireserver") or endpoint_from_leases() or WELL_KNOWN)
        try:
            self.reported_ready = report_ready(endpoint, deadline=float(section.get("ready_deadline", 30)))
        except (WireServerError, ValueError) as e:
            LOG.error("Azure: reporting ready failed: %s", e)
            self.errors.append(f"Azure: the VM could not be reported ready: {e}")
            return
        self.ctx.root.write(marker, f"{self.reported_ready}\n", mode=0o644)


DATASOURCE = Azure
