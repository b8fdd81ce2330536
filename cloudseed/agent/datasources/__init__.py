"""The datasource framework: what a datasource declares, how one is found, how it is cached.

A datasource is one file in this package named after it in lower case (``NoCloud`` ->
``nocloud.py``) that sets ``DATASOURCE`` to a ``Datasource`` subclass declaring its ``name``,
the ``stages`` it can run in ("local": no network needed; "network"), its ``detection`` (facts
as data, see ``_facts.py``: DMI strings, files, labels, the kernel command line, settings; the
Python detection ``why`` and the shell generator are both derived from it) and ``fetch``. The
one ``fallback`` datasource (None) is never detected: it is used when nothing else answered.
``datasource_list`` orders them; only the listed ones are ever imported. The contract is
written out in ``_contract.py`` (for tests and tools).
"""

from __future__ import annotations

import base64
import importlib
import logging

from cloudseed.agent.state import Paths
from cloudseed.core.root import TargetRoot

TYPE_CHECKING = False  # typing and dataclasses are not imported at boot
if TYPE_CHECKING:
    from typing import Any, ClassVar

LOG = logging.getLogger("cloudseed.datasources")

LOCAL = "local"
NETWORK = "network"

# Names cloud-init users write in datasource_list that live in another file here.
ALIASES = {"nocloudnet": "nocloud", "openstacklocal": "openstack", "configdrive2": "configdrive"}


class DatasourceContext:
    """What a datasource may look at while detecting and fetching."""

    def __init__(self, root: TargetRoot, cfg: dict, cmdline: str, paths: Paths, stage: str):
        self.root = root
        self.cfg = cfg
        self.cmdline = cmdline
        self.paths = paths
        self.stage = stage
        self._dmi: dict[str, str] = {}  # DMI strings do not change while the machine runs

    def ds_cfg(self, name: str) -> dict:
        """``datasource: {<name>: {...}}`` from the system config."""
        section = (self.cfg.get("datasource") or {}).get(name) or {}
        return section if isinstance(section, dict) else {}

    @property
    def checks_signatures(self) -> bool:
        """Does the image check signed user-data (``trusted_userdata_keys`` or ``require_signed_userdata``,
        ``cloudseed.agent.userdata_trust``)? Only then do datasources read the signatures served
        beside the data: without them a boot makes no such request and imports nothing for it."""
        return bool(self.cfg.get("trusted_userdata_keys") or self.cfg.get("require_signed_userdata"))

    def dmi(self, key: str) -> str:
        """A DMI/SMBIOS string (``sys_vendor``, ``product_name``, ``product_serial``...) or '';
        read once per context."""
        value = self._dmi.get(key)
        if value is None:
            try:
                value = self.root.read_text(f"/sys/class/dmi/id/{key}", default="").strip()
            except OSError:
                value = ""
            self._dmi[key] = value
        return value


