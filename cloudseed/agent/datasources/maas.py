"""MAAS: Canonical's Metal-as-a-Service metadata API, OAuth-signed, or a MAAS seed directory.

MAAS has no DMI mark: the datasource is possible only when configured. Sources, first found wins:
the seed directory ``/var/lib/cloud/seed/maas`` (``meta-data/instance-id``,
``meta-data/local-hostname``, ``meta-data/public-keys``, ``meta-data/vendor-data``, ``user-data``),
then ``datasource: MAAS: {metadata_url, consumer_key, token_key, token_secret, consumer_secret}``
(MAAS's curtin writes it into ``/etc/cloud/cloud.cfg.d``), then the kernel command line of MAAS's
ephemeral environment: ``cloud-config-url=URL`` (with MAAS's iSCSI name, as ds-identify checks) is
fetched once; it is a ``#cloud-config`` whose ``datasource: MAAS`` section is used, and the whole
document goes under the system config (root-only), as cloud-init writes it to /run/cloud-init/cloud.cfg.
The API files are ``<metadata_url>/2012-03-01/meta-data/{instance-id, local-hostname, public-keys,
vendor-data}`` and ``.../user-data``; the first two are required (a 404 is an error naming the
file), the rest optional; ``vendor-data`` is YAML (its ``cloud-init`` entry when a mapping).
Requests carry ``Authorization: OAuth`` (PLAINTEXT, ``cloudseed.core.oauth``) when the keys are set;
on a 401/403 the server's ``Date`` gives the clock skew and the request is signed again with the
corrected timestamp, as cloud-init 22.4 does (kept for this boot; cloud-init also writes it to
/run/oauth_skew.json). ``max_wait`` (default 120 s, as cloud-init) bounds the wait for the first
answer, ``timeout`` each request.
"""

from __future__ import annotations

import logging
import time

from cloudseed.agent.datasources import NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, Cmdline, Path, Setting
from cloudseed.clouds.maas import CLOUD

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.maas")

MD_VERSION = CLOUD.versions[0]  # the wire contract: clouds/maas.py
SEED_DIRS = ("/var/lib/cloudseed/seed/maas", "/var/lib/cloud/seed/maas")
MAAS_IQN = "iqn.2004-05.com.ubuntu:maas"


def _file(role: str) -> str:
    """The contract's ``role`` request as a path under the version (``meta-data/instance-id``)."""
    return CLOUD.tail(role).split("/", 1)[1]


F = CLOUD.fields  # the meta-data files' names
META_DATA = _file("instance_id")[: -len(F["instance_id"])]  # the directory of the meta-data files, "meta-data/"
# (path, required), in the contract's order: instance-id and local-hostname are required
FILES = tuple((_file(role), role in ("instance_id", "local_hostname")) for role in CLOUD.requests)
MAX_FILE = 16 * 1024 * 1024
KEYS = ("consumer_key", "token_key", "token_secret", "consumer_secret")


class MAASError(Exception):
    """MAAS metadata is unusable or refused; the message names the file or URL."""


def cmdline_url(cmdline: str) -> str | None:
    """The ``cloud-config-url=`` of MAAS's ephemeral environment (MAAS's iSCSI name also present)."""
    if MAAS_IQN not in cmdline:
        return None
    for token in cmdline.split():
        if token.startswith("cloud-config-url="):
            return token.split("=", 1)[1]
    return None


def _seed_dir(ctx: DatasourceContext) -> str | None:
    for directory in SEED_DIRS:
        if ctx.root.isdir(directory) and ctx.root.listdir(directory):
            return directory
    return None


def check_contents(found: dict[str, bytes], where: str) -> dict[str, Any]:
    """``{"metadata", "userdata", "vendordata", "vendordata_document"}`` from the files read (by path; the
    last is the vendor-data YAML as read); MAASError when malformed."""
    import yaml

    from cloudseed.core.yaml_loading import load_yaml

    missing = [path for path, required in FILES if required and path not in found]
    if missing:
        raise MAASError(f"{where}: missing required {', '.join(missing)}")
    md: dict[str, Any] = {}
    vendor_file, user_file = _file("vendor_data"), _file("user_data")
    for path, _ in FILES:
        if path.startswith(META_DATA) and path != vendor_file and path in found:
            md[path[len(META_DATA):]] = found[path].decode("utf-8", "replace")  # meta-data/NAME as NAME
    vendor: Any = None
    if found.get(vendor_file):
        try:
            vendor = load_yaml(found[vendor_file])
        except yaml.YAMLError as e:
            raise MAASError(f"{where}/{vendor_file}: not YAML ({str(e).splitlines()[0]})") from None
    return {"metadata": md, "userdata": found.get(user_file), "vendordata": vendor,
            "vendordata_document": found.get(vendor_file)}


