"""CloudSigma: the server context over the serial port ``/dev/ttyS1`` ("cepko").

Possible where DMI ``product_name`` contains ``CloudSigma`` (any case), as in cloud-init 22.4's
DataSourceCloudSigma and its helpers/cloudsigma.py, which this follows: one request ``<\\n\\n>`` (the
whole context) answered by one line of JSON ended by EOT (``\\x04``) or a newline. The context is
the metadata; ``uuid`` the instance id; ``name`` the hostname (at most 61 characters; the first part
of the uuid when the name has other characters); ``meta.ssh_public_key`` the key;
``meta.cloudinit-user-data`` the user-data (base64-decoded when ``meta.base64_fields`` names it);
``vendor_data.cloudinit`` the vendor-data. ``serial_device`` names the port (a path on the running
system), ``timeout`` bounds the answer (default 5 s; cloud-init waits 60). Unlike cloud-init 22.4,
``meta.cloudinit-dsmode: disabled`` is honoured (22.4 computes it and ignores it), a missing
``ssh_public_key`` means no key (22.4 fails), and pending input is drained before asking.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi
from cloudseed.clouds.cloudsigma import CLOUD

LOG = logging.getLogger("cloudseed.datasources.cloudsigma")

SERIAL_DEVICE = CLOUD.names["serial"]  # the wire contract: clouds/cloudsigma.py
ASK, END = CLOUD.names["ask"], CLOUD.names["end"].encode("ascii")
F = CLOUD.fields
DEFAULT_TIMEOUT = 5.0
HOSTNAME_OK = re.compile(r"^[A-Za-z0-9 -_\.]+$")  # cloud-init's test (" -_" is the range 0x20-0x5f)


class CepkoError(Exception):
    """The serial port gave no usable server context; the message names the port and why."""


def read_context(path: str, timeout: float, key: str = "") -> Any:
    """The server context (or one part of it, ``key`` like ``/meta/``) from the port at ``path``."""
    import json

    from cloudseed.agent.datasources._serial_port import SerialError, SerialPort

    deadline = time.monotonic() + timeout
    try:
        with SerialPort.open(path, timeout) as port:
            port.discard_input(0.05, min(deadline, time.monotonic() + 0.5))
            port.write(ASK.replace("{key}", key).encode("ascii"), deadline)
            while True:
                line = port.read_until(END, deadline).strip(b"\r\n\x04 ")
                if line:
                    break
    except SerialError as e:
        raise CepkoError(f"CloudSigma server context: {e}") from None
    try:
        return json.loads(line)
    except ValueError as e:
        raise CepkoError(f"CloudSigma server context from {path} is not JSON ({e}): {line[:80]!r}") from None


class CloudSigma(Datasource):
    name = "CloudSigma"
    stages = (LOCAL,)
    platform = "cloudsigma"
    sensitive_keys = (F["meta"], F["vendor_data"])
    detection = (
        Dmi("product_name", "*cloudsigma*", nocase=True),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "cloudsigma"

    def fetch(self) -> bool:
        import base64

        section = self.ctx.ds_cfg(self.name)
        try:
            timeout = max(0.1, float(section.get("timeout", DEFAULT_TIMEOUT)))
        except (TypeError, ValueError):
            LOG.warning("datasource.CloudSigma timeout must be a number; using %s", DEFAULT_TIMEOUT)
            timeout = DEFAULT_TIMEOUT
        path = str(section.get("serial_device") or self.ctx.root.path(SERIAL_DEVICE))
        context = read_context(path, timeout)
        meta = context.get(F["meta"]) if isinstance(context, dict) else None
        if not isinstance(meta, dict):
            raise CepkoError(f"CloudSigma server context from {path} has no '{F['meta']}' object")
        if not context.get(F["instance_id"]):
            raise CepkoError(f"CloudSigma server context from {path} has no '{F['instance_id']}'")
        if str(meta.get(F["dsmode"]) or "").lower() == "disabled":
            LOG.info("CloudSigma: meta %s is 'disabled'", F["dsmode"])
            return False
        userdata = meta.get(F["user_data"]) or ""
        if F["user_data"] in str(meta.get(F["base64_fields"]) or "").split(","):
            try:
                self.userdata_raw = base64.b64decode(userdata)
            except ValueError:
                raise CepkoError(f"CloudSigma meta {F['user_data']} is listed in {F['base64_fields']} "
                                 "but is not base64") from None
        else:
            self.userdata_raw = str(userdata).encode("utf-8")
        self.userdata_raw = self.userdata_raw or None
        vendor = context.get(F["vendor_data"])
        if isinstance(vendor, dict) and vendor.get(F["vendor_cloudinit"]):
            cloudinit = vendor[F["vendor_cloudinit"]]
            self.vendordata_raw = cloudinit.encode("utf-8") if isinstance(cloudinit, str) else None
        uuid = str(context[F["instance_id"]])
        name = str(context.get(F["name"]) or "")
        hostname = name[:61] if HOSTNAME_OK.match(name) else uuid.split("-")[0]
        self.metadata = {**context, "instance-id": uuid, "local-hostname": hostname}
        key = str(meta.get(F["ssh_public_key"]) or "").strip()
        self.public_keys = [key] if key else []
        self.raw = {"meta_data": self.metadata}
        self.subplatform = f"cepko ({path})"
        return True


DATASOURCE = CloudSigma
