"""OpenNebula's contextualization as its guest reads it: ``context.sh`` (shell variable assignments,
read, never run) on a filesystem labelled ``CONTEXT`` (or ``CDROM``) or in a seed directory. The
variables are the fields; a NIC's are ``ETH<n>_<NAME>`` (its MAC, IP, mask, gateways...). No seed
builder of ours writes it yet.

Read by ``agent/datasources/opennebula.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the variables the guest reads, by role; the second of a pair is an older spelling. ``nic_*`` are
# suffixes of ETH<n>_ (lower case here, upper case in the file)
FIELDS = {"ssh_key": "SSH_KEY", "ssh_public_key": "SSH_PUBLIC_KEY", "set_hostname": "SET_HOSTNAME",
          "hostname": "HOSTNAME", "public_ip": "PUBLIC_IP", "ip_public": "IP_PUBLIC", "eth0_ip": "ETH0_IP",
          "user_data": "USER_DATA", "user_data_old": "USERDATA", "encoding": "USERDATA_ENCODING",
          "encoding_alt": "USER_DATA_ENCODING", "username": "USERNAME", "username_sudo": "USERNAME_SUDO",
          "dsmode": "DSMODE", "dns": "DNS", "password": "PASSWORD", "crypted_password": "CRYPTED_PASSWORD",
          "password_base64": "PASSWORD_BASE64",
          "nic_mac": "mac", "nic_ip": "ip", "nic_mask": "mask", "nic_ip6": "ip6", "nic_ip6_ula": "ip6_ula",
          "nic_ip6_prefix": "ip6_prefix_length", "nic_gateway": "gateway", "nic_ip6_gateway": "ip6_gateway",
          "nic_gateway6": "gateway6", "nic_dns": "dns", "nic_search": "search_domain", "nic_mtu": "mtu"}

CLOUD = Cloud(
    "opennebula", datasource="OpenNebula", served=False,
    addresses=("CONTEXT", "CDROM"),  # filesystem labels
    fields=FIELDS,
    requests={"context": Request("context.sh", form="shell")},
)