def read_seed_dir(top: str, where: str) -> dict[str, Any]:
    import os

    found: dict[str, bytes] = {}
    for path, _ in FILES:
        full = os.path.join(top, path)
        if os.path.isfile(full):
            with open(full, "rb") as f:
                data = f.read(MAX_FILE + 1)
            if len(data) > MAX_FILE:
                raise MAASError(f"{where}/{path}: larger than {MAX_FILE} bytes")
            found[path] = data
    if not found:
        raise MAASError(f"{where}: no MAAS files (meta-data/instance-id...)")
    return check_contents(found, where)


class OAuthReader:
    """GETs signed with the configured keys (none: unsigned), correcting for the server's clock."""

    def __init__(self, section: dict[str, Any], timeout: float):
        creds = {k: section.get(k) for k in KEYS}
        required = [creds[k] for k in ("consumer_key", "token_key", "token_secret")]
        if any(required) and not all(required):
            raise MAASError("datasource.MAAS: consumer_key, token_key and token_secret go together "
                            "(all or none of them)")
        self.creds = {k: str(v or "") for k, v in creds.items()} if all(required) else None
        self.timeout = timeout
        self.skew: dict[str, int] = {}  # host:port -> seconds the server's clock is ahead

    def headers(self, url: str) -> dict[str, str]:
        if self.creds is None:
            return {}
        import urllib.parse

        from cloudseed.core import oauth

        skew = self.skew.get(urllib.parse.urlsplit(url).netloc)
        stamp = int(time.time()) + skew if skew is not None else None
        return {"Authorization": oauth.header(self.creds["consumer_key"], self.creds["token_key"],
                                              self.creds["token_secret"], self.creds["consumer_secret"], stamp)}

    def learn_skew(self, error: Any) -> bool:
        """From a 401/403's Date header: remember the skew; True when it changed (sign again)."""
        import email.utils
        import urllib.parse

        if error.status not in (401, 403) or self.creds is None:
            return False
        date = next((v for k, v in error.headers.items() if k.lower() == "date"), None)
        if not date:
            LOG.warning("MAAS: HTTP %s without a Date header: the clock skew cannot be corrected", error.status)
            return False
        try:
            remote = email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            LOG.warning("MAAS: the Date header %r is not a date", date)
            return False
        host = urllib.parse.urlsplit(error.url).netloc
        skew = int(remote - time.time())
        old = self.skew.get(host, 0)
        self.skew[host] = skew
        if abs(skew - old) <= 5:
            return False
        LOG.warning("MAAS: setting the OAuth clock skew for %s to %d s", host, skew)
        return True

    def get(self, url: str, deadline: float | None = None) -> bytes | None:
        """The body; None on 404; MAASError otherwise. Until ``deadline``, transient failures are retried."""
        from cloudseed.core.http import FetchError, request

        resigned = False
        pause = 0.5
        while True:
            left = (deadline - time.monotonic()) if deadline is not None else self.timeout
            try:
                return request(url, headers=self.headers(url), timeout=max(0.1, min(self.timeout, left)),
                               max_bytes=MAX_FILE).body
            except FetchError as e:
                if e.status == 404:
                    return None
                if not resigned and self.learn_skew(e):
                    resigned = True
                    continue
                if e.status in (401, 403):
                    said = e.body.decode("utf-8", "replace").strip().splitlines()[:1]
                    raise MAASError(f"{url}: HTTP {e.status}: the MAAS server refused the OAuth credentials "
                                    f"(datasource.MAAS consumer_key/token_key/token_secret)"
                                    f"{': ' + said[0][:200] if said else ''}") from None
                if deadline is None or e.permanent or time.monotonic() + pause >= deadline:
                    raise MAASError(f"MAAS metadata {e}") from None
                time.sleep(pause)
                pause = min(pause * 2, 5)


