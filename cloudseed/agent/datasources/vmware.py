"""VMware: the guestinfo keys ``guestinfo.metadata``, ``guestinfo.userdata``, ``guestinfo.vendordata``.

Read through the target's ``vmware-rpctool "info-get guestinfo.X"`` or ``vmtoolsd --cmd "info-get
guestinfo.X"`` (whichever it has; each call bounded in time), or, in a container, from the
``VMX_GUESTINFO_METADATA``/``_USERDATA``/``_VENDORDATA`` environment variables (with
``VMX_GUESTINFO`` set), as cloud-init does. Possible only where DMI says VMware and one of the
tools is installed, or that environment is set. Each key may carry ``<key>.encoding``: ``base64``
(``b64``) or ``gzip+base64`` (``gz+b64``). Metadata is JSON or YAML: ``instance-id`` (else the DMI
product UUID), ``local-hostname``, ``public-keys``, ``network`` (v1 or v2, possibly encoded with
``network.encoding``). The keys named by ``redact`` (or the older ``cleanup-guestinfo``) are cleared
after reading (set to ``---``, their encoding to a blank) so later readers in the guest do not see
secrets. Not done: waiting for the network and advertising the local IPs back into guestinfo.
"""

from __future__ import annotations

import logging
import os

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, AnyOf, Dmi, Hatch, on_path
from cloudseed.clouds.vmware import CLOUD

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.vmware")

TOOLS = CLOUD.addresses  # the wire contract: clouds/vmware.py
KEYS = tuple(CLOUD.requests[role].path for role in ("meta_data", "user_data", "vendor_data"))
METADATA = KEYS[0]
NO_VALUE, EMPTY = CLOUD.names["no_value"], CLOUD.names["cleared"]
PREFIX, ENCODING = CLOUD.names["key_prefix"], CLOUD.names["encoding_suffix"]
TOOL_TIMEOUT = 10.0
MAX_DECODED = 16 * 1024 * 1024


class GuestinfoError(Exception):
    """A guestinfo value could not be used; the message names the key."""


def envvar_name(key: str) -> str:
    """``metadata`` -> ``VMX_GUESTINFO_METADATA`` (cloud-init's naming)."""
    return (CLOUD.names["env_prefix"] + key).upper().replace(".", "_")


def _blank(value: str | None) -> bool:
    return value is None or value.rstrip() in ("", EMPTY)


def decode(key: str, encoding: str | None, value: str) -> bytes:
    """``value`` of ``key`` decoded per its ``.encoding``; GuestinfoError naming the key otherwise."""
    import base64
    import binascii

    enc = (encoding or "").strip().lower()
    if enc in ("", "plain"):
        return value.encode("utf-8")
    if enc not in ("base64", "b64", "gzip+base64", "gz+b64"):
        raise GuestinfoError(f"guestinfo.{key}: unknown encoding {encoding!r} (base64, b64, gzip+base64, gz+b64)")
    try:
        data = base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise GuestinfoError(f"guestinfo.{key}: not valid base64 ({e})") from None
    if enc in ("gzip+base64", "gz+b64"):
        import zlib

        inflater = zlib.decompressobj(wbits=31)
        try:
            out = inflater.decompress(data, MAX_DECODED + 1)
        except zlib.error as e:
            raise GuestinfoError(f"guestinfo.{key}: not valid gzip ({e})") from None
        if len(out) > MAX_DECODED or inflater.unconsumed_tail:
            raise GuestinfoError(f"guestinfo.{key}: decompresses to more than {MAX_DECODED} bytes")
        return out
    return data


def load_json_or_yaml(text: str, where: str) -> Any:
    import json

    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    from cloudseed.core.yaml_loading import load_yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        raise GuestinfoError(f"{where}: neither JSON nor valid YAML ({str(e).splitlines()[0]})") from None


def process_metadata(md: dict[str, Any]) -> dict[str, Any]:
    """``network`` (a mapping, or a string in ``network.encoding``) as ``{"config": ...}``."""
    md = dict(md)
    network = md.pop("network", None)
    encoding = md.pop("network.encoding", None)
    if network:
        if isinstance(network, dict):
            md["network"] = {"config": network}
        else:
            text = decode("metadata.network", encoding, str(network)).decode("utf-8", errors="replace")
            md["network"] = {"config": load_json_or_yaml(text, "guestinfo.metadata network")}
    return md


def public_keys(md: dict[str, Any]) -> list[str]:
    for name in ("public-keys-data", "public_keys_data", "public-keys", "public_keys"):
        if name in md:
            value = md[name]
            if isinstance(value, str):
                return [line for line in value.splitlines() if line.strip()]
            if isinstance(value, (list, tuple)):
                return [str(v) for v in value]
            if isinstance(value, dict):
                keys: list[str] = []
                for v in value.values():
                    keys.extend([v] if isinstance(v, str) else [str(x) for x in v] if isinstance(v, list) else [])
                return keys
            return []
    return []


