"""VMware's guestinfo as its guest reads it: the keys ``guestinfo.metadata``, ``guestinfo.userdata``
and ``guestinfo.vendordata`` (each with a ``.encoding``: plain, base64/b64, gzip+base64/gz+b64), asked
through ``vmware-rpctool "info-get guestinfo.KEY"`` or ``vmtoolsd --cmd ...``; in a container the
same as environment variables (``VMX_GUESTINFO=1``, ``VMX_GUESTINFO_METADATA``...). An unset key
answers ``No value found``; a cleared one is ``---``. No server of ours answers it yet.

Read by ``agent/datasources/vmware.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "vmware", datasource="VMware", served=False,
    addresses=("vmware-rpctool", "vmtoolsd"),  # the tools that reach the host's guestinfo, in order
    names={"key_prefix": "guestinfo.", "env_prefix": "vmx.guestinfo.", "env_switch": "VMX_GUESTINFO",
           "get": "info-get", "set": "info-set", "encoding_suffix": ".encoding", "no_value": "No value found",
           "cleared": "---"},
    requests={
        "meta_data": Request("metadata", form="yaml"),  # JSON or YAML
        "user_data": Request("userdata"),
        "vendor_data": Request("vendordata"),
    },
)
