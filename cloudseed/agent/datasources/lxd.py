"""LXD and Incus: the devlxd API on the Unix socket ``/dev/lxd/sock`` (in the target root).

Possible where that socket exists (LXD's ``security.devlxd``, on by default), or where DMI
``board_name`` is ``LXD`` (a VM: the socket comes once lxd-agent runs; the network stage waits
``socket_wait`` seconds for it, default 10, the local stage does not wait). HTTP/1.0 over
the socket, standard library only, every request bounded in time and size:
``/1.0/meta-data`` (YAML: ``instance-id``, ``local-hostname``), ``/1.0/config`` (the listing of
the instance's ``cloud-init.*`` and ``user.*`` keys, each then read), ``/1.0/devices``. User-data,
vendor-data and network config come from ``cloud-init.user-data``, ``cloud-init.vendor-data``,
``cloud-init.network-config``; the older ``user.*`` keys are the fallback, as in cloud-init.
Without a network config the agent's own fallback (DHCP on the likely NIC) applies.
Instance data ``ds`` holds what was crawled as cloud-init keeps it (``_metadata_api_version``,
``config``, ``devices``, ``meta-data``, ``network-config``), except the keys that carry user or
vendor data, which go to the private ``ds/extra/config``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import time

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Path
from cloudseed.clouds.lxd import CLOUD

LOG = logging.getLogger("cloudseed.datasources.lxd")

SOCKET_PATH = CLOUD.names["socket"]  # the wire contract: clouds/lxd.py
API_VERSION = CLOUD.versions[0]
F = CLOUD.fields
MAX_REPLY = 16 * 1024 * 1024
MAX_CONFIG_KEYS = 1000
DEFAULT_TIMEOUT = 5.0  # one request
DEFAULT_MAX_WAIT = 15.0  # the whole crawl
DEFAULT_SOCKET_WAIT = 10.0  # an LXD VM, network stage: for lxd-agent to create the socket
ALIASES = {F[role]: role.replace("_old", "").replace("_", "-")  # config key -> what cloud-init keys it as
           for role in ("user_data", "network_config", "vendor_data", "user_data_old", "network_config_old",
                        "vendor_data_old")}
PRIVATE_CONFIG_KEYS = tuple(F[role] for role in ("user_data", "vendor_data", "user_data_old", "vendor_data_old",
                                                 "meta_data_old"))


class DevLXDError(Exception):
    """The devlxd socket gave no usable answer; the message names the route and why."""


def _connect(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        if len(path.encode()) < 100:
            sock.connect(path)
        else:  # a deep target root: reach the socket through its directory's descriptor
            fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                sock.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
            finally:
                os.close(fd)
    except BaseException:
        sock.close()
        raise
    return sock


def request(path: str, route: str, timeout: float = DEFAULT_TIMEOUT,
            max_bytes: int = MAX_REPLY) -> tuple[int, bytes]:
    """``GET route`` on the devlxd socket at ``path``: ``(status, body)`` within ``timeout`` seconds
    in total (connect, request, whole reply) and ``max_bytes``; DevLXDError otherwise."""
    deadline = time.monotonic() + timeout
    what = f"devlxd {route}"
    try:
        sock = _connect(path, timeout)
    except OSError as e:
        raise DevLXDError(f"{what}: cannot connect to {path}: {e}") from None
    chunks: list[bytes] = []
    total = 0
    try:
        sock.sendall(f"GET {route} HTTP/1.0\r\nHost: lxd\r\nUser-Agent: cloudseed\r\n\r\n".encode())
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevLXDError(f"{what}: no complete answer within {timeout:g}s ({total} bytes received)")
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise DevLXDError(f"{what}: no complete answer within {timeout:g}s ({total} bytes received)") \
                    from None
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes + 65536:
                raise DevLXDError(f"{what}: reply larger than {max_bytes} bytes")
            chunks.append(chunk)
    except OSError as e:
        raise DevLXDError(f"{what}: {e}") from None
    finally:
        sock.close()
    return _parse_reply(b"".join(chunks), what, max_bytes)


def _parse_reply(reply: bytes, what: str, max_bytes: int) -> tuple[int, bytes]:
    head, sep, body = reply.partition(b"\r\n\r\n")
    if not sep:
        raise DevLXDError(f"{what}: the socket closed before the reply headers ended ({len(reply)} bytes)")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise DevLXDError(f"{what}: not an HTTP reply: {lines[0][:80]!r}")
    status = int(parts[1])
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise DevLXDError(f"{what}: bad Content-Length {value.strip()!r}") from None
            if length > max_bytes:
                raise DevLXDError(f"{what}: reply of {length} bytes is larger than {max_bytes}")
            if len(body) < length:
                raise DevLXDError(f"{what}: the socket closed mid-reply ({len(body)} of {length} bytes)")
            body = body[:length]
    if len(body) > max_bytes:
        raise DevLXDError(f"{what}: reply larger than {max_bytes} bytes")
    return status, body


class LXD(Datasource):
    name = "LXD"
    stages = (LOCAL, NETWORK)
    platform = "lxd"
    sensitive_keys = tuple(F[role] for role in ("meta_data_old", "vendor_data_old", "user_data_old"))
    detection = (
        Path(SOCKET_PATH, kind="socket", why="socket {value}"),  # an lstat: nothing is connected to
        Dmi("board_name", "LXD", why="DMI board_name is 'LXD' (a VM: the socket comes with lxd-agent)"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "lxd"

    @classmethod
    def _has_socket(cls, ctx: DatasourceContext) -> bool:
        try:
            return stat.S_ISSOCK(os.lstat(ctx.root.path_nofollow(SOCKET_PATH)).st_mode)
        except OSError:
            return False

    def fetch(self) -> bool:
        cfg = self.ctx.ds_cfg("LXD")
        try:
            timeout = float(cfg.get("timeout", DEFAULT_TIMEOUT))
            max_wait = float(cfg.get("max_wait", DEFAULT_MAX_WAIT))
            socket_wait = float(cfg.get("socket_wait", DEFAULT_SOCKET_WAIT))
        except (TypeError, ValueError):
            LOG.warning("datasource.LXD timeout/max_wait/socket_wait must be numbers; using the defaults")
            timeout, max_wait, socket_wait = DEFAULT_TIMEOUT, DEFAULT_MAX_WAIT, DEFAULT_SOCKET_WAIT
        if not self._has_socket(self.ctx):
            if self.ctx.stage == LOCAL:
                LOG.info("LXD VM without %s yet; left to the network stage", SOCKET_PATH)
                return False
            deadline = time.monotonic() + socket_wait
            while not self._has_socket(self.ctx):
                if time.monotonic() >= deadline:
                    LOG.warning("LXD VM: %s did not appear within %gs (is lxd-agent running?)",
                                SOCKET_PATH, socket_wait)
                    return False
                time.sleep(0.1)
        path = self.ctx.root.path_nofollow(SOCKET_PATH)
        crawled = crawl(path, timeout, max_wait)
        from cloudseed.agent.config import ConfigFileError, load_yaml_mapping

        try:
            where = f"devlxd {CLOUD.requests['meta_data'].target(API_VERSION)}"
            self.metadata = load_yaml_mapping(crawled["meta-data"], where)
        except ConfigFileError as e:
            raise DevLXDError(str(e)) from None
        if "network-config" in crawled:
            try:
                network = load_yaml_mapping(crawled["network-config"], "devlxd network-config")
            except ConfigFileError as e:
                LOG.error("%s; the fallback network config is used", e)
                network = {}
            if network:
                self.network_config = network.get("network", network) if isinstance(
                    network.get("network"), dict) else network
        if "user-data" in crawled:
            self.userdata_raw = crawled["user-data"].encode("utf-8")
        if "vendor-data" in crawled:
            self.vendordata_raw = crawled["vendor-data"].encode("utf-8")
        self.subplatform = f"LXD socket API v. {API_VERSION} ({SOCKET_PATH})"
        config = crawled.get("config", {})
        raw = {k: v for k, v in crawled.items() if k not in ("user-data", "vendor-data", "config")}
        raw["config"] = {k: v for k, v in config.items() if k not in PRIVATE_CONFIG_KEYS}
        raw["meta_data"] = self.metadata
        self.raw = raw
        private = {k: v for k, v in config.items() if k in PRIVATE_CONFIG_KEYS}
        if private:
            self.extra["config"] = private
        return True


def crawl(path: str, timeout: float = DEFAULT_TIMEOUT, max_wait: float = DEFAULT_MAX_WAIT) -> dict:
    """Everything the devlxd socket at ``path`` offers, keyed as cloud-init keys it.

    ``meta-data`` must answer; a config key that does not is skipped with a log line.
    """
    deadline = time.monotonic() + max_wait

    def get(route: str) -> tuple[int, bytes]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DevLXDError(f"devlxd: out of time (max_wait {max_wait:g}s) before {route}")
        return request(path, route, min(timeout, left))

    def text(body: bytes) -> str:
        return body.decode("utf-8", errors="replace")

    meta_data, config_list, devices = (CLOUD.requests[r].target(API_VERSION) for r in ("meta_data", "config",
                                                                                        "devices"))
    md: dict = {"_metadata_api_version": API_VERSION}
    status, body = get(meta_data)
    if status != 200:
        raise DevLXDError(f"devlxd {meta_data}: HTTP {status}: {text(body)[:200]}")
    md["meta-data"] = text(body)
    status, body = get(config_list)
    if status != 200:
        raise DevLXDError(f"devlxd {config_list}: HTTP {status}: {text(body)[:200]}")
    try:
        routes = json.loads(body)
    except ValueError:
        raise DevLXDError(f"devlxd {config_list}: expected a JSON list, got {text(body)[:200]!r}") from None
    if not isinstance(routes, list) or not all(isinstance(r, str) for r in routes):
        raise DevLXDError(f"devlxd {config_list}: expected a JSON list of routes")
    if len(routes) > MAX_CONFIG_KEYS:
        raise DevLXDError(f"devlxd {config_list}: more than {MAX_CONFIG_KEYS} keys")
    config: dict = {}
    prefix = CLOUD.names["config_prefix"].replace("{version}", API_VERSION)
    # sorted: cloud-init.* comes before user.*, so the newer keys win
    for route in sorted(routes):
        if not route.startswith(prefix) or any(c in route for c in " \r\n\0"):
            LOG.warning("devlxd %s lists %r, not a config route; skipped", config_list, route)
            continue
        key = route.rpartition("/")[2]
        status, body = get(route)
        if status != 200:
            LOG.debug("devlxd %s: HTTP %s; skipped", route, status)
            continue
        config[key] = text(body)
        alias = ALIASES.get(key)
        if alias is None:
            continue
        if alias in md:
            LOG.warning("LXD config %s ignored in favour of %s", key, key.replace("user", "cloud-init", 1))
        else:
            md[alias] = config[key]
    md["config"] = config
    try:
        status, body = get(devices)
        if status == 200:
            answer = json.loads(body)
            if isinstance(answer, dict):
                md["devices"] = answer
    except (DevLXDError, ValueError) as e:  # older LXD has no devices route
        LOG.debug("devlxd %s: %s", devices, e)
    return md


DATASOURCE = LXD