class Datasource:
    """Base class: the data every datasource provides once ``fetch`` returned True."""

    name: ClassVar[str] = "?"
    stages: ClassVar[tuple[str, ...]] = (LOCAL,)
    platform: ClassVar[str] = "unknown"
    # instance-data keys (under ds.meta_data) that only root may read
    sensitive_keys: ClassVar[tuple[str, ...]] = ()
    # the last resort, used when no other datasource answered; never detected
    fallback: ClassVar[bool] = False
    # what may show this datasource is here: facts (``_facts.py``), tried in order
    detection: ClassVar[tuple[Any, ...]] = ()

    def __init__(self, ctx: DatasourceContext):
        self.ctx = ctx
        self.metadata: dict[str, Any] = {}
        self.userdata_raw: bytes | None = None
        self.vendordata_raw: bytes | None = None
        self.vendordata2_raw: bytes | None = None
        self.network_config: dict | None = None
        self.public_keys: list[str] = []
        self.subplatform: str = ""
        self.cloud_name: str = self.name.lower()
        self.region: str | None = None
        self.availability_zone: str | None = None
        self.extra: dict[str, Any] = {}  # datasource-specific facts (admin_pass...), sensitive
        self.raw: dict[str, Any] = {}  # the crawled metadata as served, for instance data "ds"

    # -- declared behaviour
    @classmethod
    def why(cls, ctx: DatasourceContext) -> str | None:
        """Why this datasource may exist here, or None when it cannot: the reason of the first of
        its declared ``detection`` facts that holds in ``ctx.stage``. Local facts only, no waiting.

        Derived, never overridden (the generator reports the reason; the stages skip a datasource
        whose answer is None).
        """
        if not cls.detection:
            return f"{cls.name} declares no detection; tried anyway"
        from cloudseed.agent.datasources._facts import first_reason

        return first_reason(cls, ctx)

    @classmethod
    def identified(cls, ctx: DatasourceContext) -> str | None:
        """``why`` from the facts about the machine alone, its configuration left out (a DMI
        string, not a configured URL): the platform is positively this one."""
        from cloudseed.agent.datasources._facts import first_reason

        return first_reason(cls, ctx, machine_only=True)

    @classmethod
    def detect(cls, ctx: DatasourceContext) -> bool:
        """``why(ctx) is not None`` (a convenience; declare ``why``, not this)."""
        return cls.why(ctx) is not None

    def fetch(self) -> bool:
        """Read everything; True when this datasource provided an instance."""
        raise NotImplementedError

    def reused(self) -> None:
        """A later boot of the same instance reuses this datasource from its cache (no fetch): look
        at the local facts that can change between boots (Azure: its resource disk). Quick; nothing
        by default. Changes made here are saved with the cache."""

    # -- derived facts
    def service_url(self) -> str | None:
        """The http(s) URL of the service this instance was read from; None when it came from local
        media, files or a socket. Read from ``subplatform`` (``metadata (URL)``, NoCloud's
        ``seed-dir (cmdline,URL)``), which the cache keeps for the later stages' processes."""
        start = min((i for i in (self.subplatform.find("http://"), self.subplatform.find("https://")) if i >= 0),
                    default=-1)
        if start < 0:
            return None
        end = len(self.subplatform)
        for stop in (",", ")", " "):
            found = self.subplatform.find(stop, start)
            end = found if 0 <= found < end else end
        return self.subplatform[start:end]

    @property
    def instance_id(self) -> str:
        value = self.metadata.get("instance-id") or self.metadata.get("instance_id")
        return str(value) if value not in (None, "") else "iid-" + self.name.lower()

    @property
    def local_hostname(self) -> str | None:
        for key in ("local-hostname", "local_hostname", "hostname"):
            value = self.metadata.get(key)
            if value:
                return str(value)
        return None

    @property
    def random_seed(self) -> bytes | None:
        seed = self.metadata.get("random_seed")
        if not seed:
            return None
        try:
            return base64.b64decode(seed)
        except (ValueError, TypeError):
            return str(seed).encode()

    # -- cache (plain JSON, survives upgrades)
    def to_json(self) -> dict[str, Any]:
        def b64(value: bytes | None) -> str | None:
            return None if value is None else base64.b64encode(value).decode("ascii")

        return {
            "format": 1,
            "name": self.name,
            "metadata": self.metadata,
            "userdata_raw": b64(self.userdata_raw),
            "vendordata_raw": b64(self.vendordata_raw),
            "vendordata2_raw": b64(self.vendordata2_raw),
            "network_config": self.network_config,
            "public_keys": self.public_keys,
            "subplatform": self.subplatform,
            "cloud_name": self.cloud_name,
            "region": self.region,
            "availability_zone": self.availability_zone,
            "extra": self.extra,
            "raw": self.raw,
        }

    @classmethod
    def from_json(cls, ctx: DatasourceContext, data: dict[str, Any]) -> Datasource:
        def unb64(value: str | None) -> bytes | None:
            return None if value is None else base64.b64decode(value)

        ds = cls(ctx)
        ds.metadata = data.get("metadata") or {}
        ds.userdata_raw = unb64(data.get("userdata_raw"))
        ds.vendordata_raw = unb64(data.get("vendordata_raw"))
        ds.vendordata2_raw = unb64(data.get("vendordata2_raw"))
        ds.network_config = data.get("network_config")
        ds.public_keys = list(data.get("public_keys") or [])
        ds.subplatform = data.get("subplatform") or ""
        ds.cloud_name = data.get("cloud_name") or ds.cloud_name
        ds.region = data.get("region")
        ds.availability_zone = data.get("availability_zone")
        ds.extra = data.get("extra") or {}
        ds.raw = data.get("raw") or {}
        return ds


class DatasourceSearch:
    """The outcome of looking for a datasource in one stage."""

    def __init__(self) -> None:
        self.datasource: Datasource | None = None
        self.tried: list[str] = []
        self.errors: list[str] = []


def is_fallback(name: str) -> bool:
    """Does ``name`` (as written in datasource_list) name the fallback datasource?"""
    try:
        return bool(datasource_class(name).fallback)
    except (ImportError, AttributeError):
        return False


def datasource_class(name: str) -> type[Datasource]:
    """The class declared by the datasource file for ``name`` (ImportError when unknown)."""
    key = name.replace("-", "").replace("_", "").lower()
    module = importlib.import_module(f"{__name__}.{ALIASES.get(key, key)}")
    return module.DATASOURCE


def find_datasource(ctx: DatasourceContext, names: list[str]) -> DatasourceSearch:
    """Try the datasources of ``names`` that can run in ``ctx.stage``, in order; first found wins.

    The fallback (None) is never chosen here: the stage falls back to it when nothing else answered.
    """
    search = DatasourceSearch()
    for name in names:
        try:
            cls = datasource_class(str(name))
        except (ImportError, AttributeError):
            LOG.warning("datasource_list names %r, which cloudseed does not provide; skipped", name)
            continue
        if cls.fallback or ctx.stage not in cls.stages:
            continue
        try:
            if cls.why(ctx) is None:
                LOG.debug("datasource %s: not present (detection)", cls.name)
                continue
        except Exception as e:  # a broken detector must not stop the search
            LOG.warning("datasource %s: detection failed: %s", cls.name, e)
            continue
        search.tried.append(cls.name)
        ds = cls(ctx)
        try:
            if ds.fetch():
                LOG.info("datasource %s found instance %s (%s)", cls.name, ds.instance_id, ds.subplatform)
                search.datasource = ds
                return search
        except Exception as e:
            LOG.error("datasource %s: %s", cls.name, e, exc_info=LOG.isEnabledFor(logging.DEBUG))
            search.errors.append(f"datasource {cls.name}: {e}")
    return search