def read_url(base: str, reader: OAuthReader, max_wait: float) -> dict[str, Any]:
    """The MAAS files under ``base``/2012-03-01/, waiting up to ``max_wait`` for the first answer."""
    base = base.rstrip("/")
    found: dict[str, bytes] = {}
    first = True
    for path, required in FILES:
        url = f"{base}/{MD_VERSION}/{path}"
        body = reader.get(url, time.monotonic() + max_wait if first else None)
        first = False
        if body is None:
            if required:
                raise MAASError(f"{url}: missing required {path} (HTTP 404)")
            continue
        found[path] = body
    return check_contents(found, f"{base}/{MD_VERSION}")


class MAAS(Datasource):
    name = "MAAS"
    stages = (NETWORK,)
    platform = "maas"
    detection = (
        Path(*SEED_DIRS, kind="nonempty", why="seed directory {value}"),
        Setting("metadata_url"),
        # the ephemeral environment: its cloud-config-url, with MAAS's iSCSI name
        AllOf(Cmdline(f"*{MAAS_IQN}*"), Cmdline("cloud-config-url=?*", tokens=True),
              why="kernel command line has MAAS's cloud-config-url"),
    )

    def fetch(self) -> bool:
        seed = _seed_dir(self.ctx)
        if seed:
            self._set(read_seed_dir(self.ctx.root.path(seed), seed), f"seed-dir ({seed})")
            return True
        section = dict(self.ctx.ds_cfg(self.name))
        if not section.get("metadata_url"):
            url = cmdline_url(self.ctx.cmdline)
            if url is None:
                return False
            section = self._from_cmdline(url)
        from cloudseed.agent.datasources._metadata_service import ServiceLimits

        limits = ServiceLimits.from_cfg(section)
        max_wait = limits.max_wait if section.get("max_wait") is not None else 120.0
        if max_wait <= 0:
            return False
        timeout = limits.timeout if section.get("timeout") is not None else 50.0
        url = str(section["metadata_url"])
        started = time.monotonic()
        reader = OAuthReader(section, timeout)
        data = read_url(url, reader, max_wait)
        self._set(data, f"seed-dir ({url})")
        if self.ctx.checks_signatures:  # signed user-data: the signatures beside user-data and vendor-data
            from cloudseed.agent.userdata_trust import read_signatures

            base = f"{url.rstrip('/')}/{MD_VERSION}"
            read_signatures(self, {"user-data": (f"{base}/{_file('user_data')}", {}),  # vendor-data: MAAS's YAML
                                   "vendor-data": (f"{base}/{_file('vendor_data')}", {}, data["vendordata_document"])},
                            lambda sig_url, _headers: reader.get(sig_url))
        LOG.info("MAAS: read %s from %s in %.2fs", self.instance_id, url, time.monotonic() - started)
        return True

    def _from_cmdline(self, url: str) -> dict[str, Any]:
        """The ``datasource: MAAS`` section of the cloud-config at ``url``; it all goes under the system config."""
        import yaml

        from cloudseed.core.http import FetchError, fetch
        from cloudseed.core.yaml_loading import load_yaml

        try:
            body = fetch(url, timeout=10, retries=3, max_bytes=MAX_FILE, max_wait=60)
        except FetchError as e:
            raise MAASError(f"kernel command line cloud-config-url: {e}") from None
        text = body.decode("utf-8", "replace")
        if not text.startswith("#cloud-config"):
            raise MAASError(f"{url}: does not start with '#cloud-config'")
        try:
            cfg = load_yaml(text)
        except yaml.YAMLError as e:
            raise MAASError(f"{url}: not YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(cfg, dict):
            raise MAASError(f"{url}: not a mapping")
        self.extra["cloud_config"] = cfg
        section = (cfg.get("datasource") or {}).get("MAAS") if isinstance(cfg.get("datasource"), dict) else None
        if not isinstance(section, dict) or not section.get("metadata_url"):
            raise MAASError(f"{url}: has no datasource.MAAS.metadata_url")
        return section

    def _set(self, data: dict[str, Any], subplatform: str) -> None:
        from cloudseed.agent.datasources._openstack_common import vendordata_bytes

        self.metadata = data["metadata"]
        self.userdata_raw = data["userdata"]
        self.vendordata_raw = vendordata_bytes(data["vendordata"], "MAAS vendor-data")
        keys = self.metadata.get(F["public_keys"]) or ""
        self.public_keys = [k.strip() for k in keys.splitlines() if k.strip()]
        self.raw = {"meta_data": self.metadata}
        self.subplatform = subplatform


DATASOURCE = MAAS
