"""Joyent's (SmartOS, Triton) metadata protocol as its guest reads it: version 2 over the serial port
``/dev/ttyS1`` (a KVM guest) or the zone's Unix socket (an LX-brand zone). The guest negotiates
(``NEGOTIATE V2``, answered ``V2_OK``), then asks ``V2 <length> <crc32> <id> GET <base64 key>``
frames, each answered ``SUCCESS`` with the base64 value, or ``NOTFOUND``. No server of ours answers
it yet.

Read by ``agent/datasources/smartos.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

SERIAL = "/dev/ttyS1"
SOCKET = "/native/.zonecontrol/metadata.sock"

# the metadata keys the guest asks for, by role
FIELDS = {"instance_id": "sdc:uuid", "local_hostname": "hostname", "public_keys": "root_authorized_keys",
          "user_script": "user-script", "legacy_user_data": "user-data", "user_data": "cloud-init:user-data",
          "iptables_disable": "iptables_disable", "motd_sys_info": "motd_sys_info",
          "datacenter": "sdc:datacenter_name", "vendor_data": "sdc:vendor-data",
          "operator_script": "sdc:operator-script", "hostname": "sdc:hostname", "dns_domain": "sdc:dns_domain",
          "nics": "sdc:nics", "resolvers": "sdc:resolvers", "routes": "sdc:routes",
          "base64_all": "base64_all", "base64_keys": "base64_keys", "base64_marker": "b64-"}

CLOUD = Cloud(
    "smartos", datasource="SmartOS", served=False,
    addresses=(SERIAL, SOCKET),  # a serial port or a Unix socket, not HTTP
    versions=("V2",),
    names={"serial": SERIAL, "socket": SOCKET, "negotiate": "NEGOTIATE V2", "negotiated": "V2_OK",
           "flushed": "invalid command"},
    fields=FIELDS,
    requests={
        "get": Request("GET"),  # a frame's request type, the key as its parameter
        "keys": Request("KEYS"),  # every key, one a line
    },
)