class Guestinfo:
    """``info-get``/``info-set`` through the target's tool (``vmware-rpctool`` or ``vmtoolsd``)."""

    def __init__(self, ctx: DatasourceContext, tool: str, timeout: float = TOOL_TIMEOUT):
        self.ctx, self.tool, self.timeout = ctx, tool, timeout

    def _argv(self, command: str) -> list[str]:
        if self.tool.endswith(TOOLS[1]):  # vmtoolsd takes the command after --cmd
            return [self.tool, "--cmd", command]
        return [self.tool, command]

    def get(self, key: str) -> str | None:
        from cloudseed.core.root import CommandError

        try:
            proc = self.ctx.root.run(self._argv(f"{CLOUD.names['get']} {PREFIX}{key}"), check=False,
                                     timeout=self.timeout)
        except CommandError as e:
            raise GuestinfoError(f"guestinfo.{key}: {self.tool}: {e.stderr or e}") from None
        if proc.returncode != 0:
            if proc.stderr.strip() != NO_VALUE:
                LOG.warning("guestinfo.%s: %s exited %s: %s", key, self.tool, proc.returncode,
                            proc.stderr.strip()[:200])
            return None
        value = proc.stdout.rstrip()
        return None if _blank(value) else value

    def set(self, key: str, value: str) -> bool:
        from cloudseed.core.root import CommandError

        try:
            proc = self.ctx.root.run(self._argv(f"{CLOUD.names['set']} {PREFIX}{key} {value or ' '}"), check=False,
                                     timeout=self.timeout)
        except CommandError as e:
            LOG.error("cannot set guestinfo.%s: %s", key, e.stderr or e)
            return False
        if proc.returncode != 0:
            LOG.error("cannot set guestinfo.%s: %s exited %s: %s", key, self.tool, proc.returncode,
                      proc.stderr.strip()[:200])
        return proc.returncode == 0


def _environment_key(ctx: DatasourceContext) -> str | None:
    """The first VMX_GUESTINFO_* variable with a value, where VMX_GUESTINFO is set (a container)."""
    keys = VMware._env_keys()
    return envvar_name(keys[0]) if keys else None


# the same in the shell: a value is blank when empty or '---' once trailing blanks are cut
GUESTINFO_ENVIRONMENT = Hatch(
    "vmx_guestinfo_environment", python=_environment_key,
    shell='value=; [ -n "${VMX_GUESTINFO:-}" ] && for _n in '
          + " ".join(envvar_name(k) for k in KEYS)
          + '; do eval "_v=\\${$_n:-}"; _v=${_v%"${_v##*[![:space:]]}"}; '
          f'case $_v in ""|"{EMPTY}") ;; *) value=$_n; break ;; esac; done && [ -n "$value" ]',
    why="VMX_GUESTINFO is set with {value}")


class VMware(Datasource):
    name = "VMware"
    stages = (LOCAL, NETWORK)
    platform = "vmware"
    # VMX_GUESTINFO variables (a container), or DMI VMware and a guestinfo tool installed
    detection = (
        GUESTINFO_ENVIRONMENT,
        AllOf(AnyOf(Dmi("product_name", "*vmware*", nocase=True), Dmi("sys_vendor", "*vmware*", nocase=True)),
              AnyOf(*(on_path(tool) for tool in TOOLS)),
              why="DMI says VMware and {value} is installed"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "vmware"
        self.cleared: list[str] = []

    @classmethod
    def _env_keys(cls) -> list[str]:
        if not os.environ.get(CLOUD.names["env_switch"]):
            return []
        return [k for k in KEYS if not _blank(os.environ.get(envvar_name(k)))]

    @classmethod
    def _tool(cls, ctx: DatasourceContext) -> str | None:
        for tool in TOOLS:
            found = ctx.root.which(tool)
            if found:
                return found
        return None

    def fetch(self) -> bool:
        values: dict[str, bytes | None] = {}
        if self._env_keys():
            method, where = "envvar", envvar_name(METADATA)
            for key in KEYS:
                raw = os.environ.get(envvar_name(key))
                enc = os.environ.get(envvar_name(key + ENCODING))
                values[key] = None if _blank(raw) else decode(key, None if _blank(enc) else enc, raw.rstrip())
            info = None
        else:
            tool = self._tool(self.ctx)
            if tool is None:
                return False
            try:
                timeout = float(self.ctx.ds_cfg("VMware").get("timeout", TOOL_TIMEOUT))
            except (TypeError, ValueError):
                timeout = TOOL_TIMEOUT
            info = Guestinfo(self.ctx, tool, timeout)
            method, where = "guestinfo", PREFIX + METADATA
            for key in KEYS:
                raw = info.get(key)
                values[key] = None if raw is None else decode(key, info.get(key + ENCODING), raw)
        if not any(values.values()):
            LOG.info("VMware: none of %s is set", ", ".join(PREFIX + k for k in KEYS))
            return False
        text = (values[METADATA] or b"").decode("utf-8", errors="replace")
        md = load_json_or_yaml(text, where)
        if not isinstance(md, dict):
            raise GuestinfoError(f"{where}: expected a mapping, got {type(md).__name__}")
        md = process_metadata(md)
        if "instance-id" not in md:
            uuid = self.ctx.dmi("product_uuid").lower()
            if uuid:
                md["instance-id"] = uuid
        self.metadata = md
        self.userdata_raw, self.vendordata_raw = values[KEYS[1]], values[KEYS[2]]
        network = md.get("network")
        if isinstance(network, dict) and isinstance(network.get("config"), dict):
            config = network["config"]
            self.network_config = config.get("network", config) if isinstance(config.get("network"), dict) \
                else config
        self.public_keys = public_keys(md)
        self.subplatform = f"{method} ({where})"
        self.raw = {"meta_data": md}
        if info is not None:
            self._clear(info, md.get("redact", md.get("cleanup-guestinfo")))
        return True

    def _clear(self, info: Guestinfo, keys: Any) -> None:
        """Clear the keys the metadata asks to be cleared (``redact``/``cleanup-guestinfo``)."""
        if not keys:
            return
        for key in keys if isinstance(keys, (list, tuple)) else [keys]:
            key = str(key)
            LOG.info("clearing guestinfo.%s", key)
            if info.set(key, EMPTY):
                self.cleared.append(key)
            info.set(key + ENCODING, "")


DATASOURCE = VMware
