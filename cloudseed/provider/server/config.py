"""Server settings: a YAML config file, overridden by command-line flags, checked up front.

Every key of the file is documented in docs/metadata-server.md; an unknown key or a bad value
is an error naming the key (and the file), before anything listens.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from typing import Any, Optional

from cloudseed.provider.registry import DEFAULT_DB


class ConfigError(ValueError):
    """A bad setting; the message names the key and where it came from."""


@dataclasses.dataclass
class ListenSpec:
    host: str
    port: int
    network: Optional[str] = None


@dataclasses.dataclass
class ServerConfig:
    db: str = DEFAULT_DB
    listen: list[ListenSpec] = dataclasses.field(default_factory=lambda: [ListenSpec("169.254.169.254", 80)])
    admin_listen: Optional[ListenSpec] = None
    # CloudStack's / Exoscale's password server (password_server.py; usually port 8080); none by default
    password_server_listen: list[ListenSpec] = dataclasses.field(default_factory=list)
    # OCI's federation endpoint emulation (oci_federation.py: POST /v1/x509); none by default
    oci_auth_listen: list[ListenSpec] = dataclasses.field(default_factory=list)
    # the same in TLS (oci_auth_tls.py: usually HOST:443, reached as auth.<region>.<realm domain>)
    oci_auth_tls_listen: list[ListenSpec] = dataclasses.field(default_factory=list)
    # metadata listeners behind a load balancer: each connection starts with a PROXY protocol header
    # (v1 or v2) naming the client, accepted only from ``proxy_protocol_from`` (proxy_protocol.py)
    proxy_protocol_listen: list[ListenSpec] = dataclasses.field(default_factory=list)
    proxy_protocol_from: list[Any] = dataclasses.field(default_factory=list)  # ip_network objects
    admin_token: Optional[str] = None
    proxies: list[Any] = dataclasses.field(default_factory=list)  # ip_network objects
    proxy_shared_secret: Optional[str] = None
    imds_tokens: str = "optional"  # "required": IMDSv1 refused for every instance
    token_hop_limit: int = 1
    rate_limit: float = 100.0  # requests per second per source; 0 disables
    rate_burst: int = 300
    access_log: str = "-"  # "-" stderr, "" off, else a file path
    region: str = ""
    max_admin_body: int = 1024 * 1024
    reuse_port: bool = False
    processes: int = 1  # server processes sharing the metadata ports (SO_REUSEPORT); admin in the first
    worker_restart_interval: float = 5.0  # seconds between restarts of a worker process that exited
    # bounds on what clients can make the server hold (connection.py, docs/metadata-server.md)
    max_connections: int = 0  # in all; 0: the open-file limit minus 256
    max_connections_per_source: int = 64  # per client address; trusted proxies exempt; 0: no cap
    max_pipelined: int = 32  # requests of one connection answered per turn of the loop
    max_unsent_bytes: int = 256 * 1024  # a connection is not read while more answer bytes are unsent
    max_buffered_bytes: int = 64 * 1024  # bytes read ahead while a connection's request waits
    head_timeout: float = 10.0  # seconds from a request's first byte until it must be whole
    idle_timeout: float = 60.0  # seconds a connection may do nothing
    access_log_max_bytes: int = 100 * 1024 * 1024  # the access log file is rotated past this size
    access_log_backups: int = 1  # rotated files kept (FILE.1 ...)
    # seconds a request waits for a registry read (a cache miss) before it is answered 503: a
    # database that stopped answering does not hold clients (a balancer retries elsewhere)
    registry_wait: float = 3.0
    # lifetime of GCE access tokens and Azure managed-identity tokens (a new one before each ends)
    access_token_seconds: int = 3600
    # the key of Azure's attested documents: "ecdsa" (P-256, its own) or "rsa" (EC2's identity key)
    azure_attested_key: str = "ecdsa"
    # new connections whose answer is cached are answered in C (fast_path.c, when built); false:
    # every connection through the Python path
    fast_path: bool = True


_KEYS = {f.name for f in dataclasses.fields(ServerConfig)} | {"admin_token_file", "proxy_shared_secret_file"}


def parse_listen(spec: str, where: str = "--listen") -> ListenSpec:
    """``HOST:PORT``, ``[V6]:PORT``, optionally ``=NETWORK`` (the network its clients are on)."""
    address, _, network = spec.partition("=")
    if address.startswith("["):
        host, sep, port = address[1:].partition("]:")
    else:
        host, sep, port = address.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit() and len(port) <= 5) or int(port) > 65535:
        raise ConfigError(f"{where}: {spec!r} is not HOST:PORT[=NETWORK]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError(f"{where}: {host!r} is not an IP address")
    return ListenSpec(host, int(port), network or None)


def load_config(path: Optional[str], overrides: dict[str, Any]) -> ServerConfig:
    """Settings from the YAML file at ``path`` (if any) with ``overrides`` (flags) on top."""
    raw: dict[str, Any] = {}
    if path:
        import yaml

        from cloudseed.core.yaml_loading import load_yaml

        try:
            with open(path, encoding="utf-8") as handle:
                raw = load_yaml(handle.read()) or {}
        except OSError as error:
            raise ConfigError(f"{path}: cannot read: {error.strerror}")
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: invalid YAML: {error}")
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: must be a mapping of settings")
    where = path or "flags"
    for key in raw:
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(_KEYS))})")
    raw.update({k: v for k, v in overrides.items() if v is not None})
    config = ServerConfig()
    for key, value in raw.items():
        setter = _SETTERS.get(key)
        try:
            if setter:
                setter(config, value)
            else:
                setattr(config, key, _typed(key, value, type(getattr(config, key))))
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}")
    if not config.listen and not config.proxy_protocol_listen:
        raise ConfigError(f"{where}: listen is empty and there is no proxy_protocol_listen: nothing to serve")
    if config.proxy_protocol_listen and not config.proxy_protocol_from:
        raise ConfigError(f"{where}: proxy_protocol_listen needs proxy_protocol_from (the load balancers' "
                          "addresses: only they may send PROXY headers)")
    if config.proxies and not config.proxy_shared_secret:
        raise ConfigError(f"{where}: proxies need proxy_shared_secret (the HMAC key the proxy signs with)")
    if config.imds_tokens not in ("optional", "required"):
        raise ConfigError(f"{where}: imds_tokens must be 'optional' or 'required'")
    if not 1 <= config.token_hop_limit <= 64:
        raise ConfigError(f"{where}: token_hop_limit must be 1-64")
    if not 1 <= config.processes <= 256:
        raise ConfigError(f"{where}: processes must be 1-256")
    for key in ("registry_wait", "max_pipelined", "max_unsent_bytes", "max_buffered_bytes", "head_timeout",
                "idle_timeout", "access_log_max_bytes"):
        if not getattr(config, key) > 0:
            raise ConfigError(f"{where}: {key} must be greater than 0")
    if not 10 <= config.access_token_seconds <= 86400:
        raise ConfigError(f"{where}: access_token_seconds must be 10-86400")
    if config.azure_attested_key not in ("ecdsa", "rsa"):
        raise ConfigError(f"{where}: azure_attested_key must be 'ecdsa' or 'rsa'")
    if config.access_log_backups > 100:
        raise ConfigError(f"{where}: access_log_backups must be 0-100")
    return config


def _typed(key: str, value: Any, kind: type) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false")
        return value
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{key} must be a non-negative number")
        return kind(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string")
    return value


def _set_listen(config: ServerConfig, value: Any) -> None:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list):  # empty: only PROXY protocol listeners (checked in load_config)
        raise ConfigError("listen must be a list of HOST:PORT[=NETWORK]")
    config.listen = [v if isinstance(v, ListenSpec) else parse_listen(str(v), "listen") for v in values]


def _set_listen_list(attribute: str) -> Any:
    """The setter of a list of extra listeners (``password_server_listen``, ``oci_auth_listen``,
    ``oci_auth_tls_listen``, ``proxy_protocol_listen``)."""
    def setter(config: ServerConfig, value: Any) -> None:
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list):
            raise ConfigError(f"{attribute} must be a list of HOST:PORT[=NETWORK]")
        setattr(config, attribute, [v if isinstance(v, ListenSpec) else parse_listen(str(v), attribute)
                                    for v in values])
    return setter


def _set_admin_listen(config: ServerConfig, value: Any) -> None:
    config.admin_listen = value if isinstance(value, ListenSpec) else parse_listen(str(value), "admin_listen")


def _set_networks(attribute: str) -> Any:
    """The setter of a list of addresses or CIDRs (``proxies``, ``proxy_protocol_from``)."""
    def setter(config: ServerConfig, value: Any) -> None:
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list):
            raise ConfigError(f"{attribute} must be a list of addresses or CIDRs")
        try:
            setattr(config, attribute, [ipaddress.ip_network(str(v), strict=False) for v in values])
        except ValueError as error:
            raise ConfigError(f"{attribute}: {error}")
    return setter


def _secret_from_file(attribute: str) -> Any:
    def setter(config: ServerConfig, value: Any) -> None:
        try:
            with open(str(value), encoding="utf-8") as handle:
                setattr(config, attribute, handle.read().strip())
        except OSError as error:
            raise ConfigError(f"{attribute}_file: cannot read {value}: {error.strerror}")
        if not getattr(config, attribute):
            raise ConfigError(f"{attribute}_file: {value} is empty")
    return setter


def _set_secret(attribute: str) -> Any:
    def setter(config: ServerConfig, value: Any) -> None:
        if not isinstance(value, str) or len(value) < 16:
            raise ConfigError(f"{attribute} must be a string of at least 16 characters")
        setattr(config, attribute, value)
    return setter


_SETTERS = {
    "listen": _set_listen, "admin_listen": _set_admin_listen,
    "password_server_listen": _set_listen_list("password_server_listen"),
    "oci_auth_listen": _set_listen_list("oci_auth_listen"),
    "oci_auth_tls_listen": _set_listen_list("oci_auth_tls_listen"),
    "proxy_protocol_listen": _set_listen_list("proxy_protocol_listen"),
    "proxies": _set_networks("proxies"), "proxy_protocol_from": _set_networks("proxy_protocol_from"),
    "admin_token": _set_secret("admin_token"), "proxy_shared_secret": _set_secret("proxy_shared_secret"),
    "admin_token_file": _secret_from_file("admin_token"),
    "proxy_shared_secret_file": _secret_from_file("proxy_shared_secret"),
}


def admin_token_from_environment() -> Optional[str]:
    return os.environ.get("CLOUDSEED_ADMIN_TOKEN") or None
